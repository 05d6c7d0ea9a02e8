/**
 * Growth benchmark (issue 23, "Must show"): does the service stay as fast when the log is large?
 *
 *   npm run bench:growth                          (build, then node dist/bench/growth.bench.js)
 *   GROWTH_SCALE=0.05 node dist/bench/growth.bench.js      (a quick run: 25,000 runs, 250,000 events)
 *
 * 1. Its own PostgreSQL cluster and redis-server (bench/lib/own-services.ts; or BENCH_DATABASE_URL /
 *    BENCH_REDIS_URL), our API and one worker in child processes (bench/ours/ours.ts), organizations
 *    (POST /v1/organizations with the bootstrap key) each with agents published through the admin API.
 * 2. Template runs through the real service: one completed run of the `fill` rule (a working
 *    status, agent messages, an artifact, completed) whose log holds GROWTH_EVENTS_PER_RUN events.
 * 3. The fill, set-based SQL (generate_series, in chunks): GROWTH_RUNS runs, each a copy of the
 *    template's rows — the runs row, its run_events (same sequences 1..n, types, payloads), messages,
 *    the keys of its user messages (message_keys), artifacts and dispatch rows, exactly as the write path left them — with its own UUIDv7 id
 *    (48-bit unix ms of its created_at, version 7, variant 10; built in SQL), its own thread id and
 *    message ids (replaced in the payloads too), spread over the organizations and agents, created_at
 *    spread over the last GROWTH_SPAN_DAYS days (oldest first, so ids follow time), times shifted alike.
 * 4. Measured twice — at the start (after the first 5 % of the fill) and at the end, each after a
 *    VACUUM (ANALYZE) (what autovacuum does in a database that grew over months) — sequentially,
 *    GROWTH_SAMPLES requests each, on the bench organization's echo agent:
 *    - append: SendMessage (JSON-RPC, returnImmediately) continuing an input-required run (created
 *      through the API beforehand): the one-statement append of the user's answer and its dispatch;
 *    - GetTask (JSON-RPC) of a random filled run of any age;
 *    - ListTasks (JSON-RPC, the agent's first page);
 *    - resume: SubscribeToTask with `Last-Event-ID: 1` on a random completed filled run, read until
 *      the server ends the stream (every later event).
 *    p50/p99 each, and "end within 1.5× of start" PASS/MISS (p50 and p99).
 * 5. Table and index sizes (pg_total_relation_size / pg_indexes_size, summed over partitions).
 * 6. Retention: a policy for every organization so that the oldest ~GROWTH_EXPIRE_FRACTION of the
 *    runs expire, then the real job code (RunRetention.pass from the compiled libs) until nothing is
 *    left, timed; sizes and dead tuples (pg_stat_user_tables.n_dead_tup) before, after the passes,
 *    and after VACUUM (whole periods of run_events, messages, artifacts and push_deliveries are
 *    dropped with the keys of their user messages, the rest of what expired is deleted row by row).
 *
 * Env: GROWTH_RUNS (500000), GROWTH_EVENTS_PER_RUN (10), GROWTH_SCALE (1: multiplies GROWTH_RUNS),
 * GROWTH_ORGS (4), GROWTH_AGENTS (3 per organization), GROWTH_SPAN_DAYS (395), GROWTH_SAMPLES (200),
 * GROWTH_CHUNK_RUNS (20000 runs per fill transaction), GROWTH_EXPIRE_FRACTION (0.2),
 * GROWTH_RETENTION_BATCH (2000: RETENTION_BATCH_SIZE of the pass), BENCH_DATABASE_URL, BENCH_REDIS_URL,
 * BENCH_OUT (results JSON; '' = none; default bench/results/growth-<ts>.json).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { INestApplicationContext } from '@nestjs/common';
import { repoPath } from './lib/child-server.js';
import { BenchPostgres, BenchRedis, stopOwnServices } from './lib/own-services.js';
import { envNumber, formatTable, loadAverage, nowMs, round, Samples, type LatencySummary } from './lib/stats.js';
import { startOursProcesses, type OursProcesses } from './ours/ours.js';

const SCALE = envNumber('GROWTH_SCALE', 1);
const S = {
  runs: Math.max(100, Math.round(envNumber('GROWTH_RUNS', 500_000) * SCALE)),
  eventsPerRun: Math.max(5, Math.round(envNumber('GROWTH_EVENTS_PER_RUN', 10))),
  orgs: Math.max(1, Math.round(envNumber('GROWTH_ORGS', 4))),
  agents: Math.max(1, Math.round(envNumber('GROWTH_AGENTS', 3))),
  spanDays: envNumber('GROWTH_SPAN_DAYS', 395),
  samples: Math.max(10, Math.round(envNumber('GROWTH_SAMPLES', 200))),
  chunk: Math.max(1000, Math.round(envNumber('GROWTH_CHUNK_RUNS', 20_000))),
  expire: envNumber('GROWTH_EXPIRE_FRACTION', 0.2),
  retentionBatch: Math.round(envNumber('GROWTH_RETENTION_BATCH', 2000)),
};
/** JSON-RPC headers; X-API-Key (the bootstrap admin key, set in main): an admin caller sees every task of the agent. */
const HEADERS: Record<string, string> = { 'content-type': 'application/json', 'a2a-version': '1.0' };
const TERMINAL = `('completed', 'failed', 'canceled', 'rejected')`;
const log = (s: string) => process.stdout.write(`[growth] ${s}\n`);

