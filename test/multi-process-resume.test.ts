import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { testEnv } from './support/env.js';
import { readSse, type SseFrame } from './support/sse.js';
import { prng } from './support/prng.js';

/**
 * The resume guarantee across real OS processes: two API processes and one worker process, as
 * deployed (the compiled apps in dist/, built by `npm test`'s set-up), over one Postgres and one
 * Redis. A client streams a task from API A, is cut off at a random point, reconnects to API B
 * with its last sequence, and ends with exactly the task's full story. Repeated with random cut
 * points from a fixed seed, then with every Redis pub/sub connection killed mid-run.
 */
const STEPS = [
  { type: 'status', status: 'working' },
  ...Array.from({ length: 10 }, (_, i) => [
    { type: 'wait', ms: 20 },
    i % 3 === 2 ? { type: 'artifact', artifactId: `a${i}`, content: { text: `part-${i}-abcdef` }, chunks: 2 } : { type: 'message', text: `step ${i}` },
  ]).flat(),
  { type: 'status', status: 'completed' },
];
const RUNTIME = { kind: 'scripted', rules: [{ name: 'long', match: { text: '^long' }, steps: STEPS }] };
const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

const children: ChildProcess[] = [];
function start(script: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  return child;
}

async function waitReady(base: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const res = await fetch(`${base}/docs/openapi.json`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${base} did not start`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const built = existsSync('dist/apps/api/src/main.js') && existsSync('dist/apps/worker/src/main.js');
let baseA: string;
let baseB: string;
let agent: PublishedAgent;

beforeAll(async () => {
  if (!built) return;
  const env = {
    ...testEnv(),
    LOG_LEVEL: 'error',
    REDIS_PREFIX: `aaas-test-${randomUUID().slice(0, 8)}`,
    BOOTSTRAP_ORG_SLUG: `org-${randomUUID().slice(0, 8)}`,
    BOOTSTRAP_ADMIN_KEY: `aaas_${alnum(8)}_${alnum(32)}`,
    STREAM_POLL_INTERVAL_MS: '200',
    HOST: '127.0.0.1',
  };
  const [portA, portB] = [await freePort(), await freePort()];
  baseA = `http://127.0.0.1:${portA}`;
  baseB = `http://127.0.0.1:${portB}`;
  start('dist/apps/api/src/main.js', { ...env, PORT: String(portA) });
  start('dist/apps/api/src/main.js', { ...env, PORT: String(portB) });
  start('dist/apps/worker/src/main.js', env);
  await Promise.all([waitReady(baseA), waitReady(baseB)]);
  agent = await publishAgent(baseA, env.BOOTSTRAP_ADMIN_KEY, { slug: 'long', runtime: RUNTIME, a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
}, 60_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), 5000).unref();
        }),
    ),
  );
});

async function streamFromA(cutAfter: number): Promise<{ taskId: string; frames: SseFrame[]; ended: boolean }> {
  const r = await readSse(`${baseA}${agent.basePath}`, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'long run' }] } }) }, { max: cutAfter });
  return { taskId: JSON.parse(r.frames[0]!.data).result.task.id, frames: r.frames, ended: r.ended };
}

async function resumeOnB(taskId: string, last: string): Promise<SseFrame[]> {
  const r = await readSse(`${baseB}${agent.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': last }, body: rpc('SubscribeToTask', { id: taskId }) });
  if (r.body) {
    // the cut fell exactly on the terminal event: nothing is left to deliver
    expect(JSON.parse(r.body).error.code).toBe(-32004);
    return [];
  }
  expect(r.ended).toBe(true);
  return r.frames;
}

async function fullStory(taskId: string): Promise<SseFrame[]> {
  const r = await readSse(`${baseB}${agent.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': '0' }, body: rpc('SubscribeToTask', { id: taskId }) });
  return r.frames;
}

describe.skipIf(!built)('resume across API processes (compiled apps)', () => {
  it('cut on process A at random points, resumed on process B: exactly sequences of the full story (seed 7)', async () => {
    const random = prng(7);
    for (let round = 0; round < 10; round++) {
      const cut = 1 + Math.floor(random() * 16);
      const first = await streamFromA(cut);
      const rest = first.ended ? [] : await resumeOnB(first.taskId, first.frames.at(-1)!.id!);
      const seen = [...first.frames.slice(1), ...rest];
      const full = await fullStory(first.taskId);
      expect(seen.map((f) => f.id), `round ${round}, cut after ${cut}`).toEqual(full.map((f) => f.id));
      expect(seen.map((f) => f.data.replace(/"id":1,/, ''))).toEqual(full.map((f) => f.data.replace(/"id":1,/, '')));
      expect(JSON.parse(full.at(-1)!.data).result.statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
    }
  });

  it('still exact when every Redis pub/sub connection is killed mid-run', async () => {
    const first = await streamFromA(3);
    const redis = new Redis(testEnv().REDIS_URL);
    try {
      const killed = await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      expect(Number(killed)).toBeGreaterThan(0);
    } finally {
      redis.disconnect();
    }
    const rest = await resumeOnB(first.taskId, first.frames.at(-1)!.id!);
    const full = await fullStory(first.taskId);
    expect([...first.frames.slice(1), ...rest].map((f) => f.id)).toEqual(full.map((f) => f.id));
    expect(JSON.parse(full.at(-1)!.data).result.statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
  });
});
