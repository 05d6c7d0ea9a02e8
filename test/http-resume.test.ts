import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { sendMessageRpc } from './support/a2a-rpc.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * A worker process executing an `http` run is killed with SIGKILL while its backend streams NDJSON
 * operations. The lost execution is resumed: the backend is POSTed again (trigger `resumed`, the
 * same `webhook-id`, what the log holds) and either replays its answer from the start (operations
 * already recorded are dropped) or continues after what was applied. Either way the run completes
 * with a gapless log and nothing twice. A backend that declares `resumable: false` keeps its lost
 * run failed.
 */
const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const HEARTBEAT_MS = 600;
const STEPS = 6;

let stack: Stack;
let backend: http.Server;
let base: string;
let secretEnv = '';
const requests: Array<{ path: string; webhookId: string; body: any }> = [];
const workers: ChildProcess[] = [];

/** The backend's whole answer: working, STEPS × (an artifact chunk, a message), completed. */
function answer(withIds: boolean): object[] {
  const ops: object[] = [{ op: 'status', status: 'working', ...(withIds && { id: 'w' }) }];
  for (let i = 0; i < STEPS; i++) {
    ops.push({ op: 'artifact', artifactId: 'out', parts: [{ text: `c${i};` }], append: i > 0, lastChunk: i === STEPS - 1, ...(withIds && { id: `a${i}` }) });
    ops.push({ op: 'message', message: { messageId: `msg-${i}`, parts: [{ text: `step ${i}` }] }, ...(withIds && { id: `m${i}` }) });
  }
  ops.push({ op: 'status', status: 'completed', ...(withIds && { id: 'done' }) });
  return ops;
}

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const headers = { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) };
      try {
        new Webhook(SECRET).verify(raw, headers);
      } catch {
        return void res.writeHead(401).end();
      }
      const body = JSON.parse(raw);
      requests.push({ path: req.url ?? '', webhookId: headers['webhook-id'], body });
      // /replay answers the whole story again; /continue sends only what the log does not hold
      const continuing = req.url === '/continue';
      const applied = new Set<string>(body.trigger.kind === 'resumed' ? body.trigger.applied : []);
      const ops = answer(continuing).filter((op) => !(continuing && applied.has((op as { id: string }).id)));
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      let i = 0;
      const next = () => {
        if (res.destroyed) return;
        if (i === ops.length) return void res.end();
        res.write(`${JSON.stringify(ops[i++])}\n`);
        setTimeout(next, 150);
      };
      next();
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  stack = await startStack({
    worker: false,
    env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', EXECUTION_HEARTBEAT_MS: String(HEARTBEAT_MS), RUN_SWEEP_INTERVAL_MS: String(HEARTBEAT_MS / 2), RUN_STALE_AFTER_MS: '600000' },
  });
  // the organization's namespace by its id (docs/runtimes.md: a slug with a '-' is ambiguous)
  const org = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'GET', '/v1/organization');
  secretEnv = `AAAS_RUNTIME_SECRET_${org.body.id.replace(/-/g, '').toUpperCase()}_HOOK`;
  process.env[secretEnv] = SECRET;
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await stack?.close();
  await new Promise<void>((r) => backend?.close(() => r()));
  delete process.env[secretEnv];
});

function startWorker(): ChildProcess {
  const w = spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
  workers.push(w);
  return w;
}

