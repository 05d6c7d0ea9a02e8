import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { seedAgent } from './support/fixtures.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

/** Per-organization concurrency: one tenant flooding the queue cannot stall another. */
const RULES = { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] };

let stack: Stack;
let runs: TestRuns;

beforeAll(async () => {
  stack = await startStack({ env: { WORKER_CONCURRENCY: '6', EXECUTION_MAX_PER_ORG: '3', EXECUTION_MAX_PER_AGENT: '3' } });
  runs = runsOf(stack.api);
});
afterAll(async () => {
  await stack?.close();
});

describe('fair execution', () => {
  it("one organization's flood stays within its limit, and another organization's task runs promptly", async () => {
    const db = stack.api.get(DatabaseService);
    const a = await seedAgent(db, RULES);
    const b = await seedAgent(db, RULES);
    const create = (seed: typeof a, text: string) =>
      runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
    const flood = await Promise.all(Array.from({ length: 6 }, (_, i) => create(a, `hold ${i}`)));
    const working = async () =>
      Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM runs WHERE org_id = $1 AND status = 'working'`, [a.orgId]))[0]!.n);
    await expect.poll(working, { timeout: 10_000, interval: 100 }).toBe(3);
    // still three after deferred jobs came back a few times
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await working()).toBe(3);

    const t0 = Date.now();
    const other = await create(b, 'hello from another tenant');
    const done = await runs.waitUntilSettled(b.orgId, other.run.id, 10_000);
    expect(done.status).toBe('completed');
    expect(Date.now() - t0).toBeLessThan(3_000);

    // freeing slots lets the waiting ones run
    for (const { run } of flood.slice(0, 3)) await runs.cancelRun(a.orgId, run.id).catch(() => undefined);
    await expect
      .poll(async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM runs WHERE org_id = $1 AND status IN ('working', 'canceled')`, [a.orgId]))[0]!.n), {
        timeout: 10_000,
        interval: 100,
      })
      .toBeGreaterThanOrEqual(6);
    for (const { run } of flood) await runs.cancelRun(a.orgId, run.id).catch(() => undefined);
  });
});