/** Rules of every agent: `ask` waits for input (the append samples answer it); `fill` is the template. */
function rules(fillMessages: number): unknown[] {
  return [
    { name: 'ask', match: { text: '^ask' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'Booked for {{input}}' }] },
    {
      name: 'fill',
      match: { text: '^fill' },
      steps: [
        { type: 'status', status: 'working', message: 'working on it' },
        ...Array.from({ length: fillMessages }, (_, i) => ({ type: 'message', text: `part ${i + 1} of the answer to {{input}}` })),
        { type: 'artifact', artifactId: 'report', name: 'report.txt', content: { text: 'report on: {{input}}' } },
        { type: 'status', status: 'completed', message: 'done' },
      ],
    },
  ];
}

async function admin(base: string, key: string, method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(base + p, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}
async function publish(base: string, key: string, slug: string, fillMessages: number, create: boolean): Promise<{ agentId: string; revisionId: string }> {
  const agent = create ? await admin(base, key, 'POST', '/v1/agents', { slug, name: slug, description: 'growth bench agent' }) : await admin(base, key, 'GET', `/v1/agents/${slug}`);
  const rev = await admin(base, key, 'POST', `/v1/agents/${slug}/revisions`, {
    protocolProfiles: { a2a: { skillsProjection: [{ id: 'fill', name: 'Fill', description: 'fills', tags: ['bench'] }], capabilities: { streaming: true } } },
    runtime: { kind: 'scripted', rules: rules(fillMessages) },
  });
  await admin(base, key, 'POST', `/v1/agents/${slug}/revisions/${rev.id}/publish`);
  await admin(base, key, 'PUT', `/v1/agents/${slug}/active-revision`, { revisionId: rev.id });
  if (create) await admin(base, key, 'PUT', `/v1/agents/${slug}/bindings/a2a`, { transports: ['JSONRPC'] });
  return { agentId: agent.id, revisionId: rev.id };
}
async function rpc(url: string, method: string, params: unknown): Promise<any> {
  const res = await fetch(url, { method: 'POST', headers: { ...HEADERS, accept: 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: unknown; error?: unknown };
  if (!res.ok || body.error) throw new Error(`${method}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body.result;
}
/** Wait until every run of `ids` matches `condition` (SQL over runs: e.g. `status = 'completed'`). */
async function waitFor(db: pg.Client, ids: string[], condition: string, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE id = ANY($1::uuid[]) AND NOT (${condition})`, [ids]);
    if (rows[0]!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0]!.n} runs not yet ${condition}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const COMPLETED = `status = 'completed'`;
const ASKING = `status = 'working' AND blocked_reason = 'input_required'`;
async function sendTask(url: string, text: string): Promise<string> {
  const r = await rpc(url, 'SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] }, configuration: { returnImmediately: true } });
  return r.task.id as string;
}

/** Columns of a table (ordinal order), without identity / serial ones (their default fills them). */
async function columns(db: pg.Client, table: string): Promise<string[]> {
  const { rows } = await db.query<{ column_name: string; d: string | null; identity: string }>(
    `SELECT column_name, column_default AS d, is_identity AS identity FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  return rows.filter((r) => r.identity !== 'YES' && !(r.d ?? '').startsWith('nextval(')).map((r) => r.column_name);
}

/**
 * The fill: copies of the template run `tpl` (its row and every row of its in `tables`), per
 * generated run `b` of temp table `growth_batch` (id, ts, org_id, agent_id, revision_id, thread_id).
 * Text the template carries that names it (its id, thread id, message ids) is replaced by the copy's.
 */
async function fillStatements(db: pg.Client, tpl: { id: string; thread_id: string; created_at: Date }, tables: string[]): Promise<string[]> {
  const { rows: msgs } = await db.query<{ message_id: string }>(`SELECT message_id FROM messages WHERE run_id = $1 ORDER BY sequence, id`, [tpl.id]);
  const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;
  // the copy's message ids: md5 of (run id, index) as a UUID, so each run's are its own
  const swaps: Array<[string, string]> = [
    [tpl.id, 'b.id::text'],
    [tpl.thread_id, 'b.thread_id'],
    ...msgs.map((m, i): [string, string] => [m.message_id, `md5(b.id::text || ':${i}')::uuid::text`]),
  ];
  const R = (expr: string) => swaps.reduce((e, [from, to]) => `replace(${e}, ${lit(from)}, ${to})`, expr);
  const shift = (col: string) => `CASE WHEN t.${col} IS NULL THEN NULL ELSE b.ts + (t.${col} - ${lit(tpl.created_at.toISOString())}::timestamptz) END`;
  const stmts: string[] = [];
  const copy = async (table: string, where: string, over: Record<string, string>) => {
    const cols = await columns(db, table);
    const types = new Map((await db.query<{ column_name: string; data_type: string }>(`SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, [table])).rows.map((r) => [r.column_name, r.data_type]));
    const select = cols.map((c) => {
      if (c in over) return over[c]!;
      const type = types.get(c);
      if (type === 'timestamp with time zone') return shift(c);
      if (type === 'jsonb') return `${R(`t.${c}::text`)}::jsonb`;
      if (type === 'text' || type === 'character varying') return `CASE WHEN t.${c} IS NULL THEN NULL ELSE ${R(`t.${c}`)} END`;
      return `t.${c}`;
    });
    stmts.push(`INSERT INTO ${table} (${cols.map((c) => `"${c}"`).join(', ')}) SELECT ${select.join(', ')} FROM growth_batch b CROSS JOIN ${table} t WHERE ${where}`);
  };
  await copy('runs', `t.id = ${lit(tpl.id)}`, {
    id: 'b.id', org_id: 'b.org_id', agent_id: 'b.agent_id', revision_id: 'b.revision_id', thread_id: 'b.thread_id',
    created_at: 'b.ts', lease_owner: 'NULL', lease_trigger: 'NULL', lease_expires_at: 'NULL',
  });
  for (const table of tables) {
    const cols = await columns(db, table);
    const over: Record<string, string> = { run_id: 'b.id', org_id: 'b.org_id' };
    if (cols.includes('agent_id')) over.agent_id = 'b.agent_id';
    if (cols.includes('id') && table !== 'run_events') over.id = 'gen_random_uuid()';
    // a message's key row names the message row: both ids derived alike from (copy, template row)
    if (table === 'messages') over.id = 'md5(b.id::text || t.id::text)::uuid';
    if (table === 'message_keys') over.message_row_id = 'md5(b.id::text || t.message_row_id::text)::uuid';
    await copy(table, `t.run_id = ${lit(tpl.id)}`, over);
  }
  return stmts;
}

/** UUIDv7 of a timestamptz expression: 48-bit unix ms, version 7, variant 10, the rest random. */
const UUIDV7 = (ts: string) =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from ${ts}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

async function fill(db: pg.Client, from: number, to: number, combos: Array<{ orgId: string; agentId: string; revisionId: string }>, stmts: string[], startMs: number): Promise<void> {
  const spanMs = S.spanDays * 86_400_000;
  for (let lo = from; lo < to; lo += S.chunk) {
    const hi = Math.min(to, lo + S.chunk);
    const t0 = nowMs();
    await db.query('BEGIN');
    await db.query(`DROP TABLE IF EXISTS growth_batch`);
    // run g: created at start + g/runs of the span (+ < 1 step of jitter), so ids follow time
    await db.query(
      `CREATE TEMP TABLE growth_batch ON COMMIT DROP AS
       SELECT ${UUIDV7('ts')} AS id, ts, c.org_id, c.agent_id, c.revision_id, gen_random_uuid()::text AS thread_id
         FROM (SELECT g, date_trunc('milliseconds', to_timestamp(($3::float8 + (g + random() * 0.9) * $4::float8) / 1000.0)) AS ts FROM generate_series($1::int, $2::int - 1) g) s
         JOIN unnest($5::uuid[], $6::uuid[], $7::uuid[]) WITH ORDINALITY AS c(org_id, agent_id, revision_id, k) ON c.k = (s.g % $8::int) + 1`,
      [lo, hi, startMs, spanMs / S.runs, combos.map((c) => c.orgId), combos.map((c) => c.agentId), combos.map((c) => c.revisionId), combos.length],
    );
    for (const s of stmts) await db.query(s);
    await db.query('COMMIT');
    log(`filled runs ${lo}..${hi - 1} (${round(nowMs() - t0, 0)} ms)`);
  }
}

interface Phase {
  /** The machine's 1/5/15-minute load average when the phase ended (other processes share it). */
  loadAverage: [number, number, number];
  append: LatencySummary;
  getTask: LatencySummary;
  listTasks: LatencySummary;
  resume: LatencySummary;
}

async function measure(ours: OursProcesses, db: pg.Client, echo: { orgId: string; agentId: string }): Promise<Phase> {
  const n = S.samples;
  // input-required runs to answer (created through the API, the worker asks)
  const asking: string[] = [];
  for (let i = 0; i < n; i++) asking.push(await sendTask(ours.url, `ask ${i}`));
  await waitFor(db, asking, ASKING);
  // filled runs of any age (the measured agent's; the fill ends a day ago)
  const { rows: picks } = await db.query<{ id: string }>(
    `SELECT id FROM runs WHERE org_id = $1 AND agent_id = $2 AND status = 'completed' AND created_at < now() - interval '1 day' ORDER BY random() LIMIT $3`,
    [echo.orgId, echo.agentId, n],
  );
  if (picks.length === 0) throw new Error('no filled runs of the measured agent');
  const ids = picks.map((r) => r.id);
  while (ids.length < n) ids.push(ids[ids.length % Math.max(1, picks.length)]!);
  const out = { append: new Samples(), getTask: new Samples(), listTasks: new Samples(), resume: new Samples() };
  for (let i = 0; i < n; i++) {
    let t = nowMs();
    await rpc(ours.url, 'SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', taskId: asking[i], parts: [{ text: `friday ${i}` }] }, configuration: { returnImmediately: true } });
    out.append.push(nowMs() - t);
    t = nowMs();
    const task = await rpc(ours.url, 'GetTask', { id: ids[i] });
    out.getTask.push(nowMs() - t);
    if (task.id !== ids[i]) throw new Error('GetTask answered another task');
    t = nowMs();
    const page = await rpc(ours.url, 'ListTasks', {});
    out.listTasks.push(nowMs() - t);
    if (!Array.isArray(page.tasks) || page.tasks.length === 0) throw new Error('ListTasks: an empty first page');
    t = nowMs();
    const res = await fetch(ours.url, { method: 'POST', headers: { ...HEADERS, accept: 'text/event-stream', 'last-event-id': '1' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: ids[i] } }) });
    const text = await res.text();
    out.resume.push(nowMs() - t);
    if (!res.ok || !text.includes(`id: ${lastSequence}`)) throw new Error(`resume: HTTP ${res.status}, the stream lacks the last event: ${text.slice(0, 300)}`);
  }
  await waitFor(db, asking, COMPLETED);
  return { loadAverage: loadAverage(), append: out.append.summary(), getTask: out.getTask.summary(), listTasks: out.listTasks.summary(), resume: out.resume.summary() };
}