const events = async (runId: string) =>
  stack.api.get(DatabaseService).query<{ sequence: number; type: string; payload: any }>('SELECT sequence, type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [runId]);
const leaseTrigger = async (runId: string) => (await stack.api.get(DatabaseService).query<{ t: number | null }>('SELECT lease_trigger AS t FROM runs WHERE id = $1', [runId]))[0]!.t;

const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
let held: Promise<{ frames: SseFrame[]; ended: boolean }> | undefined;

/**
 * Start a run of `slug`, kill its worker with SIGKILL mid-stream, start another; returns the run id.
 * An A2A client subscribed to the task from its start (SubscribeToTask, Last-Event-ID 0) holds its
 * stream across the crash: `held`.
 */
async function crashMidStream(slug: string): Promise<string> {
  // only the worker started here executes
  await Promise.all(workers.filter((w) => w.exitCode === null && w.signalCode === null).map((w) => new Promise((r) => (w.once('exit', r), w.kill('SIGKILL')))));
  const first = startWorker();
  const a = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug,
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
    runtime: { kind: 'http', url: `${base}/${slug.split('-')[0]}`, secretEnv, ...(slug.endsWith('-never') && { resumable: false }) },
  });
  const runId = (await sendMessageRpc(`${stack.baseUrl}${a.basePath}`, 'go', { returnImmediately: true })).body.result.task.id as string;
  held = readSse(`${stack.baseUrl}${a.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': '0' }, body: rpc('SubscribeToTask', { id: runId }) }, { timeoutMs: 60_000 });
  await expect.poll(async () => (await events(runId)).filter((e) => e.type === 'artifact.updated').length, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(2);
  await expect.poll(() => leaseTrigger(runId), { timeout: 20_000, interval: 20 }).not.toBeNull();
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  expect((await events(runId)).filter((e) => e.type === 'artifact.updated').length).toBeLessThan(STEPS);
  startWorker();
  return runId;
}

function checkCompleted(log: Awaited<ReturnType<typeof events>>): void {
  expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
  expect(log.filter((e) => e.type === 'run.status_changed').map((e) => e.payload.status)).toEqual(['working', 'completed']);
  expect(log.filter((e) => e.type === 'artifact.updated').map((e) => e.payload.parts[0].text).join('')).toBe(Array.from({ length: STEPS }, (_, i) => `c${i};`).join(''));
  const messages = log.filter((e) => e.type === 'message.added' && e.payload.message.role === 'agent').map((e) => e.payload.message.messageId);
  expect(messages).toEqual(Array.from({ length: STEPS }, (_, i) => `msg-${i}`));
  expect(log.filter((e) => e.type === 'run.execution_resumed')).toHaveLength(1);
}

describe('http runtime: a worker killed mid-stream', () => {
  it('a backend that replays its answer: resumed under the same webhook-id, what the log holds is dropped', async () => {
    const runId = await crashMidStream('replay-agent');
    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 40_000, interval: 100 }).toBe('completed');
    const log = await events(runId);
    checkCompleted(log);
    // the A2A stream held across the crash is the log's story, each event once
    const { frames, ended } = await held!;
    expect(ended).toBe(true);
    const projected = log.filter((e) => e.type !== 'run.created' && e.type !== 'run.execution_resumed' && !(e.type === 'message.added' && e.payload.message.role === 'user'));
    expect(frames.map((f) => f.id)).toEqual(projected.map((e) => String(e.sequence)));
    const chunks = frames.flatMap((f) => {
      const u = JSON.parse(f.data).result.artifactUpdate;
      return u ? [u.artifact.parts[0].text as string] : [];
    });
    expect(chunks.join('')).toBe(Array.from({ length: STEPS }, (_, i) => `c${i};`).join(''));
    const sent = requests.filter((r) => r.body.run.runId === runId);
    expect(sent.map((r) => r.body.trigger.kind)).toEqual(['created', 'resumed']);
    expect(sent[1]!.webhookId).toBe(sent[0]!.webhookId);
    expect(sent[1]!.body.trigger).toMatchObject({ attempt: 1, lost: { kind: 'created' }, lastSequence: expect.any(Number) });
    // the applied chunks are named by artifact and index, messages by their messageId
    const key = sent[0]!.webhookId.split('_').at(-1);
    expect(sent[1]!.body.trigger.applied).toEqual(expect.arrayContaining([`${key}:out#0`, `${key}:out#1`, 'message:msg-0']));
  }, 90_000);

  it('a backend that continues: sent only what the log lacks, by operation id', async () => {
    const runId = await crashMidStream('continue-agent');
    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 40_000, interval: 100 }).toBe('completed');
    const log = await events(runId);
    checkCompleted(log);
    const sent = requests.filter((r) => r.body.run.runId === runId);
    expect(sent[1]!.body.trigger.applied).toEqual(expect.arrayContaining(['w', 'a0', 'm0', 'a1']));
    expect(sent[1]!.body.trigger.lastSequence).toBeLessThan(log.at(-1)!.sequence);
  }, 90_000);

  it('a backend that declares it cannot resume: the lost run fails as before', async () => {
    const runId = await crashMidStream('replay-never');
    await expect.poll(async () => (await events(runId)).at(-1)?.payload?.status, { timeout: 20_000, interval: 100 }).toBe('failed');
    const log = await events(runId);
    expect(log.at(-1)!.payload.reason).toBe('the execution was lost (its lease expired)');
    expect(log.filter((e) => e.type === 'run.execution_resumed')).toHaveLength(0);
    expect(requests.filter((r) => r.body.run.runId === runId)).toHaveLength(1);
  }, 90_000);
});
