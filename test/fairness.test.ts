import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { Metrics } from '#libs/metrics';
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
 * A backlog larger than a worker's parking: the worker stops taking jobs while its parking is
 * full, and a dispatch it took stays parked until it runs. Handing the youngest back to the queue
 * instead made a backlog cycle (27,000 runs taken from the queue 208,000 times) and, while they
 * waited there behind the paused intake, held their org's line (stalls of seconds).
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
    // parking: the intake pauses at 10 parked (PARK_FACTOR × WORKER_CONCURRENCY); completed jobs
    // kept to count them; the relay's safety net out of the way (once the queue holds nothing
    // waiting it enqueues unclaimed rows again, parked ones included: harmless, the claim runs
    // each once, but it is not what is counted here)
    stack = await startStack({
      env: { WORKER_CONCURRENCY: '1', EXECUTION_MAX_PER_ORG: '1', EXECUTION_MAX_PER_AGENT: '1', QUEUE_KEEP_COMPLETED_JOBS: '1000', OUTBOX_RELAY_INTERVAL_MS: '60000' },
    });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('each dispatch is taken from the queue once, none waits in the queue holding its line, and the backlog completes once the slot frees', async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const org = await seedAgent(db, HOLD_THEN_ECHO);
    const hold = await create(org, 'hold');
    await expect.poll(async () => (await runs.getRun(org.orgId, hold.run.id))?.status, { timeout: 10_000, interval: 50 }).toBe('working');
    const backlog: Array<Awaited<ReturnType<ReturnType<typeof creator>>>> = [];
    // in waves, so that the backlog arrives as several jobs
    for (let w = 0; w < 6; w++) backlog.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => create(org, `echo ${w}.${i}`)))));

    const queue = stack.api.get(RunExecutionQueue).queue;
    const redis = new Redis(stack.env.REDIS_URL!);
    const line = `${stack.env.REDIS_PREFIX}:exec:org:${org.orgId}:line`;
    const members = async (states: Array<'delayed' | 'waiting' | 'prioritized' | 'active' | 'completed'>) => {
      const jobs = await queue.getJobs(states);
      return jobs.flatMap((j) => (j.data.dispatches ?? []).map((d) => `${(d.job as { runId: string }).runId}-${d.triggerSequence}`));
    };
    // the worker took the backlog (parked, its intake paused) or left it queued; nothing queued holds the line
    await expect.poll(() => redis.zcard(line), { timeout: 10_000, interval: 50 }).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) {
      const inQueue = await members(['delayed', 'waiting', 'prioritized']);
      const inLine = new Set(await redis.zrange(line, '0', '-1'));
      expect(inQueue.filter((m) => inLine.has(m)), 'members waiting in the queue but holding the line').toEqual([]);
      await new Promise((r) => setTimeout(r, 100));
    }
    redis.disconnect();

    await runs.cancelRun(org.orgId, hold.run.id);
    for (const { run } of backlog) expect((await runs.waitUntilSettled(org.orgId, run.id, 60_000)).status).toBe('completed');
    // every dispatch went through the queue exactly once (a hand-back would add a second job carrying it)
    await expect.poll(async () => (await members(['active', 'waiting', 'delayed'])).length, { timeout: 10_000, interval: 50 }).toBe(0);
    const taken = await members(['completed']);
    expect(taken).toHaveLength(backlog.length + 1);
    expect(new Set(taken).size).toBe(backlog.length + 1);
  }, 120_000);
});

/**
 * A slot whose execution ends goes on to the next parked dispatch of its organization and agent
 * in the same worker, without a round trip to the slot sets, while their last answer allows it:
 * the limits and each organization's order hold as they do when slots go back and are asked for.
 */
