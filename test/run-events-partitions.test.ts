import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { RunEventPartitions, RunRetention, RunRetentionModule, RunsModule, nextPeriod, planPartitions, runIdBound } from '#libs/runs';
import { runsOf, type TestRuns } from './support/runs.js';
import { TEST_DATABASE_URL, testEnv } from './support/env.js';
import { seedAgent } from './support/fixtures.js';
// @ts-expect-error — a plain ES module script (shared with the conversion timing scripts), no declarations
import { databaseBefore as databaseBeforeJs, dropDatabase as dropDatabaseJs } from '../scripts/conversion-db.mjs';

/**
 * The partitioned log (docs/architecture.md "The log's partitions"): run ids are UUIDv7, so a run's
 * events land in the partition of its period; the append path's invariants and both guards hold on
 * a partition made after the migration; maintenance creates periods ahead idempotently, each for
 * every partitioned table (run_events, messages, artifacts, push_deliveries: same names, same
 * bounds); retention drops a period whose every run expired, the partition of every table whole
 * (no row-by-row DELETE of its messages, artifacts or deliveries) with the keys of its user
 * messages, and keeps one with a surviving run; creating a run whose period has no partition yet
 * creates the period; the conversion migrations move a populated unpartitioned log (v4 ids), then
 * populated artifacts and push deliveries, then populated messages (filling message_keys), and the
 * normal read and append paths work on the result; a user messageId stays unique per sender across
 * the runs (and periods) of an agent, an agent messageId within its run.
 * Runs of past or far periods are made by moving the process's clock (Date only): a v7 id carries it.
 */
const DAY = 86_400_000;
const MIGRATION = '20261127110000_run_events_partitioned';
const PROJECTIONS_MIGRATION = '20261127130000_projections_partitioned';
const MESSAGES_MIGRATION = '20261127140000_messages_partitioned';
const TABLES = ['run_events', 'messages', 'artifacts', 'push_deliveries'] as const;

let ctx: INestApplicationContext;
let db: DatabaseService;
let runs: TestRuns;
let seed: Awaited<ReturnType<typeof seedAgent>>;
// a random UTC day in 2001..2020 (before any partition the migration made): this file's past periods
const T = Date.UTC(2001, 0, 1) + Math.floor(Math.random() * 7000) * DAY;
const dayName = (ms: number) => `run_events_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;

async function at<R>(ms: number, fn: () => Promise<R>): Promise<R> {
  vi.useFakeTimers({ toFake: ['Date'], now: ms, shouldAdvanceTime: true });
  try {
    return await fn();
  } finally {
    vi.useRealTimers();
  }
}
const newRun = (text = 'hi') =>
  runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
async function partitionsOf(runId: string): Promise<string[]> {
  const rows = await db.query<{ p: string }>(`SELECT DISTINCT tableoid::regclass::text AS p FROM run_events WHERE org_id = $1 AND run_id = $2`, [seed.orgId, runId]);
  return rows.map((r) => r.p);
}
async function exists(table: string): Promise<boolean> {
  return (await db.query<{ t: string | null }>(`SELECT to_regclass($1)::text AS t`, [table]))[0]!.t !== null;
}
/** The period partitions of `table` as `p<YYYYMMDD>` → its bound expression (DEFAULT included as 'legacy'). */
async function periodsOf(q: (sql: string, params: unknown[]) => Promise<Array<{ name: string; bound: string }>>, table: string): Promise<Map<string, string>> {
  const rows = await q(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`,
    [table],
  );
  return new Map(rows.map((r) => [r.name.slice(table.length + 1), r.bound]));
}
const periodsHere = (table: string) => periodsOf((sql, params) => db.query(sql, params), table);
/** A push config with one delivery on the run (as PushConfigRepository records them). */
async function pushDelivery(runId: string): Promise<void> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, webhook_secret) VALUES ($1, $2, $3, $4, 'c1', '1.0', 'https://example.com/hook', 'x')`,
    [id, seed.orgId, runId, seed.agentId],
  );
  await db.query(`INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, latency_ms) VALUES ($1, $2, $3, 1, 'msg_1', 200, 3)`, [id, seed.orgId, runId]);
}
/** Rows of the run in each partitioned table. */
async function rowsOf(runIds: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) out[t] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t} WHERE org_id = $1 AND run_id = ANY($2::uuid[])`, [seed.orgId, runIds]))[0]!.n;
  return out;
}

