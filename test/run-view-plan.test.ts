import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_VIEW_SQL } from '#libs/runs';
import { TEST_DATABASE_URL } from './support/env.js';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';

/**
 * A run's read model (GetTask, the answer of a blocking SendMessage) is read by a prepared
 * statement whose plan PostgreSQL keeps: the single-run form's generic plan estimates one run, as
 * a custom plan does. The array form (`id = ANY($1)`) was planned anew on every call — its generic
 * plan estimates ten runs — which cost 0.48 ms of planning against 0.11 ms of execution per
 * blocking SendMessage (pg_stat_statements with track_planning).
 */
let ctx: INestApplicationContext;
let runs: TestRuns;
let client: pg.Client;
let orgId: string;
const runIds: string[] = [];

beforeAll(async () => {
  let seed: Awaited<ReturnType<typeof bootRuns>>['seed'];
  ({ ctx, seed } = await bootRuns());
  runs = runsOf(ctx);
  orgId = seed.orgId;
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
    const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'runs.view'`);
    // PostgreSQL plans the first 5 executions as custom plans, then keeps the generic one when it
    // is not costlier: every later execution reuses it
    expect(Number(rows[0]!.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(rows[0]!.generic_plans)).toBeGreaterThanOrEqual(runIds.length - 5);
  });

  it('is scoped by organization: another organization reads nothing', async () => {
    const { rows } = await client.query({ name: 'runs.view', text: RUN_VIEW_SQL, values: [runIds[0], randomUUID(), null, true] });
    expect(rows).toHaveLength(0);
  });
});
