import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ConfigModule } from '#libs/config';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService, DbModule } from '#libs/db';
import { RunCountsRepository, RunRetentionModule, type RunListFilter } from '#libs/runs';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';
import { seedAgent } from './support/fixtures.js';
import { testEnv } from './support/env.js';

/**
 * `run_counts` (docs/architecture.md "Counting runs"): the sum behind ListTasks' totalSize equals
 * a count of the runs for every filter it serves, before and after folds, under concurrent
 * creations, status changes, interactions and folds, after runs are removed, per organization,
 * and after the migration ran on a database that already had runs.
 */
let ctx: INestApplicationContext;
let db: DatabaseService;
let runs: TestRuns;
let counts: RunCountsRepository;
let seed: Awaited<ReturnType<typeof seedAgent>>;
let other: Awaited<ReturnType<typeof seedAgent>>;

const OWNERS = ['key:a', 'key:b', null] as const;
type CountFilter = Omit<RunListFilter, 'before' | 'limit'>;
const FILTERS: CountFilter[] = [
  {},
  { kind: 'execution' },
  { status: ['submitted', 'working'] },
  { status: ['completed'] },
  { status: ['failed', 'canceled', 'rejected'] },
  { blocked: 'none' },
  { status: ['working'], blocked: ['input_required'] },
  { blocked: ['auth_required', 'confirmation_required'] },
  { createdBy: 'key:a' },
  { createdBy: null, status: ['working'] },
  { createdBy: 'key:b', kind: 'execution', blocked: 'none' },
];

async function create(owner: string | null, s = seed) {
  const { run } = await runs.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, createdBy: owner, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hi' }] } });
  return run.id;
}
/** One of several fates for a run, chosen by `i`. */
async function move(id: string, i: number, s = seed): Promise<void> {
  switch (i % 6) {
    case 0: return;
    case 1: await runs.setStatus(s.orgId, id, 'working'); return;
    case 2: await runs.setStatus(s.orgId, id, 'completed'); return;
    case 3: await runs.requestInteraction(s.orgId, id, 'input', { message: { parts: [{ text: 'which day?' }] } }); return;
    case 4: await runs.requestInteraction(s.orgId, id, 'auth', { message: { parts: [{ text: 'sign in' }] } }); await runs.failRun(s.orgId, id, 'gave up'); return;
    case 5: await runs.cancelRun(s.orgId, id); return;
  }
}
/** The counters' answer and the runs' own count (a time filter from the epoch takes the count path). */
async function expectExact(s = seed): Promise<void> {
  for (const f of FILTERS) {
    const filter = { agentId: s.agentId, ...f };
    const [summed, counted] = await Promise.all([runs.views.count(s.orgId, filter), runs.views.count(s.orgId, { ...filter, statusFrom: new Date(0) })]);
    expect({ f, n: summed }).toEqual({ f, n: counted });
  }
}
async function rows(orgId: string) {
  return db.query<{ status: string; blocked_reason: string | null; created_by: string | null; n: string; folded: boolean }>(
    'SELECT status, blocked_reason, created_by, n, folded FROM run_counts WHERE org_id = $1', [orgId]);
}

beforeAll(async () => {
  ({ ctx, db, seed } = await bootRuns());
  runs = runsOf(ctx);
  counts = new RunCountsRepository(db);
  other = await seedAgent(db);
}, 60_000);

afterAll(async () => {
  await ctx?.close();
});