beforeAll(async () => {
  const mod = await Test.createTestingModule({
    imports: [
      ConfigModule.forRoot({ ...testEnv(), RUN_EVENTS_PARTITION_INTERVAL: 'day', RUN_EVENTS_PARTITIONS_AHEAD: '3', RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0', RETENTION_INTERVAL_MS: '0' }),
      DbModule,
      RunsModule,
      RunRetentionModule,
    ],
  }).compile();
  ctx = await mod.init();
  db = ctx.get(DatabaseService);
  runs = runsOf(ctx);
  seed = await seedAgent(db);
});
afterAll(async () => {
  await ctx?.close();
});
afterEach(() => vi.useRealTimers());

describe('run ids and partitions', () => {
  it('plans periods (month, ISO week, day), trimmed against partitions that exist', () => {
    const nov = Date.UTC(2026, 10, 27, 13);
    expect(planPartitions([], nov, 'month', 2).map((p) => p.name)).toEqual(['run_events_p20261101', 'run_events_p20261201']);
    expect(planPartitions([], nov, 'week', 1)).toEqual([{ name: 'run_events_p20261123', from: runIdBound(Date.UTC(2026, 10, 23)), to: runIdBound(Date.UTC(2026, 10, 30)) }]);
    // a month partition exists: the days it covers are not planned again, the rest is trimmed to what is free
    const month = { name: 'run_events_p20261101', from: runIdBound(Date.UTC(2026, 10, 1)), to: runIdBound(Date.UTC(2026, 11, 1)) };
    const plan = planPartitions([month], Date.UTC(2026, 10, 30, 5), 'week', 2);
    expect(plan).toEqual([
      { name: 'run_events_p20261130', from: month.to, to: runIdBound(Date.UTC(2026, 11, 7)) },
      { name: 'run_events_p20261207', from: runIdBound(Date.UTC(2026, 11, 7)), to: runIdBound(Date.UTC(2026, 11, 14)) },
    ]);
    expect(planPartitions([month], Date.UTC(2026, 10, 3), 'day', 3)).toEqual([]);
    expect(nextPeriod(Date.UTC(2026, 11, 1), 'month')).toBe(Date.UTC(2027, 0, 1));
  });

  it('maintenance creates the periods ahead, once', async () => {
    const partitions = ctx.get(RunEventPartitions);
    const created = await partitions.maintain(new Date(T + 5 * 3_600_000));
    expect(created).toEqual([dayName(T), dayName(T + DAY), dayName(T + 2 * DAY)]);
    expect(await partitions.maintain(new Date(T + 7 * 3_600_000))).toEqual([]);
    const mine = (await partitions.list()).filter((p) => created!.includes(p.name));
    expect(mine.map((p) => [p.from, p.to])).toEqual([0, 1, 2].map((k) => [runIdBound(T + k * DAY), runIdBound(T + (k + 1) * DAY)]));
    // each period exists for every partitioned table, with the same name suffix and bounds
    const [events, ...others] = await Promise.all(TABLES.map(periodsHere));
    expect(others).toHaveLength(3);
    for (const periods of others) {
      for (const name of created!) expect(periods.get(name.slice('run_events_'.length))).toBe(events!.get(name.slice('run_events_'.length)));
      expect([...periods.keys()].sort()).toEqual([...events!.keys()].sort());
    }
    expect((await db.query<{ t: string[] }>(`SELECT run_partitioned_tables() AS t`))[0]!.t).toEqual([...TABLES]);
    // each run_events partition carries both guards
    const triggers = await db.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname`, [dayName(T + DAY)]);
    expect(triggers.map((t) => t.tgname)).toEqual(['run_events_append_only', 'run_events_delete_guard']);
  });
});

// Run ids follow the clock (newRunId: UUIDv7 of Date.now()); this file makes its runs in time
// order anyway: the past ones first, then now, then a future one.
let gone: string[] = [];
let done: string;
let alive: string;
let archived: string[] = [];

/** A database (dropped first) with every migration before `migration` applied; a connected client. */
const databaseBefore = databaseBeforeJs as (url: string, migration: string, opts: { seed: boolean }) => Promise<pg.Client>;
const dropDatabase = dropDatabaseJs as (url: string) => Promise<void>;

/**
 * Today's append path writes `message_keys` (migration 20261127140000_messages_partitioned) and
 * reads and writes `runs.execution_epoch` (20261128120000_execution_fence) and `org_storage`
 * (20261128130000_org_storage), which a schema from
 * before those migrations lacks. The conversion tests populate such schemas through the
 * application, so stand-ins (the columns and key the migrations make) take those rows meanwhile;
 * they drop them (dropStandIns) before the migration under test, which then runs on the schema as it was.
 */
async function standInMessageKeys(c: pg.Client): Promise<void> {
  await c.query(`CREATE TABLE message_keys (org_id uuid NOT NULL, agent_id uuid NOT NULL, sent_by text NOT NULL, message_id text NOT NULL,
                                             run_id uuid NOT NULL, message_row_id uuid NOT NULL, PRIMARY KEY (org_id, agent_id, sent_by, message_id))`);
  await c.query(`ALTER TABLE runs ADD COLUMN execution_epoch integer NOT NULL DEFAULT 0`);
  await c.query(`CREATE TABLE org_storage (org_id uuid NOT NULL, bytes bigint NOT NULL, folded boolean NOT NULL DEFAULT false)`);
}

async function dropStandIns(c: pg.Client): Promise<void> {
  await c.query(`DROP TABLE message_keys`);
  await c.query(`ALTER TABLE runs DROP COLUMN execution_epoch`);
  await c.query(`DROP TABLE org_storage`);
}

/** Apply every migration after `migration`, in order: the schema of today, for today's application. */
async function migrateAfter(c: pg.Client, migration: string): Promise<void> {
  const later = readdirSync('prisma/migrations', { withFileTypes: true }).filter((d) => d.isDirectory() && d.name > migration).map((d) => d.name).sort();
  for (const m of later) await c.query(readFileSync(`prisma/migrations/${m}/migration.sql`, 'utf8'));
}

let runId: string;
const runId0 = () => runId;

describe('a partition made after the migration', () => {

  it('takes the appends of its period: gapless sequences under concurrent appends', async () => {
    // (the retention test's runs, made here in time order: two on day T, two on day T+1)
    gone = await at(T + 3_600_000, async () => [(await newRun('a')).run.id, (await newRun('b')).run.id]);
    runId = await at(T + DAY + 12 * 3_600_000, async () => (await newRun()).run.id);
    [done, alive] = await at(T + DAY + 13 * 3_600_000, async () => [(await newRun('c')).run.id, (await newRun('d')).run.id]);
    archived = await at(T + 2 * DAY + 3_600_000, async () => [(await newRun('e')).run.id, (await newRun('f')).run.id]);
    expect(await partitionsOf(gone[0]!)).toEqual([dayName(T)]);
    expect(await partitionsOf(runId)).toEqual([dayName(T + DAY)]);
    await runs.setStatus(seed.orgId, runId, 'working');
    await Promise.all(Array.from({ length: 40 }, (_, i) => runs.emitMessage(seed.orgId, runId, { parts: [{ text: `m${i}` }] })));
    const events = await runs.readEvents(seed.orgId, runId, 0);
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
    expect(events.length).toBe(43);
    expect(await partitionsOf(runId)).toEqual([dayName(T + DAY)]);
  });

  it('refuses UPDATE and DELETE, named through run_events or the partition itself', async () => {
    const p = dayName(T + DAY);
    await expect(db.query(`UPDATE ${p} SET type = 'x' WHERE run_id = $1`, [runId])).rejects.toThrow(/append-only/);
    await expect(db.query(`UPDATE run_events SET type = 'x' WHERE org_id = $1 AND run_id = $2`, [seed.orgId, runId])).rejects.toThrow(/append-only/);
    await expect(db.query(`DELETE FROM ${p} WHERE run_id = $1`, [runId])).rejects.toThrow(/append-only/);
    await expect(db.query(`DELETE FROM run_events WHERE org_id = $1 AND run_id = $2`, [seed.orgId, runId])).rejects.toThrow(/append-only/);
    expect((await runs.readEvents(seed.orgId, runId, 0)).length).toBe(43);
  });
});

/** The tables whose row DELETEs the retention test records. */
const ROW_DELETES_RECORDED = ['messages', 'message_keys', 'artifacts', 'push_deliveries'];

describe('retention and partitions', () => {
  it('drops a period whose every run expired (its partition of every table, whole), and keeps one with a surviving run', async () => {
    const retention = ctx.get(RunRetention);
    // artifacts and push deliveries on a run of each period (each run has its user message, runId0
    // 40 agent messages too); a row trigger records every row DELETE on those tables: a period
    // dropped whole deletes none, a run removed one by one deletes its own
    for (const id of [gone[0]!, done]) {
      await runs.setStatus(seed.orgId, id, 'working');
      await runs.emitArtifact(seed.orgId, id, { artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }] });
      await runs.emitArtifact(seed.orgId, id, { artifactId: 'a1', parts: [{ text: 'lo' }], append: true, lastChunk: true });
      await pushDelivery(id);
    }
    expect(await rowsOf([gone[0]!])).toEqual({ run_events: 5, messages: 1, artifacts: 1, push_deliveries: 1 });
    for (const t of TABLES) expect((await db.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM ${t} WHERE run_id = $1 LIMIT 1`, [gone[0]]))[0]!.p).toBe(`${t}_${dayName(T).slice(11)}`);
    for (const id of [...gone, done, runId0()]) await runs.setStatus(seed.orgId, id, 'completed');
    await db.query(`UPDATE runs SET status_at = now() - interval '10 days' WHERE org_id = $1`, [seed.orgId]);
    await retention.setPolicy(seed.orgId, null, 1);
    try {
      await db.query(`CREATE TABLE test_row_deletes (tbl text, run_id uuid, tx bigint DEFAULT txid_current())`);
      await db.query(`CREATE FUNCTION test_row_deletes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_row_deletes VALUES (TG_TABLE_NAME, OLD.run_id); RETURN OLD; END $$`);
      for (const t of ROW_DELETES_RECORDED) await db.query(`CREATE TRIGGER test_row_deletes AFTER DELETE ON ${t} FOR EACH ROW EXECUTE FUNCTION test_row_deletes()`);
      // and the tables dropped, with their transaction
      await db.query(`CREATE FUNCTION test_drops() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN
                        INSERT INTO test_row_deletes (tbl) SELECT 'drop ' || object_identity FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table'; END $$`);
      await db.query(`CREATE EVENT TRIGGER test_drops ON sql_drop EXECUTE FUNCTION test_drops()`);
      const pass = await retention.pass();
      expect(pass.partitionsDropped).toBeGreaterThanOrEqual(1);
      for (const t of TABLES) {
        expect(await exists(`${t}_${dayName(T).slice(11)}`)).toBe(false);
        expect(await exists(`${t}_${dayName(T + DAY).slice(11)}`)).toBe(true); // `alive` (submitted) survives in it
        expect(await exists(`${t}_${dayName(T + 2 * DAY).slice(11)}`)).toBe(true); // its runs are still active
      }
      expect(await rowsOf([...gone, done])).toEqual({ run_events: 0, messages: 0, artifacts: 0, push_deliveries: 0 });
      // gone[0]'s period left whole; done and runId0 (in the period that stays) were removed row by row
      const deleted = await db.query<{ tbl: string; run_id: string; n: number }>(`SELECT tbl, run_id, count(*)::int AS n FROM test_row_deletes WHERE run_id IS NOT NULL GROUP BY 1, 2`);
      const day1 = dayName(T + DAY).slice(11);
      const order = (a: { tbl: string; run_id: string }, b: { tbl: string; run_id: string }) => (`${a.tbl} ${a.run_id}` < `${b.tbl} ${b.run_id}` ? -1 : 1);
      expect(deleted.filter((d) => d.tbl !== 'message_keys').sort(order)).toEqual(
        [
          { tbl: `artifacts_${day1}`, run_id: done, n: 1 },
          { tbl: `messages_${day1}`, run_id: done, n: 1 },
          { tbl: `messages_${day1}`, run_id: runId0(), n: 41 },
          { tbl: `push_deliveries_${day1}`, run_id: done, n: 1 },
        ].sort(order),
      );
      // the keys of the user messages (one per run here): the dropped period's deleted with it, the
      // others with their runs (the cascade); the survivor's stays
      expect(deleted.filter((d) => d.tbl === 'message_keys').map((d) => `${d.run_id} ${d.n}`).sort()).toEqual([...gone, done, runId0()].map((id) => `${id} 1`).sort());
      // the dropped period's keys went in the transaction that dropped its partitions (not later, with the runs)
      const dropped = await db.query<{ tbl: string; tx: string }>(`SELECT tbl, tx::text FROM test_row_deletes WHERE tbl LIKE 'drop %' ORDER BY tbl`);
      expect(dropped.map((d) => d.tbl)).toEqual(TABLES.map((t) => `drop public.${t}_${dayName(T).slice(11)}`).sort());
      expect(new Set(dropped.map((d) => d.tx)).size).toBe(1);
      const goneKeys = await db.query<{ tx: string }>(`SELECT DISTINCT tx::text FROM test_row_deletes WHERE tbl = 'message_keys' AND run_id = ANY($1::uuid[])`, [gone]);
      expect(goneKeys).toEqual([{ tx: dropped[0]!.tx }]);
      const keysLeft = await db.query<{ run_id: string }>(`SELECT run_id FROM message_keys WHERE org_id = $1 AND run_id = ANY($2::uuid[])`, [seed.orgId, [...gone, done, alive, runId0()]]);
      expect(keysLeft.map((k) => k.run_id)).toEqual([alive]);
      const left = await db.query<{ id: string }>(`SELECT id FROM runs WHERE org_id = $1 AND id = ANY($2::uuid[]) ORDER BY id`, [seed.orgId, [...gone, done, alive, runId0()]]);
      expect(left.map((r) => r.id)).toEqual([alive]);
      expect((await db.query(`SELECT 1 FROM run_events WHERE org_id = $1 AND run_id = ANY($2::uuid[])`, [seed.orgId, [...gone, done]])).length).toBe(0);
      expect((await runs.readEvents(seed.orgId, alive, 0)).map((e) => e.sequence)).toEqual([1, 2]);
      // the survivor ends: the next pass drops its partition too
      await runs.cancelRun(seed.orgId, alive);
      await db.query(`UPDATE runs SET status_at = now() - interval '10 days' WHERE id = $1`, [alive]);
      expect((await retention.pass()).partitionsDropped).toBeGreaterThanOrEqual(1);
      for (const t of TABLES) expect(await exists(`${t}_${dayName(T + DAY).slice(11)}`)).toBe(false);
      expect((await db.query(`SELECT 1 FROM message_keys WHERE org_id = $1 AND run_id = $2`, [seed.orgId, alive])).length).toBe(0);
      expect((await db.query(`SELECT 1 FROM runs WHERE org_id = $1 AND NOT id = ANY($2::uuid[])`, [seed.orgId, archived])).length).toBe(0);
      for (const t of TABLES) expect(await exists(`${t}_${dayName(T + 2 * DAY).slice(11)}`)).toBe(true);
    } finally {
      await retention.setPolicy(seed.orgId, null, null);
      await db.query(`DROP EVENT TRIGGER IF EXISTS test_drops`);
      await db.query(`DROP FUNCTION IF EXISTS test_drops()`);
      for (const t of ROW_DELETES_RECORDED) await db.query(`DROP TRIGGER IF EXISTS test_row_deletes ON ${t}`);
      await db.query(`DROP TABLE IF EXISTS test_row_deletes`);
      await db.query(`DROP FUNCTION IF EXISTS test_row_deletes()`);
    }
  });

  it('with an archive directory, writes the archive of the partition\'s runs before it drops it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'aaas-partitions-'));
    const other = await (
      await Test.createTestingModule({
        imports: [ConfigModule.forRoot({ ...testEnv(), RETENTION_ARCHIVE_DIR: dir, RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0', RETENTION_INTERVAL_MS: '0' }), DbModule, RunRetentionModule],
      }).compile()
    ).init();
    const retention = other.get(RunRetention);
    try {
      for (const id of archived) await runs.setStatus(seed.orgId, id, 'completed');
      await db.query(`UPDATE runs SET status_at = now() - interval '10 days' WHERE id = ANY($1::uuid[])`, [archived]);
      await retention.setPolicy(seed.orgId, null, 1);
      expect((await retention.pass()).partitionsDropped).toBeGreaterThanOrEqual(1);
      expect(await exists(dayName(T + 2 * DAY))).toBe(false);
      expect((await db.query(`SELECT 1 FROM runs WHERE id = ANY($1::uuid[])`, [archived])).length).toBe(0);
      const files = await readdir(path.join(dir, seed.orgId));
      const lines = (await Promise.all(files.map((f) => readFile(path.join(dir, seed.orgId, f), 'utf8')))).join('').trim().split('\n').map((l) => JSON.parse(l));
      expect(lines.map((l) => l.run.id).sort()).toEqual([...archived].sort());
      expect(lines.map((l) => l.events.length)).toEqual([3, 3]);
      expect(lines.map((l) => l.messages.length)).toEqual([1, 1]);
    } finally {
      await retention.setPolicy(seed.orgId, null, null);
      await other.close();
    }
  });
});

describe('a run created now', () => {
  it('a new run id is a UUIDv7 of now, and its log lands in the partition of its period', async () => {
    const { run } = await newRun();
    expect(run.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = parseInt(run.id.replaceAll('-', '').slice(0, 12), 16);
    expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
    const partitions = await ctx.get(RunEventPartitions).list();
    const home = partitions.find((p) => p.from !== null && p.from <= run.id && run.id < p.to!);
    expect(home).toBeDefined();
    expect(await partitionsOf(run.id)).toEqual([home!.name]);
  });

});

/** A conversion test's scratch database: `<test database>_<suffix>` on the test server. */
function conversionUrl(suffix: string): string {
  return Object.assign(new URL(TEST_DATABASE_URL), { pathname: `${new URL(TEST_DATABASE_URL).pathname}_${suffix}` }).toString();
}

/** The core (config, db, runs) booted on `databaseUrl` with the test env plus `env`. */
async function bootOn(databaseUrl: string, env: Record<string, string> = {}): Promise<INestApplicationContext> {
  return (await Test.createTestingModule({ imports: [ConfigModule.forRoot({ ...testEnv(), DATABASE_URL: databaseUrl, ...env }), DbModule, RunsModule] }).compile()).init();
}

describe('the conversion migration', () => {
  const convUrl = conversionUrl('conv');
  let conv: INestApplicationContext | undefined;
  let client: pg.Client | undefined;

  afterAll(async () => {
    await conv?.close();
    await client?.end().catch(() => undefined);
    await dropDatabase(convUrl);
  });

  it('moves a populated log (v4 run ids) into partitions and the read path reads it back', async () => {
    client = await databaseBefore(convUrl, MIGRATION, { seed: false });
    await standInMessageKeys(client);

    // the pre-partition schema, populated through the application (then as v4 ids, as before)
    conv = await bootOn(convUrl);
    const convRuns = runsOf(conv);
    const s = await seedAgent(conv.get(DatabaseService));
    const { run: template } = await convRuns.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, message: { messageId: 'tpl', role: 'user', parts: [{ text: 'kept' }] } });
    await convRuns.setStatus(s.orgId, template.id, 'working');
    await convRuns.emitMessage(s.orgId, template.id, { parts: [{ text: 'answer' }] });
    await convRuns.setStatus(s.orgId, template.id, 'completed');
    // 300 copies with v4 ids outside the window (a leading f: their first 48 bits read as a year past 8000; a random
    // v4 id falls in the 10-year window with p ~ 0.1 %, and then goes to its month, as the next one does), and one
    // v4 id whose first 48 bits read as next month (it must go to that month's partition)
    const nextMonth = new Date();
    const inWindow = `${runIdBound(Date.UTC(nextMonth.getUTCFullYear(), nextMonth.getUTCMonth() + 1, 2)).slice(0, 14)}4abc-8abc-0123456789ab`;
    await client.query(
      `WITH ids AS (SELECT ('f' || substr(gen_random_uuid()::text, 2))::uuid AS id FROM generate_series(1, 300) UNION ALL SELECT $2::uuid),
            r AS (INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(t) || jsonb_build_object('id', ids.id, 'origin_message_id', ids.id::text))).* FROM runs t, ids WHERE t.id = $1 RETURNING id)
       INSERT INTO run_events SELECT (jsonb_populate_record(NULL::run_events, to_jsonb(e) || jsonb_build_object('run_id', r.id))).* FROM run_events e, r WHERE e.run_id = $1`,
      [template.id, inWindow],
    );
    await conv.close();
    conv = undefined;
    await dropStandIns(client);
    const before = (await client.query(`SELECT count(*)::int AS n, sum(hashtext(run_id::text || sequence || type || payload::text))::bigint AS h FROM run_events`)).rows[0];
    expect(before.n).toBe(302 * 5);

    await client.query(readFileSync(`prisma/migrations/${MIGRATION}/migration.sql`, 'utf8'));

    const after = (await client.query(`SELECT count(*)::int AS n, sum(hashtext(run_id::text || sequence || type || payload::text))::bigint AS h FROM run_events`)).rows[0];
    expect(after).toEqual(before);
    const where = (await client.query(`SELECT tableoid::regclass::text AS p, count(DISTINCT run_id)::int AS runs FROM run_events GROUP BY 1 ORDER BY 1`)).rows;
    const monthOf = (d: Date) => `run_events_p${d.toISOString().slice(0, 8).replaceAll('-', '')}01`;
    const templateHome = monthOf(new Date());
    const inWindowHome = monthOf(new Date(Date.UTC(nextMonth.getUTCFullYear(), nextMonth.getUTCMonth() + 1, 1)));
    expect(where).toEqual(
      [
        { p: 'run_events_legacy', runs: 300 },
        { p: templateHome, runs: 1 },
        { p: inWindowHome, runs: 1 },
      ].sort((a, b) => (a.p < b.p ? -1 : 1)),
    );
    const pk = (await client.query(`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = 'run_events_pkey'`)).rows[0].d;
    expect(pk).toBe('PRIMARY KEY (org_id, run_id, sequence)');
    await expect(client.query(`DELETE FROM run_events_legacy`)).rejects.toThrow(/append-only/);
    await expect(client.query(`UPDATE run_events_legacy SET type = 'x'`)).rejects.toThrow(/append-only/);
    const legacyId = (await client.query(`SELECT run_id FROM run_events_legacy LIMIT 1`)).rows[0].run_id as string;
    await client.end();
    client = undefined;

    // the normal read path, on the converted database
    conv = await bootOn(convUrl);
    const read = runsOf(conv);
    for (const id of [legacyId, inWindow]) {
      const events = await read.readEvents(s.orgId, id, 0);
      expect(events.map((e) => [e.sequence, e.event.type])).toEqual([
        [1, 'run.created'],
        [2, 'message.added'],
        [3, 'run.status_changed'],
        [4, 'message.added'],
        [5, 'run.status_changed'],
      ]);
      expect(await read.readEvents(s.orgId, id, 3)).toHaveLength(2);
      expect(await read.readEvents(randomUUID(), id, 0)).toEqual([]); // another organization reads nothing
    }
  }, 120_000);
});

