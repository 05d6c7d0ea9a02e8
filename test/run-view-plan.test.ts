import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPEND_SQL, LATEST_OF_TYPE_SQL, RUN_VIEW_SQL, appendParts, appendSql, type AppendParts } from '#libs/runs';
import { TEST_DATABASE_URL } from './support/env.js';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';

/**
 * A run's read model (GetTask, the answer of a blocking SendMessage) is read by a prepared
 * statement whose plan PostgreSQL keeps: the single-run form's generic plan estimates one run, as
 * a custom plan does. The array form (`id = ANY($1)`) was planned anew on every call — its generic
 * plan estimates ten runs — which cost 0.48 ms of planning against 0.11 ms of execution per
 * blocking SendMessage (pg_stat_statements with track_planning).
 *
 * The append statement's generic plan (the one a pooled connection keeps) touches the runs it
 * appends to, not every active run: its update of linked parents (`lp`, usually empty) once
 * scanned runs_active_idx whole for every append — 2,957 active runs during `npm run bench`, 1.9
 * of the statement's 2.3 ms — because the plan was made while the planner thought few runs were
 * active. The parents (and the interactions an append closes) are now looked up by id. Its setup
 * makes the same situation: statistics taken while every run was completed, then 300 active runs
 * (the old statement read 301 rows of runs per append here).
 *
 * A point read of a partitioned table by run (the newest event of a type: a runtime's saved state,
 * the run's extensions) finds the run behind a fence (RUN_FENCE_SQL) and keeps a generic plan too.
 */
let ctx: INestApplicationContext;
let runs: TestRuns;
let client: pg.Client;
let orgId: string;
let agentId: string;
let revisionId: string;
const runIds: string[] = [];

beforeAll(async () => {
  let seed: Awaited<ReturnType<typeof bootRuns>>['seed'];
  ({ ctx, seed } = await bootRuns());
  runs = runsOf(ctx);
  orgId = seed.orgId;
  agentId = seed.agentId;
  revisionId = seed.revisionId;
  for (let i = 0; i < 12; i++) {
    const { run } = await runs.createRun({ orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: `hi ${i}` }] } });
    await runs.emitArtifact(orgId, run.id, { artifactId: 'a', parts: [{ text: 'x' }] });
    runIds.push(run.id);
  }
  client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query('ANALYZE runs, messages');
}, 60_000);

afterAll(async () => {
  await client?.end();
  await ctx?.close();
});

describe('the read model statement of one run', () => {
  it('keeps a generic plan after its first executions (no planning per call)', async () => {
    for (const id of runIds) {
      const { rows } = await client.query({ name: 'runs.view', text: RUN_VIEW_SQL, values: [id, orgId, null, true] });
      expect(rows).toHaveLength(1);
      expect(rows[0].run.id).toBe(id);
      expect(rows[0].history).toHaveLength(1);
      expect(rows[0].artifacts).toHaveLength(1);
    }
    // PostgreSQL plans the first 5 executions as custom plans, then keeps the generic one when it
    // is not costlier: every later execution reuses it
    await expectGenericPlanKept('runs.view');
  });

  it('is scoped by organization: another organization reads nothing', async () => {
    const { rows } = await client.query({ name: 'runs.view', text: RUN_VIEW_SQL, values: [runIds[0], randomUUID(), null, true] });
    expect(rows).toHaveLength(0);
  });
});

describe('the newest event of a type in a run (a point read of a partitioned table)', () => {
  it('keeps a generic plan after its first executions and is scoped by organization', async () => {
    const name = 'runs.latest_of_type';
    for (const id of runIds) {
      const { rows } = await client.query({ name, text: LATEST_OF_TYPE_SQL, values: [id, orgId, 'message.added'] });
      expect(rows).toHaveLength(1);
      expect(rows[0].payload.message.role).toBe('user');
    }
    // the form `run_id = $1` was planned on every call here (12 custom plans of 12)
    await expectGenericPlanKept(name);
    expect((await client.query({ name, text: LATEST_OF_TYPE_SQL, values: [runIds[0], randomUUID(), 'message.added'] })).rows).toEqual([]);
    expect((await client.query({ name, text: LATEST_OF_TYPE_SQL, values: [runIds[0], orgId, 'run.runtime_state_saved'] })).rows).toEqual([]);
  });
});

