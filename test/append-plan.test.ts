import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPEND_SQL } from '#libs/runs';
import { TEST_DATABASE_URL } from './support/env.js';
import { bootRuns, runsOf } from './support/runs.js';

/**
 * The append statement's generic plan (the one a pooled connection keeps) touches the runs it
 * appends to, not every active run: its update of linked parents (`lp`, usually empty) once
 * scanned runs_active_idx whole for every append — 2,957 active runs during `npm run bench`, 1.9
 * of the statement's 2.3 ms — because the plan was made while the planner thought few runs were
 * active. The parents (and the interactions an append closes) are now looked up by id. The
 * setup makes the same situation: statistics taken while every run was completed, then 300
 * active runs (the old statement read 301 rows of runs per append here).
 */
let ctx: INestApplicationContext;
let client: pg.Client;
let orgId: string;
const runIds: string[] = [];

beforeAll(async () => {
  let seed: Awaited<ReturnType<typeof bootRuns>>['seed'];
  ({ ctx, seed } = await bootRuns());
  const runs = runsOf(ctx);
  orgId = seed.orgId;
  client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  // the planner's view of runs while almost none was active (as after a quiet period, before a load)
  const create = (text: string) => runs.createRun({ orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
  for (let i = 0; i < 300; i++) {
    const { run } = await create(`done ${i}`);
    await runs.setStatus(orgId, run.id, 'completed');
  }
  await client.query('ANALYZE runs');
  for (let i = 0; i < 300; i++) {
    const { run } = await create(`hi ${i}`);
    runIds.push(run.id);
  }
}, 120_000);

afterAll(async () => {
  await client?.end();
  await ctx?.close();
});

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
  it('reads only the runs it appends to, with 300 active runs and a generic plan', async () => {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE app(jsonb) AS ${APPEND_SQL}`);
    for (const runId of runIds.slice(0, 3)) {
      const item = {
        runId, orgId, status: 'working', setBlocked: false, blockedReason: null, from: ['submitted'], blocked: null, threadId: null,
        openInteractionId: null, agentId: null, interactionVersion: null, openInteractions: null, lastSequence: null, openDelta: 0,
        versionDelta: 0, statusChange: true, sentBy: null, storedBytes: 0, events: [{ type: 'run.status_changed', payload: { status: 'working' } }], dispatch: null,
      };
      const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE app(${client.escapeLiteral(JSON.stringify([item]))})`);
      // the run itself (its update), nothing else
      expect(runsRowsRead(rows[0]!['QUERY PLAN'][0]!.Plan)).toBeLessThanOrEqual(1);
    }
    const { rows } = await client.query(`SELECT status, last_sequence FROM runs WHERE id = ANY($1::uuid[]) ORDER BY id`, [runIds.slice(0, 3)]);
    expect(rows).toEqual([0, 1, 2].map(() => ({ status: 'working', last_sequence: 3 })));
  });
});