describe('the projections conversion migration', () => {
  const convUrl = conversionUrl('conv_proj');
  let conv: INestApplicationContext | undefined;
  let client: pg.Client | undefined;

  afterAll(async () => {
    await conv?.close();
    await client?.end().catch(() => undefined);
    await dropDatabase(convUrl);
  });

  it('moves populated artifacts and push deliveries into the periods of their runs, rows and keys intact', async () => {
    client = await databaseBefore(convUrl, PROJECTIONS_MIGRATION, { seed: false });
    const c = client;
    await standInMessageKeys(c);

    // the schema before, populated through the application: a run with two artifacts (one of two chunks)
    conv = await bootOn(convUrl, { RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0' });
    const convRuns = runsOf(conv);
    const s = await seedAgent(conv.get(DatabaseService));
    const { run: template } = await convRuns.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, message: { messageId: 'tpl', role: 'user', parts: [{ text: 'kept' }] } });
    await convRuns.setStatus(s.orgId, template.id, 'working');
    await convRuns.emitArtifact(s.orgId, template.id, { artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }] });
    await convRuns.emitArtifact(s.orgId, template.id, { artifactId: 'a1', parts: [{ text: 'lo' }], append: true, lastChunk: true });
    await convRuns.emitArtifact(s.orgId, template.id, { artifactId: 'a2', name: 'more', parts: [{ text: 'x' }], lastChunk: true });
    await convRuns.setStatus(s.orgId, template.id, 'completed');
    await conv.close();
    conv = undefined;
    await dropStandIns(c);
    const cfg = randomUUID();
    await c.query(
      `INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, webhook_secret) VALUES ($1, $2, $3, $4, 'c1', '1.0', 'https://example.com/hook', 'x')`,
      [cfg, s.orgId, template.id, s.agentId],
    );
    await c.query(
      `INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, error, latency_ms)
       VALUES ($1, $2, $3, 1, 'msg_1', 503, 'unavailable', 3), ($1, $2, $3, 1, 'msg_1', 200, NULL, 4)`,
      [cfg, s.orgId, template.id],
    );
    // 300 copies with v4 ids outside the legacy window (a leading f), and one run ~3 years ahead
    // inside the window with no period (one retention dropped before removing its runs): its rows
    // must get a period made for them, not be refused by the legacy window
    const ahead = new Date();
    const orphanMonth = Date.UTC(ahead.getUTCFullYear() + 3, ahead.getUTCMonth(), 1);
    const orphan = `${runIdBound(orphanMonth + 14 * DAY).slice(0, 14)}7abc-8abc-0123456789ab`;
    await c.query(
      `WITH ids AS (SELECT ('f' || substr(gen_random_uuid()::text, 2))::uuid AS id FROM generate_series(1, 300) UNION ALL SELECT $2::uuid),
            r AS (INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(t) || jsonb_build_object('id', ids.id, 'origin_message_id', ids.id::text))).* FROM runs t, ids WHERE t.id = $1 RETURNING id),
            e AS (INSERT INTO run_events SELECT (jsonb_populate_record(NULL::run_events, to_jsonb(e) || jsonb_build_object('run_id', r.id))).* FROM run_events e, r WHERE e.run_id = $1 AND r.id <> $2::uuid),
            a AS (INSERT INTO artifacts SELECT (jsonb_populate_record(NULL::artifacts, to_jsonb(x) || jsonb_build_object('run_id', r.id, 'id', gen_random_uuid()))).* FROM artifacts x, r WHERE x.run_id = $1),
            pc AS (INSERT INTO push_configs SELECT (jsonb_populate_record(NULL::push_configs, to_jsonb(x) || jsonb_build_object('run_id', r.id, 'id', md5(r.id::text || x.id::text)::uuid))).* FROM push_configs x, r WHERE x.run_id = $1)
       INSERT INTO push_deliveries SELECT (jsonb_populate_record(NULL::push_deliveries, to_jsonb(d) || jsonb_build_object('run_id', r.id, 'config_id', md5(r.id::text || d.config_id::text)::uuid, 'id', nextval('push_deliveries_id_seq')))).*
         FROM push_deliveries d, r WHERE d.run_id = $1`,
      [template.id, orphan],
    );
    const digest = async (t: string) => (await c.query(`SELECT count(*)::int AS n, sum(hashtext(x::text))::bigint AS h FROM ${t} x`)).rows[0];
    const before = { artifacts: await digest('artifacts'), push_deliveries: await digest('push_deliveries'), messages: await digest('messages') };
    expect([before.artifacts.n, before.push_deliveries.n]).toEqual([302 * 2, 302 * 2]);
    const maxId = (await c.query(`SELECT max(id)::text AS m FROM push_deliveries`)).rows[0].m as string;

    await c.query(readFileSync(`prisma/migrations/${PROJECTIONS_MIGRATION}/migration.sql`, 'utf8'));

    // the same rows (every column, in the same order: RESTORE_SQL reads them by row type)
    expect({ artifacts: await digest('artifacts'), push_deliveries: await digest('push_deliveries'), messages: await digest('messages') }).toEqual(before);
    const q = (sql: string, params: unknown[]) => c.query(sql, params).then((r) => r.rows);
    const monthOf = (ms: number) => `p${new Date(ms).toISOString().slice(0, 8).replaceAll('-', '')}01`;
    const home = monthOf(Date.now());
    for (const t of ['artifacts', 'push_deliveries']) {
      const where = (await c.query(`SELECT tableoid::regclass::text AS p, count(DISTINCT run_id)::int AS runs FROM ${t} GROUP BY 1 ORDER BY 1`)).rows;
      expect(where).toEqual(
        [
          { p: `${t}_legacy`, runs: 300 },
          { p: `${t}_${home}`, runs: 1 },
          { p: `${t}_${monthOf(orphanMonth)}`, runs: 1 },
        ].sort((a, b) => (a.p < b.p ? -1 : 1)),
      );
      // every period of run_events (the orphan's included) exists for this table, same bounds
      expect(await periodsOf(q, t)).toEqual(await periodsOf(q, 'run_events'));
      const legacyCheck = (await c.query(`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = $1`, [`${t}_legacy_outside_periods`])).rows[0].d;
      expect(legacyCheck).toBe((await c.query(`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = 'run_events_legacy_outside_periods'`)).rows[0].d);
    }
    const defs = (await c.query(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conrelid IN ('artifacts'::regclass, 'push_deliveries'::regclass) ORDER BY 1`,
    )).rows;
    expect(defs).toEqual([
      { name: 'artifacts_org_id_run_id_fkey', d: 'FOREIGN KEY (org_id, run_id) REFERENCES runs(org_id, id) ON UPDATE CASCADE ON DELETE CASCADE' },
      { name: 'artifacts_pkey', d: 'PRIMARY KEY (org_id, run_id, id)' },
      { name: 'push_deliveries_org_id_config_id_fkey', d: 'FOREIGN KEY (org_id, config_id) REFERENCES push_configs(org_id, id) ON UPDATE CASCADE ON DELETE CASCADE' },
      { name: 'push_deliveries_pkey', d: 'PRIMARY KEY (org_id, run_id, id)' },
    ]);
    const indexes = (await c.query(`SELECT indexname AS name, indexdef AS d FROM pg_indexes WHERE tablename IN ('artifacts', 'push_deliveries') ORDER BY 1`)).rows.map((r) => `${r.name}: ${r.d.replace(/^.* USING /, '')}`);
    expect(indexes).toEqual([
      'artifacts_org_id_run_id_artifact_id_key: btree (org_id, run_id, artifact_id)',
      'artifacts_pkey: btree (org_id, run_id, id)',
      'push_deliveries_config_id_id_idx: btree (config_id, id DESC)',
      'push_deliveries_pkey: btree (org_id, run_id, id)',
    ]);
    // messages keep their table and their key across runs
    expect((await c.query(`SELECT relkind FROM pg_class WHERE relname = 'messages'`)).rows[0].relkind).toBe('r');
    // the id sequence belongs to the new table and goes on after the ids kept
    expect((await c.query(`SELECT pg_get_serial_sequence('push_deliveries', 'id') AS s`)).rows[0].s).toBe('public.push_deliveries_id_seq');
    const legacyId = (await c.query(`SELECT run_id FROM artifacts_legacy LIMIT 1`)).rows[0].run_id as string;
    await c.query(`INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, latency_ms) VALUES ($1, $2, $3, 2, 'msg_2', 200, 3)`, [cfg, s.orgId, template.id]);
    const next = (await c.query(`SELECT max(id)::text AS m FROM push_deliveries`)).rows[0].m as string;
    expect(BigInt(next)).toBeGreaterThan(BigInt(maxId));
    await migrateAfter(c, PROJECTIONS_MIGRATION);
    await c.end();
    client = undefined;

    // the normal read and append paths, on the converted database (then migrated to today's schema)
    conv = await bootOn(convUrl, { RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0' });
    const read = runsOf(conv);
    for (const id of [legacyId, template.id]) {
      const view = await read.view(s.orgId, id);
      expect(view.artifacts.map((a) => [a.artifactId, a.parts])).toEqual([
        ['a1', [{ text: 'Hel' }, { text: 'lo' }]],
        ['a2', [{ text: 'x' }]],
      ]);
    }
    const { run } = await read.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, message: { messageId: 'after', role: 'user', parts: [{ text: 'new' }] } });
    await read.setStatus(s.orgId, run.id, 'working');
    await read.emitArtifact(s.orgId, run.id, { artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }] });
    await read.emitArtifact(s.orgId, run.id, { artifactId: 'a1', parts: [{ text: 'lo' }], append: true, lastChunk: true });
    const db2 = conv.get(DatabaseService);
    expect(await db2.query(`SELECT tableoid::regclass::text AS p, parts FROM artifacts WHERE org_id = $1 AND run_id = $2`, [s.orgId, run.id])).toEqual([
      { p: `artifacts_${home}`, parts: [{ text: 'Hel' }, { text: 'lo' }] },
    ]);
    await read.cancelRun(s.orgId, run.id);
  }, 120_000);
});

describe('the messages conversion migration', () => {
  const convUrl = conversionUrl('conv_msg');
  let conv: INestApplicationContext | undefined;
  let client: pg.Client | undefined;

  afterAll(async () => {
    await conv?.close();
    await client?.end().catch(() => undefined);
    await dropDatabase(convUrl);
  });

  it('moves populated messages into the periods of their runs, every column intact, and fills message_keys from the user messages', async () => {
    client = await databaseBefore(convUrl, MESSAGES_MIGRATION, { seed: false });
    const c = client;
    await standInMessageKeys(c);

    // the schema before, populated through the application: a run with the creator's message, two
    // agent messages and a follow-up of another sender (a keyed caller)
    conv = await bootOn(convUrl, { RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0' });
    const convRuns = runsOf(conv);
    const s = await seedAgent(conv.get(DatabaseService));
    const { run: template } = await convRuns.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, message: { messageId: 'tpl', role: 'user', parts: [{ text: 'kept' }] } });
    await convRuns.setStatus(s.orgId, template.id, 'working');
    await convRuns.emitMessage(s.orgId, template.id, { messageId: 'a1', parts: [{ text: 'answer' }] });
    await convRuns.continueRun({ orgId: s.orgId, agentId: s.agentId, runId: template.id, sentBy: 'key:k1', message: { messageId: 'more', role: 'user', parts: [{ text: 'more' }] } });
    await convRuns.emitMessage(s.orgId, template.id, { messageId: 'a2', parts: [{ text: 'done' }] });
    await convRuns.setStatus(s.orgId, template.id, 'completed');
    await conv.close();
    conv = undefined;
    await dropStandIns(c);
    // a period ~5 years ahead (maintenance made it, say), then 300 copies with v4 ids outside the
    // legacy window (a leading f), and two runs in the window that no period covers (their period
    // dropped before retention removed them): ~3 years ahead (between two periods) and ~6 years
    // ahead (after the last one). Their messages must get a period made for them, not be refused by
    // the legacy window. The old key makes a messageId unique per sender across runs: copies get their own.
    const now = new Date();
    const month = (years: number) => Date.UTC(now.getUTCFullYear() + years, now.getUTCMonth(), 1);
    const p5 = month(5);
    await c.query(`SELECT run_period_add_partitions($1, $2::uuid, $3::uuid)`, [`p${new Date(p5).toISOString().slice(0, 10).replaceAll('-', '')}`, runIdBound(p5), runIdBound(month(5) + 40 * DAY)]);
    const orphans = [month(3), month(6)].map((m) => `${runIdBound(m + 14 * DAY).slice(0, 14)}7abc-8abc-0123456789ab`);
    await c.query(
      `WITH ids AS (SELECT ('f' || substr(gen_random_uuid()::text, 2))::uuid AS id FROM generate_series(1, 300) UNION ALL SELECT unnest($2::uuid[])),
            r AS (INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(t) || jsonb_build_object('id', ids.id, 'origin_message_id', ids.id::text || ':tpl'))).* FROM runs t, ids WHERE t.id = $1 RETURNING id),
            e AS (INSERT INTO run_events SELECT (jsonb_populate_record(NULL::run_events, to_jsonb(e) || jsonb_build_object('run_id', r.id))).* FROM run_events e, r WHERE e.run_id = $1 AND NOT r.id = ANY($2::uuid[]))
       INSERT INTO messages SELECT (jsonb_populate_record(NULL::messages, to_jsonb(m) || jsonb_build_object('run_id', r.id, 'id', gen_random_uuid(), 'message_id', r.id::text || ':' || m.message_id))).*
         FROM messages m, r WHERE m.run_id = $1`,
      [template.id, orphans],
    );
    const digest = async () => (await c.query(`SELECT count(*)::int AS n, sum(hashtext(x::text))::bigint AS h FROM messages x`)).rows[0];
    const before = await digest();
    expect(before.n).toBe(303 * 4);
    const users = (await c.query(`SELECT count(*)::int AS n FROM messages WHERE sent_by <> 'agent'`)).rows[0].n as number;
    expect(users).toBe(303 * 2);

    await c.query(readFileSync(`prisma/migrations/${MESSAGES_MIGRATION}/migration.sql`, 'utf8'));

    // the same rows (every column, in the same order: RESTORE_SQL reads them by row type)
    expect(await digest()).toEqual(before);
    // one key per user message: its sender, messageId, run and row, none for the agent's
    expect((await c.query(`SELECT count(*)::int AS n FROM message_keys`)).rows[0].n).toBe(users);
    const unmatched = await c.query(
      `SELECT org_id, agent_id, sent_by, message_id, run_id, id FROM messages WHERE sent_by <> 'agent'
       EXCEPT SELECT org_id, agent_id, sent_by, message_id, run_id, message_row_id FROM message_keys`,
    );
    expect(unmatched.rows).toEqual([]);
    const q = (sql: string, params: unknown[]) => c.query(sql, params).then((r) => r.rows);
    const monthOf = (ms: number) => `p${new Date(ms).toISOString().slice(0, 8).replaceAll('-', '')}01`;
    const home = monthOf(Date.now());
    const where = (await c.query(`SELECT tableoid::regclass::text AS p, count(DISTINCT run_id)::int AS runs FROM messages GROUP BY 1 ORDER BY 1`)).rows;
    expect(where).toEqual(
      [
        { p: 'messages_legacy', runs: 300 },
        { p: `messages_${home}`, runs: 1 },
        { p: `messages_${monthOf(month(3))}`, runs: 1 },
        { p: `messages_${monthOf(month(6))}`, runs: 1 },
      ].sort((a, b) => (a.p < b.p ? -1 : 1)),
    );
    // every period of run_events (the orphans' included) exists for every partitioned table, same bounds
    for (const t of TABLES.slice(1)) expect(await periodsOf(q, t)).toEqual(await periodsOf(q, 'run_events'));
    expect((await c.query(`SELECT run_partitioned_tables() AS t`)).rows[0].t).toEqual([...TABLES]);
    const legacyCheck = (await c.query(`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = 'messages_legacy_outside_periods'`)).rows[0].d;
    expect(legacyCheck).toBe((await c.query(`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = 'run_events_legacy_outside_periods'`)).rows[0].d);
    const defs = (await c.query(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conrelid IN ('messages'::regclass, 'message_keys'::regclass) ORDER BY 1`,
    )).rows;
    expect(defs).toEqual([
      { name: 'message_keys_org_id_run_id_fkey', d: 'FOREIGN KEY (org_id, run_id) REFERENCES runs(org_id, id) ON UPDATE CASCADE ON DELETE CASCADE' },
      { name: 'message_keys_pkey', d: 'PRIMARY KEY (org_id, agent_id, sent_by, message_id)' },
      { name: 'messages_org_id_run_id_fkey', d: 'FOREIGN KEY (org_id, run_id) REFERENCES runs(org_id, id) ON UPDATE CASCADE ON DELETE CASCADE' },
      { name: 'messages_pkey', d: 'PRIMARY KEY (org_id, run_id, id)' },
    ]);
    const indexes = (await c.query(`SELECT indexname AS name, indexdef AS d FROM pg_indexes WHERE tablename IN ('messages', 'message_keys') ORDER BY 1`)).rows.map((r) => `${r.name}: ${r.d.replace(/^.* USING /, '')}`);
    expect(indexes).toEqual([
      'message_keys_pkey: btree (org_id, agent_id, sent_by, message_id)',
      'message_keys_run_id_idx: btree (run_id)',
      'messages_org_id_run_id_sent_by_message_id_key: btree (org_id, run_id, sent_by, message_id)',
      'messages_pkey: btree (org_id, run_id, id)',
      'messages_run_id_sequence_idx: btree (run_id, sequence)',
    ]);
    const legacyId = (await c.query(`SELECT run_id FROM messages_legacy LIMIT 1`)).rows[0].run_id as string;
    // today's application needs today's schema (the migrations after this one)
    await migrateAfter(c, MESSAGES_MIGRATION);
    await c.end();
    client = undefined;

    // the normal read and append paths, on the converted database
    conv = await bootOn(convUrl, { RUN_EVENTS_PARTITION_MAINTENANCE_MS: '0' });
    const read = runsOf(conv);
    for (const id of [legacyId, template.id]) {
      const view = await read.view(s.orgId, id);
      expect(view.history.map((m) => [m.role, m.parts])).toEqual([
        ['user', [{ text: 'kept' }]],
        ['agent', [{ text: 'answer' }]],
        ['user', [{ text: 'more' }]],
        ['agent', [{ text: 'done' }]],
      ]);
    }
    const { run } = await read.createRun({ orgId: s.orgId, agentId: s.agentId, revisionId: s.revisionId, message: { messageId: 'after', role: 'user', parts: [{ text: 'new' }] } });
    const onNew = (messageId: string, sentBy?: string) =>
      read.continueRun({ orgId: s.orgId, agentId: s.agentId, runId: run.id, ...(sentBy !== undefined && { sentBy }), message: { messageId, role: 'user', parts: [{ text: messageId }] } }).then(
        () => 'ok',
        (e: { code?: string }) => e.code,
      );
    // the keys the migration filled refuse the converted user messageIds on another run, per sender
    expect(await onNew('tpl')).toBe('run.conflict');
    expect(await onNew(`${legacyId}:more`, 'key:k1')).toBe('run.conflict');
    expect(await onNew('more', 'key:k2')).toBe('ok');
    // the agent's messageIds are unique within a run only
    await read.setStatus(s.orgId, run.id, 'working');
    await read.emitMessage(s.orgId, run.id, { messageId: 'a1', parts: [{ text: 'answer' }] });
    const db2 = conv.get(DatabaseService);
    expect(await db2.query(`SELECT tableoid::regclass::text AS p, sent_by AS "sentBy", message_id AS "messageId" FROM messages WHERE org_id = $1 AND run_id = $2 ORDER BY sequence`, [s.orgId, run.id])).toEqual([
      { p: `messages_${home}`, sentBy: '', messageId: 'after' },
      { p: `messages_${home}`, sentBy: 'key:k2', messageId: 'more' },
      { p: `messages_${home}`, sentBy: 'agent', messageId: 'a1' },
    ]);
    await read.cancelRun(s.orgId, run.id);
  }, 120_000);
});

