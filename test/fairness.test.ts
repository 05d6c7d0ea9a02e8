import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { RunExecutionQueue } from '#libs/runs';
import { seedAgent } from './support/fixtures.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

/** Per-organization concurrency: one tenant flooding the queue cannot stall another. */
const RULES = { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] };

type Seed = Awaited<ReturnType<typeof seedAgent>>;

function creator(runs: TestRuns) {
  return (seed: Seed, text: string) =>
    runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
}

describe('fair execution with a static per-organization limit', () => {
  let stack: Stack;
  let runs: TestRuns;

  beforeAll(async () => {
    stack = await startStack({ env: { WORKER_CONCURRENCY: '6', EXECUTION_MAX_PER_ORG: '3', EXECUTION_MAX_PER_AGENT: '3' } });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("one organization's flood stays within its limit, and another organization's task runs promptly", async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const a = await seedAgent(db, RULES);
    const b = await seedAgent(db, RULES);
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

/**
 * The default: no static per-org limit, each organization's share adapts to how many are active
 * (slots / active orgs) and a reserve is kept for organizations with nothing running.
 */
describe('fair share across many organizations (adaptive)', () => {
  const SLOW = {
    kind: 'scripted',
    rules: [{ match: { text: '.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'wait', ms: 1_500 }, { type: 'message', text: 'half way' }, { type: 'wait', ms: 1_500 }, { type: 'status', status: 'completed' }] }],
  };
  const QUICK = { kind: 'scripted', rules: [{ match: { text: '.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'message', text: 'hi' }, { type: 'status', status: 'completed' }] }] };
  let stack: Stack;
  let runs: TestRuns;

  beforeAll(async () => {
    stack = await startStack({ env: { WORKER_CONCURRENCY: '10' } });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("two busy organizations (25 slow runs each) do not keep a third one's run waiting; every run completes, in order within its org", async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const [a, b, c] = [await seedAgent(db, SLOW), await seedAgent(db, SLOW), await seedAgent(db, QUICK)];
    const flood: Array<{ org: Seed; runId: string }> = [];
    // one after the other, interleaved: creation order is each org's enqueue order
    for (let i = 0; i < 25; i++) {
      for (const org of [a, b]) flood.push({ org, runId: (await create(org, `slow ${i}`)).run.id });
    }
    const count = async (orgId: string, status: string) =>
      Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM runs WHERE org_id = $1 AND status = $2::run_status`, [orgId, status]))[0]!.n);
    // both busy organizations hold slots (the worker is full but for its reserve)
    await expect.poll(async () => (await count(a.orgId, 'working')) + (await count(b.orgId, 'working')), { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(8);
    expect(await count(a.orgId, 'working')).toBeGreaterThanOrEqual(3);
    expect(await count(b.orgId, 'working')).toBeGreaterThanOrEqual(3);

    const t0 = Date.now();
    const other = await create(c, 'hello from a third tenant');
    await expect.poll(async () => (await runs.getRun(c.orgId, other.run.id))?.status, { timeout: 10_000, interval: 25 }).not.toBe('submitted');
    const startedAfter = Date.now() - t0;
    // it started while both busy organizations still had runs waiting for a slot
    expect(await count(a.orgId, 'submitted')).toBeGreaterThan(0);
    expect(await count(b.orgId, 'submitted')).toBeGreaterThan(0);
    expect(startedAfter).toBeLessThan(2_000);
    expect((await runs.waitUntilSettled(c.orgId, other.run.id, 10_000)).status).toBe('completed');

    // every run of the busy organizations completes (none lost while it waited)
    for (const f of flood) expect((await runs.waitUntilSettled(f.org.orgId, f.runId, 60_000)).status).toBe('completed');

    // within an organization, runs started in the order they were enqueued (admitted together at
    // most: a later run never started well before an earlier one)
    for (const org of [a, b]) {
      const rows = await db.query<{ started: Date }>(
        `SELECT e.created_at AS started FROM runs r JOIN run_events e ON e.run_id = r.id AND e.sequence = 3
          WHERE r.org_id = $1 ORDER BY r.created_at, r.id`,
        [org.orgId],
      );
      expect(rows).toHaveLength(25);
      for (let i = 1; i < rows.length; i++) {
        const latestBefore = Math.max(...rows.slice(0, i).map((r) => new Date(r.started).getTime()));
        expect(new Date(rows[i]!.started).getTime(), `run ${i} of its org`).toBeGreaterThanOrEqual(latestBefore - 300);
      }
    }
  }, 120_000);
});

/**
 * A backlog larger than a worker's parking: the youngest parked dispatches go back to the queue
 * (delayed, behind a paused intake). They must leave their organization's line while they wait
 * there, or the parked ones behind them could not start until the line forgot them (a stall of
 * seconds per eviction, which made a 27,000-run backlog drain at a tenth of its rate).
 */
describe('a backlog past the parking', () => {
  const HOLD_THEN_ECHO = {
    kind: 'scripted',
    rules: [
      { match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
      { match: { text: '.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'status', status: 'completed' }] },
    ],
  };
  let stack: Stack;
  let runs: TestRuns;

  beforeAll(async () => {
    // parking: 10 per worker before the intake pauses, 20 kept (PARK_FACTOR × WORKER_CONCURRENCY)
    stack = await startStack({ env: { WORKER_CONCURRENCY: '1', EXECUTION_MAX_PER_ORG: '1', EXECUTION_MAX_PER_AGENT: '1' } });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('dispatches handed back to the queue do not hold their line; the whole backlog completes once the slot frees', async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const org = await seedAgent(db, HOLD_THEN_ECHO);
    const hold = await create(org, 'hold');
    await expect.poll(async () => (await runs.getRun(org.orgId, hold.run.id))?.status, { timeout: 10_000, interval: 50 }).toBe('working');
    const backlog = await Promise.all(Array.from({ length: 60 }, (_, i) => create(org, `echo ${i}`)));

    const queue = stack.api.get(RunExecutionQueue).queue;
    const redis = new Redis(stack.env.REDIS_URL!);
    const line = `${stack.env.REDIS_PREFIX}:exec:org:${org.orgId}:line`;
    const queued = async () => {
      const jobs = await queue.getJobs(['delayed', 'waiting', 'prioritized']);
      return jobs.flatMap((j) => (j.data.dispatches ?? []).map((d) => `${(d.job as { runId: string }).runId}-${d.triggerSequence}`));
    };
    // the worker parks some of the backlog and hands the youngest back to the queue
    await expect.poll(async () => (await queued()).length, { timeout: 10_000, interval: 50 }).toBeGreaterThan(0);
    await expect.poll(() => redis.zcard(line), { timeout: 10_000, interval: 50 }).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) {
      const inQueue = await queued();
      const inLine = new Set(await redis.zrange(line, '0', '-1'));
      expect(inQueue.filter((m) => inLine.has(m)), 'members waiting in the queue but holding the line').toEqual([]);
      await new Promise((r) => setTimeout(r, 100));
    }

    redis.disconnect();
    await runs.cancelRun(org.orgId, hold.run.id);
    for (const { run } of backlog) expect((await runs.waitUntilSettled(org.orgId, run.id, 60_000)).status).toBe('completed');
  }, 120_000);
});
