import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { RunNotifier } from '#libs/runs';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';
import { prng } from './support/prng.js';

/**
 * Two API instances (A with the worker, B without) over one Postgres and one Redis prefix. A
 * client streams a task from A, is cut off at a random point, reconnects to B with its last
 * sequence, and must end with exactly the task's full story: no gap, no duplicate, no invented
 * event. Repeated with random cut points from a fixed seed; once with B's Redis wake-ups dropped.
 */
const STEPS = [{ type: 'status', status: 'working' }, ...Array.from({ length: 12 }, (_, i) => [
  { type: 'wait', ms: 15 },
  i % 3 === 2 ? { type: 'artifact', artifactId: `a${i}`, content: { text: `chunk-${i}-abcdef` }, chunks: 2 } : { type: 'message', text: `step ${i}` },
]).flat(), { type: 'status', status: 'completed' }];

const RUNTIME = { kind: 'scripted', rules: [{ name: 'long', match: { text: '^long' }, steps: STEPS }] };
const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 7, method, params });

let stack: Stack;
let apiB: NestFastifyApplication;
let baseB: string;
let agent: PublishedAgent;

beforeAll(async () => {
  stack = await startStack({ env: { STREAM_POLL_INTERVAL_MS: '200' } });
  apiB = await createApiApp(stack.env);
  await apiB.listen(0, '127.0.0.1');
  const addr = apiB.getHttpServer().address();
  baseB = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'long', runtime: RUNTIME, a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
});

afterAll(async () => {
  await apiB?.close();
  await stack?.close();
});

async function cutAndResume(cutAfter: number): Promise<{ taskId: string; seen: SseFrame[] }> {
  const urlA = `${stack.baseUrl}${agent.basePath}`;
  const urlB = `${baseB}${agent.basePath}`;
  const first = await readSse(urlA, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'long run' }] } }) }, { max: cutAfter });
  const taskId = JSON.parse(first.frames[0]!.data).result.task.id as string;
  const last = first.frames.at(-1)!.id!;
  if (first.ended) return { taskId, seen: first.frames.slice(1) };
  const rest = await readSse(urlB, { method: 'POST', headers: { ...V1, 'last-event-id': last }, body: rpc('SubscribeToTask', { id: taskId }) });
  if (rest.body) {
    // the cut fell exactly at the terminal event: nothing more to deliver is the right answer
    expect(JSON.parse(rest.body).error.code).toBe(-32004);
    return { taskId, seen: first.frames.slice(1) };
  }
  expect(rest.ended).toBe(true);
  return { taskId, seen: [...first.frames.slice(1), ...rest.frames] };
}

async function fullStory(taskId: string): Promise<SseFrame[]> {
  const r = await readSse(`${baseB}${agent.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': '0' }, body: rpc('SubscribeToTask', { id: taskId }) });
  expect(r.ended).toBe(true);
  return r.frames;
}

describe('resume across API instances', () => {
  it('cut on A at random points, resumed on B: exactly the full story every time (seed 2026)', async () => {
    const random = prng(2026);
    for (let round = 0; round < 12; round++) {
      const cut = 1 + Math.floor(random() * 20);
      const { taskId, seen } = await cutAndResume(cut);
      const full = await fullStory(taskId);
      expect(seen.map((f) => f.id), `round ${round}, cut after ${cut} frames`).toEqual(full.map((f) => f.id));
      expect(seen.map((f) => JSON.parse(f.data).result)).toEqual(full.map((f) => JSON.parse(f.data).result));
      expect(new Set(seen.map((f) => f.id)).size).toBe(seen.length);
      expect(JSON.parse(full.at(-1)!.data).result.statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
    }
  });

  it('still exact when B loses its Redis wake-ups mid-run (the poll catches up)', async () => {
    const urlA = `${stack.baseUrl}${agent.basePath}`;
    const first = await readSse(urlA, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'long drop' }] } }) }, { max: 3 });
    const taskId = JSON.parse(first.frames[0]!.data).result.task.id as string;
    (apiB.get(RunNotifier) as unknown as { sub?: { disconnect(): void } }).sub?.disconnect();
    const rest = await readSse(`${baseB}${agent.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': first.frames.at(-1)!.id! }, body: rpc('SubscribeToTask', { id: taskId }) });
    expect(rest.ended).toBe(true);
    const full = await fullStory(taskId);
    expect([...first.frames.slice(1), ...rest.frames].map((f) => f.id)).toEqual(full.map((f) => f.id));
  });
});