describe('a run whose period has no partition yet', () => {
  it('is created all the same: the partition is made on the spot', async () => {
    // a random day ~5 years ahead: inside the window the DEFAULT partition refuses, with no partition
    const day = Date.UTC(new Date().getUTCFullYear() + 5, 0, 1) + Math.floor(Math.random() * 300) * DAY;
    expect(await exists(dayName(day))).toBe(false);
    const { run } = await at(day + 3_600_000, () => newRun());
    expect(await partitionsOf(run.id)).toEqual([dayName(day)]);
    expect((await runs.readEvents(seed.orgId, run.id, 0)).map((e) => e.event.type)).toEqual(['run.created', 'message.added']);
    // the whole period was made: the run's messages, artifacts (the append path's ON CONFLICT) and deliveries land in it
    const period = dayName(day).slice(11);
    const [events, ...others] = await Promise.all(TABLES.map(periodsHere));
    for (const periods of others) expect(periods.get(period)).toBe(events!.get(period));
    expect(await db.query(`SELECT tableoid::regclass::text AS p, role FROM messages WHERE org_id = $1 AND run_id = $2`, [seed.orgId, run.id])).toEqual([{ p: `messages_${period}`, role: 'user' }]);
    await runs.setStatus(seed.orgId, run.id, 'working');
    await runs.emitArtifact(seed.orgId, run.id, { artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }] });
    await runs.emitArtifact(seed.orgId, run.id, { artifactId: 'a1', parts: [{ text: 'lo' }], append: true, lastChunk: true });
    await pushDelivery(run.id);
    const rows = await db.query<{ p: string; parts: unknown }>(`SELECT tableoid::regclass::text AS p, parts FROM artifacts WHERE org_id = $1 AND run_id = $2`, [seed.orgId, run.id]);
    expect(rows).toEqual([{ p: `artifacts_${period}`, parts: [{ text: 'Hel' }, { text: 'lo' }] }]);
    const delivered = await db.query<{ p: string }>(`SELECT tableoid::regclass::text AS p FROM push_deliveries WHERE org_id = $1 AND run_id = $2`, [seed.orgId, run.id]);
    expect(delivered).toEqual([{ p: `push_deliveries_${period}` }]);
    await runs.cancelRun(seed.orgId, run.id);
  });
});