interface TableSize {
  table: string;
  rows: number;
  totalMb: number;
  indexMb: number;
  deadTuples: number;
}
/** Per top-level table (partitions summed into their parent): estimated rows, total and index size, dead tuples. */
async function sizes(db: pg.Client): Promise<TableSize[]> {
  const { rows } = await db.query<{ table: string; rows: string; total: string; idx: string; dead: string }>(`
    SELECT c.relname AS table,
           sum(greatest(p.reltuples, 0))::bigint AS rows,
           sum(pg_total_relation_size(p.oid))::bigint AS total,
           sum(pg_indexes_size(p.oid))::bigint AS idx,
           coalesce(sum(s.n_dead_tup), 0)::bigint AS dead
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
      CROSS JOIN LATERAL (SELECT relid FROM pg_partition_tree(c.oid) UNION SELECT c.oid) t
      JOIN pg_class p ON p.oid = t.relid
      LEFT JOIN pg_stat_user_tables s ON s.relid = p.oid
     WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
     GROUP BY c.relname
     ORDER BY sum(pg_total_relation_size(p.oid)) DESC`);
  return rows.map((r) => ({ table: r.table, rows: Number(r.rows), totalMb: round(Number(r.total) / 1048576, 1), indexMb: round(Number(r.idx) / 1048576, 1), deadTuples: Number(r.dead) }));
}
function printSizes(title: string, list: TableSize[]): void {
  log(title);
  const top = list.filter((t) => t.totalMb >= 0.1 || t.deadTuples > 0);
  process.stdout.write(`${formatTable(['table', 'rows (est.)', 'total MB', 'indexes MB', 'dead tuples'], top.map((t) => [t.table, String(t.rows), String(t.totalMb), String(t.indexMb), String(t.deadTuples)]))}\n`);
}

