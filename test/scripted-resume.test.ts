import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * A worker process executing a `scripted` run is killed with SIGKILL mid-run (artifacts in chunks,
 * waits between steps). The lost execution is resumed: another worker replays the script against
 * the run's log and records only what is missing. The run completes, its log is gapless, no
 * message, artifact chunk or status appears twice, and the A2A streams a client held across the
 * crash — one never cut, one cut and resumed with Last-Event-ID — tell exactly the log's story.
 */
const HEARTBEAT_MS = 600;
const ARTIFACTS = 6;
const CHUNKS = 4;
const STEPS = [
  { type: 'status', status: 'working' },
  ...Array.from({ length: ARTIFACTS }, (_, i) => [
    { type: 'artifact', artifactId: `r${i}`, content: { text: `chunk-${i}-abcdefgh` }, chunks: CHUNKS },
    { type: 'wait', ms: 250 },
    { type: 'message', text: `step ${i}` },
  ]).flat(),
];
const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });

let stack: Stack;
let agent: PublishedAgent;
const workers: ChildProcess[] = [];

function startWorker(): ChildProcess {
  const w = spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
  workers.push(w);
  return w;
}

async function stopAll(): Promise<void> {
  await Promise.all(workers.filter((w) => w.exitCode === null && w.signalCode === null).map((w) => new Promise((r) => (w.once('exit', r), w.kill('SIGKILL')))));
}

beforeAll(async () => {
  // only leases detect losses here: the stale rule is pushed far away
  stack = await startStack({
    worker: false,
    env: { EXECUTION_HEARTBEAT_MS: String(HEARTBEAT_MS), RUN_SWEEP_INTERVAL_MS: String(HEARTBEAT_MS / 2), RUN_STALE_AFTER_MS: '600000', STREAM_POLL_INTERVAL_MS: '200' },
  });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'chunky',
    runtime: { kind: 'scripted', rules: [{ name: 'long', match: { text: '^long' }, steps: STEPS }] },
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
}, 60_000);

afterAll(async () => {
  await stopAll();
  await stack?.close();
});

