import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { RELAYABLE_SQL, RunDispatchRepository } from '#libs/runs';
import { TEST_DATABASE_URL } from './support/env.js';
import { bootRuns } from './support/runs.js';
import { seedAgent } from './support/fixtures.js';

/**
 * The relay's safety net (RunDispatchRepository.relayable) stays one pass over its candidates
 * whatever the planner's statistics say. A queue table is usually empty when autovacuum analyzes
 * it; a generic plan made from those statistics once re-ran the locking subquery for every row of
 * a backlog (12.7 s for 8,000 waiting dispatches). Here: statistics of an empty table, then a
 * backlog of 3,000 dispatches, the statement planned generically.
 */
const BACKLOG = 3_000;
let ctx: INestApplicationContext;
let db: DatabaseService;
let client: pg.Client;

interface PlanNode {
  'Node Type': string;
  'Parent Relationship'?: string;
  'Subplan Name'?: string;
  'Actual Loops': number;
  Plans?: PlanNode[];
}
function nodes(n: PlanNode): PlanNode[] {
  return [n, ...(n.Plans ?? []).flatMap(nodes)];
}

beforeAll(async () => {
  let seed: Awaited<ReturnType<typeof seedAgent>>;
  ({ ctx, db, seed } = await bootRuns());
  await db.query('DELETE FROM run_dispatches');
  await db.query('ANALYZE run_dispatches');
  // a backlog the statistics do not know of: runs whose dispatches wait (Redis was down, say)
  await db.query(
    `INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, status, origin_message_id)
     SELECT gen_random_uuid(), $1, $2, $3, 't' || g, 'submitted', 'm' || g FROM generate_series(1, $4::int) g`,
    [seed.orgId, seed.agentId, seed.revisionId, BACKLOG],
  );
  await db.query(
    `INSERT INTO run_dispatches (org_id, run_id, trigger_sequence, job, created_at)
     SELECT org_id, id, 1, '{}'::jsonb, now() - interval '1 minute' FROM runs WHERE org_id = $1`,
    [seed.orgId],
  );
  client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
}, 60_000);

afterAll(async () => {
  await client?.end();
  await ctx?.close();
});

describe('outbox safety net plan', () => {
  it('reads its candidates once (an InitPlan), not once per waiting row, under a generic plan from empty-table statistics', async () => {
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await client.query({ name: 'relayable', text: `EXPLAIN (ANALYZE, FORMAT JSON) ${RELAYABLE_SQL}`, values: [500, 1_000, 5_000, false] });
      const { rows } = await client.query({ name: 'relayable', text: `EXPLAIN (ANALYZE, FORMAT JSON) ${RELAYABLE_SQL}`, values: [500, 1_000, 5_000, false] });
      const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan;
      const all = nodes(plan);
      const locks = all.filter((n) => n['Node Type'] === 'LockRows');
      expect(locks).toHaveLength(1);
      expect(locks[0]!['Actual Loops']).toBe(1);
      expect(all.some((n) => n['Subplan Name']?.startsWith('InitPlan'))).toBe(true);
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('hands the oldest waiting dispatches over, each once, and marks them', async () => {
    const repo = ctx.get(RunDispatchRepository);
    const handed: string[] = [];
    const n = await repo.relayable(500, { minAgeMs: 1_000, redeliverMs: 5_000, idle: true }, async (jobs) => {
      handed.push(...jobs.map((j) => j.id!));
    });
    expect(n).toBe(500);
    expect(new Set(handed).size).toBe(500);
    const oldest = await db.query<{ id: string }>('SELECT d.id::text AS id FROM run_dispatches d ORDER BY d.id LIMIT 500');
    expect(handed.sort()).toEqual(oldest.map((r) => r.id).sort());
    const marked = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM run_dispatches WHERE relayed_at IS NOT NULL');
    expect(marked[0]!.n).toBe(500);
    // handed over just now: not again within redeliverMs
    expect(await repo.relayable(BACKLOG, { minAgeMs: 1_000, redeliverMs: 5_000, idle: true }, async () => undefined)).toBe(BACKLOG - 500);
  });
});