describe('slots handed on within a worker', () => {
  const SHORT = { kind: 'scripted', rules: [{ match: { text: '.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'wait', ms: 40 }, { type: 'status', status: 'completed' }] }] };
  let stack: Stack;
  let runs: TestRuns;
  /** Slots the worker has handed on so far (aaas_execution_slot_hand_ons_total). */
  const handOns = async () => (await stack.worker!.get(Metrics).slotHandOns.get()).values[0]?.value ?? 0;

  beforeAll(async () => {
    // a spare slot waits 1 s here (50 ms by default): long enough for the next message of a test
    // on a loaded machine
    stack = await startStack({ env: { WORKER_CONCURRENCY: '6', EXECUTION_MAX_PER_AGENT: '2', EXECUTION_SPARE_SLOT_MS: '1000' } });
    runs = runsOf(stack.api);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("two agents of one organization, each at its limit with runs parked: slots are handed on, neither agent runs more than its limit, and the org's runs start in order", async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const a = await seedAgent(db, SHORT);
    const b = await seedAgent(db, SHORT, { orgId: a.orgId });
    const made: string[] = [];
    // in waves of four of a's then four of b's: each wave arrives while the last one's runs are
    // parked, and when one of b's ends, the org's oldest parked run is often one of a's
    for (let w = 0; w < 4; w++) {
      for (let i = 0; i < 8; i++) made.push((await create(i < 4 ? a : b, `run ${w}.${i}`)).run.id);
    }
    for (const id of made) expect((await runs.waitUntilSettled(a.orgId, id, 60_000)).status).toBe('completed');

    expect(await handOns(), 'slots handed on').toBeGreaterThan(4);
    // an execution starts (working) only after the one whose slot it took has ended (completed), so
    // the log's times tell how many of an agent's runs executed at once
    for (const agent of [a, b]) {
      const spans = await db.query<{ started: Date; ended: Date }>(
        `SELECT min(e.created_at) FILTER (WHERE e.type = 'run.status_changed' AND e.payload->>'status' = 'working') AS started,
                max(e.created_at) AS ended
           FROM runs r JOIN run_events e ON e.org_id = r.org_id AND e.run_id = r.id
          WHERE r.org_id = $1 AND r.agent_id = $2 GROUP BY r.id`,
        [a.orgId, agent.agentId],
      );
      const points = spans.flatMap((x) => [
        { t: new Date(x.started).getTime(), d: 1 },
        { t: new Date(x.ended).getTime(), d: -1 },
      ]);
      // ends before starts at the same instant
      points.sort((x, y) => x.t - y.t || x.d - y.d);
      let now = 0;
      let most = 0;
      for (const x of points) most = Math.max(most, (now += x.d));
      expect(most, 'runs of one agent executing at once').toBeLessThanOrEqual(2);
    }
    // per agent, runs started in the order they were created (one batch may start together)
    for (const agent of [a, b]) {
      const rows = await db.query<{ started: Date }>(
        `SELECT e.created_at AS started FROM runs r JOIN run_events e ON e.org_id = r.org_id AND e.run_id = r.id AND e.sequence = 3
          WHERE r.org_id = $1 AND r.agent_id = $2 ORDER BY r.created_at, r.id`,
        [a.orgId, agent.agentId],
      );
      expect(rows).toHaveLength(16);
      for (let i = 1; i < rows.length; i++) {
        const latestBefore = Math.max(...rows.slice(0, i).map((r) => new Date(r.started).getTime()));
        expect(new Date(rows[i]!.started).getTime(), `run ${i} of its agent`).toBeGreaterThanOrEqual(latestBefore - 300);
      }
    }
  }, 120_000);

  it("one message after another: each new run takes the slot its predecessor left, and the last slot goes back once nobody takes it", async () => {
    const db = stack.api.get(DatabaseService);
    const create = creator(runs);
    const quick = await seedAgent(db, { kind: 'scripted', rules: [{ match: { text: '.*' }, steps: [{ type: 'status', status: 'completed' }] }] });
    const redis = new Redis(stack.env.REDIS_URL!);
    const slotsOfAgent = () => redis.zcard(`${stack.env.REDIS_PREFIX}:exec:agent:${quick.agentId}`);
    const before = await handOns();
    let most = 0;
    for (let i = 0; i < 12; i++) {
      const { run } = await create(quick, `next ${i}`);
      expect((await runs.waitUntilSettled(quick.orgId, run.id, 10_000)).status).toBe('completed');
      most = Math.max(most, await slotsOfAgent());
    }
    expect(most, "slots the agent held at once, as the slot sets saw them").toBe(1);
    // (a run that finds the slot sets' last answer too old gives the slot back and asks instead)
    expect((await handOns()) - before, 'runs that took their predecessor\'s slot').toBeGreaterThan(0);
    await expect.poll(slotsOfAgent, { timeout: 5_000, interval: 20 }).toBe(0);
    redis.disconnect();
  });
});