const events = async (runId: string) =>
  stack.api.get(DatabaseService).query<{ sequence: number; type: string; payload: any }>('SELECT sequence, type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [runId]);

const url = () => `${stack.baseUrl}${agent.basePath}`;

/** Open SendStreamingMessage; the task id comes with the first frame. */
async function openStream(max?: number): Promise<{ taskId: Promise<string>; done: Promise<{ frames: SseFrame[]; ended: boolean }> }> {
  let resolveId!: (id: string) => void;
  const taskId = new Promise<string>((r) => (resolveId = r));
  const body = rpc('SendStreamingMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'long run' }] } });
  const done = readSse(url(), { method: 'POST', headers: V1, body }, { ...(max !== undefined && { max }), timeoutMs: 60_000, onFrame: (f, i) => i === 0 && resolveId(JSON.parse(f.data).result.task.id) });
  return { taskId, done };
}

async function subscribe(taskId: string, last: string): Promise<SseFrame[]> {
  const r = await readSse(url(), { method: 'POST', headers: { ...V1, 'last-event-id': last }, body: rpc('SubscribeToTask', { id: taskId }) }, { timeoutMs: 60_000 });
  expect(r.ended).toBe(true);
  return r.frames;
}

/** The checks every crash must pass: completed, gapless, nothing twice, every chunk in order. */
function checkLog(log: Awaited<ReturnType<typeof events>>): void {
  expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
  expect(log.at(-1)!.payload.status).toBe('completed');
  const opIds = log.flatMap((e) => (e.payload.opId ? [e.payload.opId as string] : []));
  expect(new Set(opIds).size).toBe(opIds.length);
  const chunks = log.filter((e) => e.type === 'artifact.updated').map((e) => `${e.payload.artifactId}:${e.payload.parts[0].text}`);
  expect(new Set(chunks).size).toBe(chunks.length);
  for (let i = 0; i < ARTIFACTS; i++) {
    const text = log.filter((e) => e.type === 'artifact.updated' && e.payload.artifactId === `r${i}`).map((e) => e.payload.parts[0].text as string);
    expect(text.join('')).toBe(`chunk-${i}-abcdefgh`);
    expect(text).toHaveLength(CHUNKS);
  }
  const messages = log.filter((e) => e.type === 'message.added' && e.payload.message.role === 'agent').map((e) => e.payload.message.parts[0].text);
  expect(messages).toEqual(Array.from({ length: ARTIFACTS }, (_, i) => `step ${i}`));
  const statuses = log.filter((e) => e.type === 'run.status_changed').map((e) => e.payload.status);
  expect(statuses).toEqual(['working', 'completed']);
}

/** The sequences an A2A stream shows of the log: all but bookkeeping and the caller's own input. */
const projected = (log: Awaited<ReturnType<typeof events>>) =>
  log.filter((e) => e.type !== 'run.created' && e.type !== 'run.execution_resumed' && !(e.type === 'message.added' && e.payload.message.role === 'user')).map((e) => String(e.sequence));

describe('scripted runtime: a worker killed mid-run', () => {
  it('resumes on another worker: completes, gapless, nothing twice; streams held across the crash equal the log', async () => {
    const first = startWorker();
    const held = await openStream();
    const runId = await held.taskId;
    // a second client is cut after a few frames (and resumes later with Last-Event-ID)
    const cut = await readSse(url(), { method: 'POST', headers: { ...V1, 'last-event-id': '0' }, body: rpc('SubscribeToTask', { id: runId }) }, { max: 4, timeoutMs: 30_000 });
    // some chunks are in the log, more are coming
    await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'artifact.updated').length, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(CHUNKS + 2);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const atKill = (await events(runId)).filter((e) => e.type === 'artifact.updated').length;
    expect(atKill).toBeLessThan(ARTIFACTS * CHUNKS);
    startWorker();

    const { frames, ended } = await held.done;
    expect(ended).toBe(true);
    const log = await events(runId);
    checkLog(log);
    const resumed = log.filter((e) => e.type === 'run.execution_resumed');
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.payload).toMatchObject({ attempt: 1, reason: expect.stringContaining('lost') });

    // the held stream (after the Task snapshot) is the log's story, each event once
    expect(frames.slice(1).map((f) => f.id)).toEqual(projected(log));
    // the cut client resumes with Last-Event-ID: exactly the rest
    const rest = await subscribe(runId, cut.frames.at(-1)!.id!);
    expect([...cut.frames, ...rest].map((f) => f.id)).toEqual(projected(log));
    // and both tell what a fresh reader of the whole log sees, frame for frame
    const full = await subscribe(runId, '0');
    expect(frames.slice(1).map((f) => f.data.replace(/"id":1,/, ''))).toEqual(full.map((f) => f.data.replace(/"id":1,/, '')));
    const artifactFrames = full.flatMap((f) => {
      const u = JSON.parse(f.data).result.artifactUpdate;
      return u ? [`${u.artifact.artifactId}:${u.artifact.parts[0].text}`] : [];
    });
    expect(new Set(artifactFrames).size).toBe(ARTIFACTS * CHUNKS);
    expect(artifactFrames).toHaveLength(ARTIFACTS * CHUNKS);
  }, 90_000);

  it('a worker stopped with SIGTERM hands the run on at once: resumed by the next worker, nothing twice', async () => {
    await stopAll();
    const first = startWorker();
    const held = await openStream();
    const runId = await held.taskId;
    await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'artifact.updated').length, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(CHUNKS + 1);
    first.kill('SIGTERM');
    await new Promise((r) => first.once('exit', r));
    // handed on by the stopping worker itself, not later by a sweeper
    const handedOn = (await events(runId)).filter((e) => e.type === 'run.execution_resumed');
    expect(handedOn.map((e) => e.payload)).toEqual([{ reason: 'the worker executing it stopped', attempt: 1, handedOn: true }]);
    startWorker();
    const { frames, ended } = await held.done;
    expect(ended).toBe(true);
    const log = await events(runId);
    checkLog(log);
    expect(frames.slice(1).map((f) => f.id)).toEqual(projected(log));
  }, 90_000);

  it('past EXECUTION_MAX_RESUMPTIONS lost executions the run fails with the reason', async () => {
    await stopAll();
    const first = startWorker();
    const held = await openStream();
    const runId = await held.taskId;
    // killed once its execution holds a lease (only a lease tells the sweeper it was lost here)
    const leaseTrigger = async () => (await stack.api.get(DatabaseService).query<{ t: number | null }>('SELECT lease_trigger AS t FROM runs WHERE id = $1', [runId]))[0]!.t;
    await expect.poll(leaseTrigger, { timeout: 20_000, interval: 20 }).not.toBeNull();
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    // 3 resumptions (the default budget), each killed in turn once it holds its lease
    for (let attempt = 1; attempt <= 3; attempt++) {
      await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'run.execution_resumed').length, { timeout: 20_000, interval: 50 }).toBe(attempt);
      const resumedAt = (await events(runId)).filter((e) => e.type === 'run.execution_resumed').at(-1)!.sequence;
      const w = startWorker();
      await expect.poll(leaseTrigger, { timeout: 20_000, interval: 20 }).toBe(resumedAt);
      w.kill('SIGKILL');
      await new Promise((r) => w.once('exit', r));
    }
    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 20_000, interval: 50 }).toBe('failed');
    const log = await events(runId);
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    expect(log.at(-1)!.payload.reason).toBe('the execution was lost (its lease expired) (after 3 resumptions)');
    // failed by this API's sweeper (no worker is alive any more), and counted
    const exhausted = (await stack.api.get(Metrics).resumptions.get()).values.find((v) => v.labels.outcome === 'exhausted');
    expect(exhausted?.value).toBe(1);
    const { ended } = await held.done;
    expect(ended).toBe(true);
    const chunks = log.filter((e) => e.type === 'artifact.updated').map((e) => `${e.payload.artifactId}:${e.payload.parts[0].text}`);
    expect(new Set(chunks).size).toBe(chunks.length);
  }, 120_000);
});