describe('run_counts', () => {
  it('sums to the runs’ count for every filter, unfolded and folded; a fold leaves one row per key', async () => {
    const ids = await Promise.all(Array.from({ length: 24 }, (_, i) => create(OWNERS[i % 3]!)));
    for (const [i, id] of ids.entries()) await move(id, i);
    await create('key:a', other);
    await expectExact();
    expect((await rows(seed.orgId)).some((r) => !r.folded)).toBe(true);

    while ((await counts.fold()) !== 0);
    await expectExact();
    const after = await rows(seed.orgId);
    expect(after.every((r) => r.folded && Number(r.n) > 0)).toBe(true);
    const keys = after.map((r) => `${r.status}|${r.blocked_reason}|${r.created_by}`);
    expect(new Set(keys).size).toBe(keys.length);
    // another organization's runs are its own
    expect(await runs.views.count(other.orgId, { agentId: other.agentId })).toBe(1);
    expect(await runs.views.count(seed.orgId, { agentId: seed.agentId })).toBe(ids.length);
  });

  it('stays exact under concurrent creations, status changes and folds', async () => {
    const work = Array.from({ length: 60 }, async (_, i) => move(await create(OWNERS[i % 3]!), i));
    const folds = Array.from({ length: 8 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, i * 15));
      return counts.fold();
    });
    const settled = await Promise.allSettled([...work, ...folds]);
    expect(settled.filter((s) => s.status === 'rejected')).toEqual([]);
    await expectExact();
    while ((await counts.fold()) !== 0);
    await expectExact();
  });

  it('removed runs leave the count; keys that sum to nothing leave no row', async () => {
    const gone = await Promise.all([create('key:gone'), create('key:gone')]);
    await runs.setStatus(seed.orgId, gone[1]!, 'completed');
    while ((await counts.fold()) !== 0);
    expect(await runs.views.count(seed.orgId, { agentId: seed.agentId, createdBy: 'key:gone' })).toBe(2);
    // the retention path's removal (the log's guard lets only it delete)
    await db.transaction(async (q) => {
      await q(`SELECT set_config('aaas.retention', 'on', true)`);
      await q('DELETE FROM runs WHERE org_id = $1 AND id = ANY($2::uuid[])', [seed.orgId, gone]);
    });
    expect(await runs.views.count(seed.orgId, { agentId: seed.agentId, createdBy: 'key:gone' })).toBe(0);
    await expectExact();
    while ((await counts.fold()) !== 0);
    expect((await rows(seed.orgId)).filter((r) => r.created_by === 'key:gone')).toEqual([]);
    await expectExact();
  });

  it('the migration counts the runs a database already has', async () => {
    const before = await Promise.all(FILTERS.map((f) => runs.views.count(seed.orgId, { agentId: seed.agentId, ...f })));
    await db.query(`DROP TABLE run_counts; DROP TRIGGER run_counts_inserted ON runs; DROP TRIGGER run_counts_deleted ON runs;
      DROP TRIGGER run_counts_moved ON runs; DROP FUNCTION run_counts_inserted(); DROP FUNCTION run_counts_deleted(); DROP FUNCTION run_counts_moved()`);
    await db.query(await readFile(new URL('../prisma/migrations/20261127120000_run_counts/migration.sql', import.meta.url), 'utf8'));
    expect((await rows(seed.orgId)).every((r) => r.folded)).toBe(true);
    expect(await Promise.all(FILTERS.map((f) => runs.views.count(seed.orgId, { agentId: seed.agentId, ...f })))).toEqual(before);
    await expectExact();
    await expectExact(other);
    // and the triggers are back
    await move(await create('key:a'), 2);
    await expectExact();
  });

  it('a worker folds on its own every RUN_COUNTS_FOLD_MS', async () => {
    const worker = await (await Test.createTestingModule({
      imports: [ConfigModule.forRoot({ ...testEnv(), RUN_COUNTS_FOLD_MS: '50', RETENTION_INTERVAL_MS: '0', RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0' }), DbModule, RunRetentionModule],
    }).compile()).init();
    try {
      await Promise.all(Array.from({ length: 6 }, (_, i) => create(OWNERS[i % 3]!).then((id) => move(id, i))));
      await expect.poll(async () => (await rows(seed.orgId)).every((r) => r.folded), { timeout: 5_000, interval: 50 }).toBe(true);
      await expectExact();
    } finally {
      await worker.close();
    }
  });
});
