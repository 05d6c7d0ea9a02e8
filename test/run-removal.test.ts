import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseService } from '#libs/db';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';
import { seedAgent } from './support/fixtures.js';

/**
 * Removing runs (docs/architecture.md "Removing runs"): the log and its hot projections —
 * run_events, messages, message_keys, artifacts, run_dispatches — have no foreign key to runs
 * (migration 20261128100000), and the statement trigger `runs_removed` takes their rows with the
 * runs a statement deletes: every organization's of one statement, nobody else's, and only where
 * the log's DELETE guard lets a removal through.
 */
const LOG_TABLES = ['run_events', 'messages', 'message_keys', 'artifacts', 'run_dispatches'] as const;

let ctx: INestApplicationContext;
let db: DatabaseService;
let runs: TestRuns;
let seed: Awaited<ReturnType<typeof seedAgent>>;
let other: Awaited<ReturnType<typeof seedAgent>>;

/** A run with rows in every log table: its log, the user's and the agent's messages, a key, an artifact, an outbox row. */
async function runWithEverything(s: typeof seed): Promise<string> {
  const { run } = await runs.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, createdBy: 'key:a', message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hi' }] } });
  await runs.emitMessage(s.orgId, run.id, { parts: [{ text: 'hello' }] });
  await runs.emitArtifact(s.orgId, run.id, { artifactId: 'a1', parts: [{ text: 'x' }], lastChunk: true });
  await runs.setStatus(s.orgId, run.id, 'completed');
  return run.id;
}

/** Rows per log table for these runs. */
async function rowsOf(ids: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of LOG_TABLES) out[t] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t} WHERE run_id = ANY($1::uuid[])`, [ids]))[0]!.n;
  return out;
}

beforeAll(async () => {
  ({ ctx, db, seed } = await bootRuns());
  runs = runsOf(ctx);
  other = await seedAgent(db);
}, 60_000);

afterAll(async () => {
  await ctx?.close();
});

describe('removing runs', () => {
  it('the log tables check no foreign key to runs', async () => {
    const keys = await db.query<{ tbl: string }>(
      `SELECT conrelid::regclass::text AS tbl FROM pg_constraint WHERE contype = 'f' AND confrelid = 'runs'::regclass ORDER BY 1`,
    );
    const tables = new Set(keys.map((k) => k.tbl));
    for (const t of LOG_TABLES) expect(tables.has(t)).toBe(false);
    // the rarely written ones keep theirs
    expect(tables.has('interaction_requests')).toBe(true);
    expect(tables.has('run_links')).toBe(true);
    expect(tables.has('push_configs')).toBe(true);
  });

  it('takes every log row of the removed runs, of every organization in the statement, and nothing else', async () => {
    const gone = [await runWithEverything(seed), await runWithEverything(seed), await runWithEverything(other)];
    const kept = [await runWithEverything(seed), await runWithEverything(other)];
    // (no relay here: every outbox row is still unclaimed)
    const before = await rowsOf(gone);
    for (const t of LOG_TABLES) expect({ t, n: before[t]! > 0 }).toEqual({ t, n: true });
    expect(before.message_keys).toBe(3);
    const keptBefore = await rowsOf(kept);

    // refused without the retention path's setting: the log's guard, nothing removed
    await expect(db.query('DELETE FROM runs WHERE id = ANY($1::uuid[])', [gone])).rejects.toThrow(/append-only/);
    expect(await rowsOf(gone)).toEqual(before);

    await db.transaction(async (q) => {
      await q(`SELECT set_config('aaas.retention', 'on', true)`);
      const removed = await q<{ n: number }>('WITH g AS (DELETE FROM runs WHERE id = ANY($1::uuid[]) RETURNING 1) SELECT count(*)::int AS n FROM g', [gone]);
      expect(removed[0]!.n).toBe(3);
    });
    expect(await rowsOf(gone)).toEqual(Object.fromEntries(LOG_TABLES.map((t) => [t, 0])));
    expect(await rowsOf(kept)).toEqual(keptBefore);
    // the kept runs read whole
    for (const [id, s] of [[kept[0]!, seed], [kept[1]!, other]] as const) {
      const view = await runs.view(s.orgId, id);
      expect(view.run.status).toBe('completed');
      expect(view.history.map((m) => m.role)).toEqual(['user', 'agent']);
      expect(view.artifacts).toHaveLength(1);
    }
  });

  it('a user messageId freed by a removed run can be sent again', async () => {
    const messageId = randomUUID();
    const first = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, createdBy: 'key:b', message: { messageId, role: 'user', parts: [{ text: 'once' }] } });
    await runs.setStatus(seed.orgId, first.run.id, 'completed');
    await db.transaction(async (q) => {
      await q(`SELECT set_config('aaas.retention', 'on', true)`);
      await q('DELETE FROM runs WHERE org_id = $1 AND id = $2', [seed.orgId, first.run.id]);
    });
    const again = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, createdBy: 'key:b', message: { messageId, role: 'user', parts: [{ text: 'twice' }] } });
    expect(again.run.id).not.toBe(first.run.id);
    expect(await rowsOf([again.run.id])).toMatchObject({ message_keys: 1, messages: 1 });
  });
});