describe('messageIds across the runs and periods of an agent', () => {
  // far periods (made on the spot), later than every run this file made before (ids follow time)
  const year = new Date().getUTCFullYear();
  const d1 = Date.UTC(year + 6, 0, 1) + Math.floor(Math.random() * 300) * DAY;
  const d2 = Date.UTC(year + 7, 0, 1) + Math.floor(Math.random() * 300) * DAY;
  const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: { code?: string }) => e.code ?? String(e));
  let first: string;
  let second: string;
  const continueWith = (runId: string, messageId: string, sentBy?: string) =>
    codeOf(runs.continueRun({ orgId: seed.orgId, agentId: seed.agentId, runId, ...(sentBy !== undefined && { sentBy }), message: { messageId, role: 'user', parts: [{ text: messageId }] } }));
  const count = async (table: string, messageId: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE org_id = $1 AND message_id = $2`, [seed.orgId, messageId]))[0]!.n;

  it('a user messageId is refused on another run of its agent whatever their periods; two runs racing for one, exactly one records it', async () => {
    first = (await at(d1 + 3_600_000, () => newRun('first'))).run.id;
    second = (await at(d2 + 3_600_000, () => newRun('second'))).run.id;
    expect(await partitionsOf(first)).toEqual([dayName(d1)]);
    expect(await partitionsOf(second)).toEqual([dayName(d2)]);
    const used = randomUUID();
    expect(await continueWith(first, used)).toBe('ok');
    // the same sender on the run of another period: refused; on its own run: a retry, nothing added
    expect(await continueWith(second, used)).toBe('run.conflict');
    expect(await continueWith(first, used)).toBe('ok');
    // as the message of a new task: refused too
    expect(await codeOf(at(d2 + 2 * 3_600_000, () => runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: used, role: 'user', parts: [{ text: 'again' }] } })))).toBe('run.conflict');
    // another sender's same messageId is its own message
    expect(await continueWith(second, used, 'key:someone-else')).toBe('ok');
    expect([await count('messages', used), await count('message_keys', used)]).toEqual([2, 2]);
    // the check and the insert are one statement: racing appends on runs of two periods, one wins
    for (let i = 0; i < 5; i++) {
      const raced = randomUUID();
      const outcomes = await Promise.all([continueWith(first, raced), continueWith(second, raced)]);
      expect(outcomes.sort()).toEqual(['ok', 'run.conflict']);
      expect([await count('messages', raced), await count('message_keys', raced)]).toEqual([1, 1]);
    }
  });

  it('an agent messageId is unique within its run only: runs of two periods, or of one, may each carry it', async () => {
    const third = (await at(d2 + 3 * 3_600_000, () => newRun('third'))).run.id;
    expect(await partitionsOf(third)).toEqual([dayName(d2)]);
    const same = randomUUID();
    for (const id of [first, second, third]) expect(await codeOf(runs.emitMessage(seed.orgId, id, { messageId: same, parts: [{ text: 'agent says' }] }))).toBe('ok');
    // twice on one run: refused (the unique key of messages within a run)
    expect(await codeOf(runs.emitMessage(seed.orgId, second, { messageId: same, parts: [{ text: 'again' }] }))).toBe('run.conflict');
    const rows = await db.query<{ runId: string; sentBy: string }>(`SELECT run_id AS "runId", sent_by AS "sentBy" FROM messages WHERE org_id = $1 AND message_id = $2`, [seed.orgId, same]);
    expect(rows.map((r) => r.runId).sort()).toEqual([first, second, third].sort());
    expect(new Set(rows.map((r) => r.sentBy))).toEqual(new Set(['agent']));
    // the agent's messages have no key across runs
    expect(await count('message_keys', same)).toBe(0);
    for (const id of [first, second, third]) await runs.cancelRun(seed.orgId, id);
  });
});