/** The template's last sequence: every filled run's (the resume check wants its last event). */
let lastSequence = 0;

async function main(): Promise<void> {
  const started = Date.now();
  log(`runs ${S.runs}, ~${S.eventsPerRun} events each, ${S.orgs} organizations × ${S.agents} agents, over ${S.spanDays} days; ${S.samples} samples per operation; load ${loadAverage().join(' ')}`);
  const own = !process.env.BENCH_DATABASE_URL;
  const pgc = own ? await BenchPostgres.start() : null;
  const redis = process.env.BENCH_REDIS_URL ? null : await BenchRedis.start();
  const databaseUrl = process.env.BENCH_DATABASE_URL ?? pgc!.url('aaas_growth');
  if (pgc) {
    const c = new pg.Client({ connectionString: pgc.url('postgres') });
    await c.connect();
    await c.query('CREATE DATABASE aaas_growth');
    await c.end();
  }
  const ours = await startOursProcesses({
    databaseUrl,
    redisUrl: process.env.BENCH_REDIS_URL ?? redis!.url,
    capabilities: { streaming: true },
    rules: rules(0),
    env: { RETENTION_INTERVAL_MS: '0', LOG_LEVEL: 'silent' },
  });
  HEADERS['x-api-key'] = ours.key;
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  let app: INestApplicationContext | undefined;
  try {
    // the fill rule: as many agent messages as make GROWTH_EVENTS_PER_RUN events (probe with none first)
    const probe = await sendTask(ours.url, 'fill probe');
    await waitFor(db, [probe], COMPLETED);
    const base = (await db.query<{ n: number }>(`SELECT last_sequence AS n FROM runs WHERE id = $1`, [probe])).rows[0]!.n;
    const fillMessages = Math.max(0, S.eventsPerRun - base);
    // organizations and agents (the bench org's `echo` is the measured agent)
    const combos: Array<{ orgId: string; agentId: string; revisionId: string; key: string; slug: string }> = [];
    const echo = await publish(ours.base, ours.key, 'echo', fillMessages, false);
    const benchOrg = (await admin(ours.base, ours.key, 'GET', '/v1/organization')).id as string;
    combos.push({ orgId: benchOrg, ...echo, key: ours.key, slug: 'echo' });
    for (let a = 1; a < S.agents; a++) combos.push({ orgId: benchOrg, ...(await publish(ours.base, ours.key, `agent-${a}`, fillMessages, true)), key: ours.key, slug: `agent-${a}` });
    for (let o = 1; o < S.orgs; o++) {
      const org = await admin(ours.base, ours.key, 'POST', '/v1/organizations', { slug: `growth-${o}`, name: `Growth ${o}` });
      for (let a = 0; a < S.agents; a++) combos.push({ orgId: org.id, ...(await publish(ours.base, org.adminKey.key, `agent-${a}`, fillMessages, true)), key: org.adminKey.key, slug: `agent-${a}` });
    }
    const tplId = await sendTask(ours.url, 'fill template');
    await waitFor(db, [tplId], COMPLETED);
    const tpl = (await db.query<{ id: string; thread_id: string; created_at: Date; last_sequence: number }>(`SELECT id, thread_id, created_at, last_sequence FROM runs WHERE id = $1`, [tplId])).rows[0]!;
    lastSequence = tpl.last_sequence;
    const counts = (await db.query<{ t: string; n: number }>(
      `SELECT 'messages' t, count(*)::int n FROM messages WHERE run_id = $1 UNION ALL SELECT 'message_keys', count(*)::int FROM message_keys WHERE run_id = $1
       UNION ALL SELECT 'artifacts', count(*)::int FROM artifacts WHERE run_id = $1
       UNION ALL SELECT 'interaction_requests', count(*)::int FROM interaction_requests WHERE run_id = $1 UNION ALL SELECT 'run_dispatches', count(*)::int FROM run_dispatches WHERE run_id = $1`,
      [tplId],
    )).rows;
    log(`template run ${tplId}: ${tpl.last_sequence} events; ${counts.map((c) => `${c.t} ${c.n}`).join(', ')}`);
    const tables = ['run_events', ...counts.filter((c) => c.n > 0).map((c) => c.t)];
    const stmts = await fillStatements(db, tpl, tables);
    // the fill's times: the last GROWTH_SPAN_DAYS days, ending a day ago (the measured runs are newer)
    const startMs = Date.now() - (S.spanDays + 1) * 86_400_000;
    // a database that grew over these months under the service has a period per month (a partition
    // of run_events, messages, artifacts and push_deliveries each; the workers create them ahead, docs/deploy.md
    // "The log's partitions"): made here as they would have been, or every filled run would land in
    // the legacy partitions
    const made = (await db.query<{ n: number }>(
      `SELECT count(*) FILTER (WHERE run_period_add_partitions('p' || to_char(m AT TIME ZONE 'UTC', 'YYYYMMDD'),
                                                               run_events_bound(m), run_events_bound(m + interval '1 month')))::int AS n
         FROM (SELECT date_trunc('month', t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS m
                 FROM generate_series(to_timestamp($1 / 1000.0), now(), interval '1 month') AS t
                UNION SELECT date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') months`,
      [startMs],
    )).rows[0]!.n;
    const periodTables = (await db.query<{ t: string[] }>(`SELECT run_partitioned_tables() AS t`)).rows[0]!.t;
    log(`${made} monthly periods made for the fill's span (a partition of each of ${periodTables.join(', ')})`);
    const first = Math.max(1, Math.round(S.runs * 0.05));
    const fillT0 = nowMs();
    await fill(db, 0, first, combos, stmts, startMs);
    // what autovacuum would have done by then in a database that grew over months (statistics,
    // visibility map): the measurements are not of its catch-up after a bulk load
    await db.query('VACUUM (ANALYZE)');
    log(`measuring at the start (${first} runs filled) …`);
    const start = await measure(ours, db, combos[0]!);
    await fill(db, first, S.runs, combos, stmts, startMs);
    const fillS = round((nowMs() - fillT0) / 1000, 1);
    await db.query('VACUUM (ANALYZE)');
    const filled = (await db.query<{ runs: number; events: number }>(`SELECT (SELECT count(*)::int FROM runs) AS runs, (SELECT count(*)::int FROM run_events) AS events`)).rows[0]!;
    log(`filled: ${filled.runs} runs, ${filled.events} events (${fillS} s of fill)`);
    // every filled run's id a UUIDv7 of its created_at (version 7, variant 10, the first 48 bits its unix ms)
    const badIds = (await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM runs
        WHERE created_at < now() - interval '1 day'
          AND (substr(id::text, 15, 1) <> '7' OR substr(id::text, 20, 1) NOT IN ('8', '9', 'a', 'b')
               OR ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint <> floor(extract(epoch from created_at) * 1000)::bigint)`,
    )).rows[0]!.n;
    if (badIds > 0) throw new Error(`${badIds} filled runs have an id that is not the UUIDv7 of their created_at`);
    log('every filled run id is the UUIDv7 of its created_at');
    log('measuring at the end …');
    const end = await measure(ours, db, combos[0]!);

    const ops = ['append', 'getTask', 'listTasks', 'resume'] as const;
    const verdicts = ops.map((op) => {
      const ok = end[op].p50Ms <= 1.5 * start[op].p50Ms && end[op].p99Ms <= 1.5 * start[op].p99Ms;
      return { op, start: start[op], end: end[op], ratioP50: round(end[op].p50Ms / start[op].p50Ms, 2), ratioP99: round(end[op].p99Ms / start[op].p99Ms, 2), verdict: ok ? 'PASS' : 'MISS' };
    });
    log(`load average at the end of the start phase ${start.loadAverage.join(' ')}, of the end phase ${end.loadAverage.join(' ')} (${cpus().length} CPUs): compare only on a quiet machine`);
    process.stdout.write(`\n${formatTable(
      ['operation', 'start p50 ms', 'start p99 ms', 'end p50 ms', 'end p99 ms', 'end/start p50', 'end/start p99', 'end within 1.5× of start'],
      verdicts.map((v) => [v.op, String(v.start.p50Ms), String(v.start.p99Ms), String(v.end.p50Ms), String(v.end.p99Ms), String(v.ratioP50), String(v.ratioP99), v.verdict]),
    )}\n\n`);
    const sizesFilled = await sizes(db);
    printSizes('sizes after the fill', sizesFilled);

    // retention over the oldest part: the real job code (compiled libs), passes until nothing is left
    const days = Math.floor(S.spanDays * (1 - S.expire));
    await db.query(`INSERT INTO retention_policies (org_id, agent_id, retention_days) SELECT id, NULL, $1 FROM organizations`, [days]);
    const expired = (await db.query<{ runs: number; events: number }>(
      `SELECT count(*)::int AS runs, coalesce(sum(last_sequence), 0)::int AS events FROM runs WHERE status IN ${TERMINAL} AND status_at < now() - make_interval(days => $1)`,
      [days],
    )).rows[0]!;
    log(`retention: policy ${days} days → ${expired.runs} expired runs, ${expired.events} events`);
    const { NestFactory } = await import('@nestjs/core');
    const { ConfigModule } = await import('#libs/config');
    const { DbModule } = await import('#libs/db');
    const { RunRetentionModule, RunRetention } = await import('#libs/runs');
    class GrowthRetentionModule {}
    app = await NestFactory.createApplicationContext(
      {
        module: GrowthRetentionModule,
        imports: [ConfigModule.forRoot({ DATABASE_URL: databaseUrl, REDIS_URL: process.env.BENCH_REDIS_URL ?? redis!.url, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RETENTION_BATCH_SIZE: String(S.retentionBatch), DATABASE_STATEMENT_TIMEOUT_MS: '600000' }), DbModule, RunRetentionModule],
      },
      { logger: false },
    );
    const retention = app.get(RunRetention);
    const rt0 = nowMs();
    let removed = 0;
    let passes = 0;
    let partitionsDropped = 0;
    for (;;) {
      const r = await retention.pass();
      passes += 1;
      removed += r.removed;
      partitionsDropped += r.partitionsDropped;
      if (r.removed === 0 || r.outcome !== 'done') break;
    }
    const retentionS = round((nowMs() - rt0) / 1000, 1);
    // its connections closed: their statistics (n_dead_tup) are flushed
    await app.close();
    app = undefined;
    await new Promise((r) => setTimeout(r, 1500));
    log(`retention: ${removed} runs removed in ${passes} passes (${partitionsDropped} whole periods dropped: each partition of run_events, messages, artifacts, push_deliveries), ${retentionS} s (${round(expired.events / Math.max(retentionS, 0.001), 0)} events/s)`);
    const sizesAfterRetention = await sizes(db);
    printSizes('sizes after retention (before VACUUM)', sizesAfterRetention);
    const v0 = nowMs();
    await db.query('VACUUM (ANALYZE)');
    const vacuumS = round((nowMs() - v0) / 1000, 1);
    const sizesAfterVacuum = await sizes(db);
    printSizes(`sizes after VACUUM (${vacuumS} s)`, sizesAfterVacuum);
    const pick = (l: TableSize[], t: string) => l.find((x) => x.table === t);
    for (const t of ['run_events', 'runs', 'messages', 'artifacts']) {
      log(`${t}: ${pick(sizesFilled, t)?.totalMb} MB filled → ${pick(sizesAfterRetention, t)?.totalMb} MB after retention → ${pick(sizesAfterVacuum, t)?.totalMb} MB after VACUUM; dead tuples ${pick(sizesAfterRetention, t)?.deadTuples} → ${pick(sizesAfterVacuum, t)?.deadTuples}`);
    }

    const result = {
      bench: 'growth',
      at: new Date().toISOString(),
      settings: { ...S, eventsPerRunActual: lastSequence },
      loadAverage: loadAverage(),
      filled: { ...filled, fillS, startRuns: first },
      operations: verdicts,
      phaseLoadAverage: { start: start.loadAverage, end: end.loadAverage },
      sizes: { filled: sizesFilled, afterRetention: sizesAfterRetention, afterVacuum: sizesAfterVacuum },
      retention: { policyDays: days, expiredRuns: expired.runs, expiredEvents: expired.events, removed, passes, partitionsDropped, seconds: retentionS, vacuumSeconds: vacuumS },
      seconds: round((Date.now() - started) / 1000, 1),
    };
    const out = process.env.BENCH_OUT ?? repoPath(`bench/results/growth-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    if (out) {
      mkdirSync(path.dirname(out), { recursive: true });
      writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
      log(`results: ${out}`);
    }
  } finally {
    await app?.close();
    await db.end();
    await ours.close();
    stopOwnServices();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`[growth] failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    stopOwnServices();
    process.exit(1);
  },
);
