import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { startUpstreamAgent, type UpstreamAgent } from './support/upstream-agent.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * A worker process executing an `a2a` run is killed with SIGKILL while the upstream streams. The
 * lost execution is resumed (the runtime is resumable): another worker re-attaches to the upstream
 * task it saved, reconciles against the log, and the run completes with every chunk exactly once,
 * a gapless log and one `run.execution_resumed` event.
 */
// 1.5 × this is the lease: 500 ms of slack for a loaded CI machine and a worker that just started (600 left 300, and a second resumption once)
const HEARTBEAT_MS = 1000;
let stack: Stack;
let upstream: UpstreamAgent;
let agent: PublishedAgent;
const workers: ChildProcess[] = [];

function startWorker(): ChildProcess {
  const w = spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  upstream = await startUpstreamAgent();
  stack = await startStack({
    worker: false,
    env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', EXECUTION_HEARTBEAT_MS: String(HEARTBEAT_MS), RUN_SWEEP_INTERVAL_MS: String(HEARTBEAT_MS / 2), RUN_STALE_AFTER_MS: '600000' },
  });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'reporter', runtime: { kind: 'a2a', cardUrl: upstream.cardUrl } });
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await stack?.close();
  await upstream?.close();
});

const events = async (runId: string) =>
  stack.api.get(DatabaseService).query<{ sequence: number; type: string; payload: any }>('SELECT sequence, type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [runId]);

describe('a2a runtime: a worker killed mid-run', () => {
  it('re-attaches to the upstream task: no duplicated and no missing event', async () => {
    const first = startWorker();
    const runId = await send('stream 16 250');
    // some chunks are in the log, more are coming
    await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'artifact.updated').length, { timeout: 20_000, interval: 50 }).toBeGreaterThanOrEqual(3);
    first.kill('SIGKILL');
    const killedWith = (await events(runId)).filter((e) => e.type === 'artifact.updated').length;
    expect(killedWith).toBeLessThan(16);
    startWorker();

    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 40_000, interval: 100 }).toBe('completed');
    const log = await events(runId);
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    const resumed = log.filter((e) => e.type === 'run.execution_resumed');
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.payload.attempt).toBe(1);
    // every chunk once, in order, whether it arrived live or through reconciliation
    const text = log
      .filter((e) => e.type === 'artifact.updated')
      .flatMap((e) => e.payload.parts.map((p: { text: string }) => p.text))
      .join('');
    expect(text).toBe(Array.from({ length: 16 }, (_, i) => `chunk ${i + 1};`).join(''));
    const agentMessages = log.filter((e) => e.payload?.message?.role === 'agent').map((e) => e.payload.message.messageId);
    expect(new Set(agentMessages).size).toBe(agentMessages.length);
    // one upstream task, saved once
    expect(log.filter((e) => e.type === 'run.runtime_state_saved')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'run.status_changed' && e.payload.status === 'completed')).toHaveLength(1);
  }, 90_000);

  it('a worker stopped with SIGTERM hands the run on at once: resumed by the next worker', async () => {
    // only the worker started here executes
    await Promise.all(workers.filter((w) => w.exitCode === null && w.signalCode === null).map((w) => new Promise((r) => (w.once('exit', r), w.kill('SIGKILL')))));
    const first = startWorker();
    const runId = await send('stream 12 250');
    await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'artifact.updated').length, { timeout: 20_000, interval: 50 }).toBeGreaterThanOrEqual(2);
    first.kill('SIGTERM');
    await new Promise((r) => first.once('exit', r));
    // resumed by the stopping worker itself, not later by a sweeper
    const resumed = (await events(runId)).filter((e) => e.type === 'run.execution_resumed');
    expect(resumed.map((e) => e.payload.reason)).toEqual(['the worker executing it stopped']);
    startWorker();
    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 40_000, interval: 100 }).toBe('completed');
    const log = await events(runId);
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    const text = log
      .filter((e) => e.type === 'artifact.updated')
      .flatMap((e) => e.payload.parts.map((p: { text: string }) => p.text))
      .join('');
    expect(text).toBe(Array.from({ length: 12 }, (_, i) => `chunk ${i + 1};`).join(''));
  }, 90_000);
});

async function send(text: string): Promise<string> {
  return (await sendMessageRpc(`${stack.baseUrl}${agent.basePath}`, text, { returnImmediately: true })).body.result.task.id;
}
