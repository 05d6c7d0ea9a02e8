import { Test } from '@nestjs/testing';
import pg from 'pg';
import { beforeAll } from 'vitest';
import { ConfigModule } from '#libs/config';
import { DbModule } from '#libs/db';
import { CancelRunHandler, RunsModule } from '#libs/runs';
import { TEST_DATABASE_URL, testEnv } from './env.js';

/**
 * Test files share one database, and every API process's sweeper looks at all of it for lost
 * executions: a run an earlier file left executing (its worker killed, its stack closed) would be
 * resumed by this file's sweeper — into this file's workers, busy with another file's run. Before a
 * file's tests start, the runs earlier files left unfinished are canceled through the core's
 * CancelRunCommand (the one append path), so each file's sweepers see only its own runs.
 */
beforeAll(async () => {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  let rows: Array<{ orgId: string; id: string }>;
  try {
    await client.connect();
    rows = (await client.query<{ orgId: string; id: string }>(`SELECT org_id AS "orgId", id FROM runs WHERE status NOT IN ('completed', 'failed', 'canceled', 'rejected')`)).rows;
  } catch {
    return; // no database yet, or no runs table: nothing was left
  } finally {
    await client.end().catch(() => undefined);
  }
  if (rows.length === 0) return;
  const mod = await Test.createTestingModule({ imports: [ConfigModule.forRoot({ ...testEnv(), OUTBOX_RELAY_ENABLED: 'false' }), DbModule, RunsModule] }).compile();
  const ctx = await mod.init();
  try {
    const cancel = ctx.get(CancelRunHandler);
    for (const r of rows) await cancel.execute({ orgId: r.orgId, runId: r.id }).catch(() => undefined);
  } finally {
    await ctx.close();
  }
}, 60_000);
