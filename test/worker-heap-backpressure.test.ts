import { randomUUID } from 'node:crypto';
import { getHeapStatistics } from 'node:v8';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { createWorkerApp } from '../apps/worker/src/worker.factory.js';
import { seedAgent } from './support/fixtures.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

const QUICK = { kind: 'scripted', rules: [{ match: { text: '.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'message', text: 'hi' }, { type: 'status', status: 'completed' }] }] };

/**
 * WORKER_HEAP_HIGH_WATER_PCT: a worker whose heap is above it starts nothing new — its dispatches
 * wait (back-pressure), they are not failed — and they run once a worker with room takes them.
 */
describe('worker memory back-pressure', () => {
  let stack: Stack;
  let runs: TestRuns;
  let first: INestApplicationContext | undefined;
  let second: INestApplicationContext | undefined;

  beforeAll(async () => {
    stack = await startStack({ worker: false });
    // 1 % of the heap limit: this test process (vitest, Nest, the API) is above it from the start
    first = await createWorkerApp({ ...stack.env, WORKER_HEAP_HIGH_WATER_PCT: '1' });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await first?.close();
    await second?.close();
    await stack?.close();
  });

  it('a worker above its heap high water leaves new runs waiting, not failed; a worker with room runs each once', async () => {
    const heap = getHeapStatistics();
    expect(heap.used_heap_size).toBeGreaterThan(heap.heap_size_limit / 100);
    const db = stack.api.get(DatabaseService);
    const agent = await seedAgent(db, QUICK);
    const created = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        runs.createRun({ orgId: agent.orgId, agentId: agent.agentId, revisionId: agent.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: `n${i}` }] } }),
      ),
    );
    const ids = created.map((c) => c.run.id);
    const statuses = async () => (await db.query<{ status: string }>('SELECT status FROM runs WHERE id = ANY($1::uuid[]) ORDER BY id', [ids])).map((r) => r.status);
    // the worker takes the jobs and starts none of them: they wait, unclaimed
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await statuses()).toEqual(['submitted', 'submitted', 'submitted']);
    expect(Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches WHERE run_id = ANY($1::uuid[])', [ids]))[0]!.n)).toBe(3);

    // the worker stops (its parked dispatches go back to the queue); one with room runs them
    await first!.close();
    first = undefined;
    second = await createWorkerApp({ ...stack.env, WORKER_HEAP_HIGH_WATER_PCT: '100' });
    for (const id of ids) {
      const done = await runs.waitUntilSettled(agent.orgId, id, 15_000);
      expect(done.status).toBe('completed');
      const events = await runs.readEvents(agent.orgId, id, 0);
      expect(events.map((e) => e.event.type)).toEqual(['run.created', 'message.added', 'run.status_changed', 'message.added', 'run.status_changed']);
    }
  });
});