/** After one execution per run of the prepared statement `name`: at most its first 5 were custom plans, every later one reused the generic plan. */
async function expectGenericPlanKept(name: string): Promise<void> {
  const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1`, [name]);
  expect(Number(rows[0]!.custom_plans)).toBeLessThanOrEqual(5);
  expect(Number(rows[0]!.generic_plans)).toBeGreaterThanOrEqual(runIds.length - 5);
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}

/** Rows read from `runs` by every scan of the plan (rows × loops). */
function runsRowsRead(n: PlanNode): number {
  const own = n['Relation Name'] === 'runs' && /Scan/.test(n['Node Type']) ? n['Actual Rows'] * n['Actual Loops'] : 0;
  return own + (n.Plans ?? []).reduce((s, c) => s + runsRowsRead(c), 0);
}

describe('the append statement', () => {
  const active: string[] = [];

  beforeAll(async () => {
    // the planner's view of runs while almost none was active (as after a quiet period, before a load)
    const create = (text: string) => runs.createRun({ orgId, agentId, revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
    for (const id of runIds) await runs.setStatus(orgId, id, 'completed');
    for (let i = 0; i < 300; i++) {
      const { run } = await create(`done ${i}`);
      await runs.setStatus(orgId, run.id, 'completed');
    }
    await client.query('ANALYZE runs');
    for (let i = 0; i < 300; i++) active.push((await create(`hi ${i}`)).run.id);
  }, 120_000);

  it('reads only the runs it appends to, with 300 active runs and a generic plan', async () => {
    await client.query('SET plan_cache_mode = force_generic_plan');
    // the whole statement, and the one the repository sends for such an item (its parts only)
    const statements = [
      { name: 'app', sql: APPEND_SQL, runIds: active.slice(0, 3) },
      { name: 'app_links', sql: appendSql({ ...NO_PARTS, links: true }), runIds: active.slice(3, 6) },
    ];
    for (const { name, sql, runIds } of statements) {
      await client.query(`PREPARE ${name}(jsonb) AS ${sql}`);
      for (const runId of runIds) {
        const item = appendItem(runId, { status: 'working', from: ['submitted'], statusChange: true, events: [{ type: 'run.status_changed', payload: { status: 'working' } }] });
        const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}(${client.escapeLiteral(JSON.stringify([item]))})`);
        // the run itself (its update), nothing else
        expect(runsRowsRead(rows[0]!['QUERY PLAN'][0]!.Plan)).toBeLessThanOrEqual(1);
      }
    }
    const { rows } = await client.query(`SELECT status, last_sequence FROM runs WHERE id = ANY($1::uuid[]) ORDER BY id`, [active.slice(0, 6)]);
    expect(rows).toEqual(active.slice(0, 6).map(() => ({ status: 'working', last_sequence: 3 })));
  });
});

const NO_PARTS: AppendParts = { links: false, artifacts: false, interactions: false, linked: false, dispatch: false, quota: false };

/** One item of the append statement's input ($1), unguarded but for `from`: `fields` on top. */
function appendItem(runId: string, fields: Record<string, unknown>): Record<string, unknown> {
  return {
    runId, orgId, status: null, setBlocked: false, blockedReason: null, from: [], blocked: null, threadId: null,
    openInteractionId: null, agentId: null, interactionVersion: null, openInteractions: null, lastSequence: null, openDelta: 0,
    versionDelta: 0, statusChange: false, sentBy: null, storedBytes: 0, events: [], dispatch: null, ...fields,
  };
}

/** The tables a plan touches (scans and writes). */
function relations(n: PlanNode, into = new Set<string>()): Set<string> {
  if (n['Relation Name']) into.add(n['Relation Name']);
  for (const c of n.Plans ?? []) relations(c, into);
  return into;
}

describe('the append statement holds only the parts its batch needs', () => {
  it('names the parts of a batch from its items', () => {
    const item = (events: Array<{ type: string }>, extra: Record<string, unknown> = {}) => ({ statusChange: false, dispatch: null, events, ...extra }) as never;
    expect(appendParts([item([{ type: 'message.added' }])])).toEqual(NO_PARTS);
    expect(appendParts([item([{ type: 'message.added' }], { dispatch: { orgId } })])).toEqual({ ...NO_PARTS, dispatch: true });
    expect(appendParts([item([{ type: 'run.status_changed' }], { statusChange: true })])).toEqual({ ...NO_PARTS, links: true });
    expect(
      appendParts([item([{ type: 'artifact.updated' }]), item([{ type: 'interaction.responded' }]), item([{ type: 'run.linked' }]), item([{ type: 'interaction.requested' }])]),
    ).toEqual({ ...NO_PARTS, artifacts: true, interactions: true, linked: true });
    // the storage quota's check: only for an item that adds bytes under a quota
    expect(appendParts([item([{ type: 'message.added' }], { storedBytes: 10, quotaBytes: null })])).toEqual(NO_PARTS);
    expect(appendParts([item([{ type: 'run.status_changed' }], { storedBytes: 0, quotaBytes: 1000 })])).toEqual(NO_PARTS);
    expect(appendParts([item([{ type: 'message.added' }], { storedBytes: 10, quotaBytes: 1000 })])).toEqual({ ...NO_PARTS, quota: true });
  });

  it('prepares in every combination of parts', async () => {
    const keys = Object.keys(NO_PARTS) as Array<keyof AppendParts>;
    for (let bits = 0; bits < 2 ** keys.length; bits++) {
      const parts = Object.fromEntries(keys.map((k, i) => [k, (bits & (1 << i)) !== 0])) as unknown as AppendParts;
      await client.query(`PREPARE parts_${bits}(jsonb) AS ${appendSql(parts)}`);
    }
    expect(APPEND_SQL).toBe(appendSql({ links: true, artifacts: true, interactions: true, linked: true, dispatch: true, quota: true }));
  });

  it("appends an agent message without touching the other projections' tables", async () => {
    const { run } = await runs.createRun({ orgId, agentId, revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'lean' }] } });
    await client.query(`PREPARE app_lean(jsonb) AS ${appendSql(NO_PARTS)}`);
    const item = appendItem(run.id, {
      from: ['submitted', 'working'],
      storedBytes: 10,
      events: [{ type: 'message.added', payload: { message: { messageId: randomUUID(), role: 'agent', parts: [{ text: 'hello' }] } } }],
    });
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE app_lean(${client.escapeLiteral(JSON.stringify([item]))})`);
    const touched = relations(rows[0]!['QUERY PLAN'][0]!.Plan);
    // (interaction_requests stays: the guard of an item that names an open interaction reads it)
    expect([...touched].filter((t) => ['run_links', 'artifacts', 'run_dispatches'].includes(t))).toEqual([]);
    expect(touched.has('run_events') && touched.has('messages')).toBe(true);
    // and what it wrote reads back as the run's log
    const after = await runs.getRun(orgId, run.id);
    expect(after?.lastSequence).toBe(run.lastSequence + 1);
  });
});
