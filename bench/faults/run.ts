/**
 * `npm run faults`: a fault suite with a history checker (Jepsen-style). Starts its own world
 * (PostgreSQL cluster, Redis, proxies, two APIs, two workers, a push receiver: world.ts), drives
 * A2A clients against it (clients.ts) while a seeded nemesis kills, restarts, stops, partitions
 * and delays everything (schedule.ts), heals, lets the system settle, then checks the history
 * against the database (checker.ts). Exits 1 on violations, 2 when the world cannot be set up.
 *
 * Environment: FAULTS_SEED (default 1), FAULTS_DURATION_S (default 300; 30 for a smoke run),
 * FAULTS_CLIENTS (default 4), FAULTS_QUIET_S (longest wait for the system to settle, default 90),
 * FAULTS_OUT (a file to write the history and the database snapshot to, as JSON), FAULTS_PG_STOPS
 * (e.g. `30,30`: the schedule is exactly these PostgreSQL stops, seconds each, spread over the
 * load — schedule.ts planPgStops — instead of the seeded nemesis).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { HttpBackend, UpstreamAgent } from './backends.js';
import { check, formatReport, type AgentModel } from './checker.js';
import { AGENTS, BACKEND_SCRIPT, FAULTS_RUNTIME, UPSTREAM_SCRIPT, Workload, type AgentSlug } from './clients.js';
import type { DbSnapshot, FaultRecord, History } from './history.js';
import { formatPlan, planFaults, planPgStops, prng, type PlannedFault } from './schedule.js';
import { AppProcess, PgCluster, PushReceiver, RedisServer, TcpProxy, cleanupNow, freePort, installSignalCleanup, onCleanup, tempDir } from './world.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const int = (v: string | undefined, d: number) => (v !== undefined && v !== '' && Number.isFinite(Number(v)) ? Math.trunc(Number(v)) : d);

const SEED = int(process.env.FAULTS_SEED, 1);
const DURATION_MS = int(process.env.FAULTS_DURATION_S, 300) * 1000;
const CLIENTS = int(process.env.FAULTS_CLIENTS, 4);
const QUIET_MS = int(process.env.FAULTS_QUIET_S, 90) * 1000;
/** FAULTS_PG_STOPS=`30,30`: seconds of each PostgreSQL stop (null: the seeded schedule). */
const PG_STOPS = process.env.FAULTS_PG_STOPS ? process.env.FAULTS_PG_STOPS.split(',').map((x) => Number(x.trim())) : null;
/** Executions of one agent at once (EXECUTION_MAX_PER_AGENT): low, so runs wait behind the cap (#42). */
const AGENT_CAP = 4;
/** The Standard Webhooks key the `http` agent's backend checks (a worker variable in the org's namespace). */
const BACKEND_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const BACKEND_SECRET_ENV = 'AAAS_RUNTIME_SECRET_FAULTS_BACKEND';

/** What each agent's runs must produce (checker output-is-script). */
const AGENT_MODELS: Record<AgentSlug, AgentModel> = {
  [AGENTS.scripted]: { runtime: 'scripted', config: FAULTS_RUNTIME },
  [AGENTS.http]: { runtime: 'http', steps: BACKEND_SCRIPT },
  [AGENTS.a2a]: { runtime: 'a2a', steps: UPSTREAM_SCRIPT },
};
/** RUN_STALE_AFTER_MS of the processes (the checker's lost-only-when-lost uses it). */
const STALE_AFTER_MS = 15_000;
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

/** Log times are relative to the start of the load (as the schedule's), before it to the start of the process. */
let t0 = Date.now();
const stamp = () => `+${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s`;
const log = (s: string) => process.stdout.write(`[faults] ${s}\n`);

interface World {
  pg: PgCluster;
  redis: RedisServer;
  pgProxy: TcpProxy;
  redisProxy: TcpProxy;
  apis: Record<string, AppProcess>;
  workers: Record<string, AppProcess>;
  receiver: PushReceiver;
  backend: HttpBackend;
  upstream: UpstreamAgent;
  db: pg.Pool;
  adminKey: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 180_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

async function startWorld(dir: string, loadStart: number): Promise<World> {
  const pgCluster = new PgCluster(dir, await freePort());
  await pgCluster.init();
  log(`PostgreSQL ${pgCluster.port} (${pgCluster.dataDir})`);
  const redis = new RedisServer(dir, await freePort());
  await redis.start();
  log(`Redis ${redis.port}`);
  const pgProxy = new TcpProxy('pg', pgCluster.port);
  const redisProxy = new TcpProxy('redis', redis.port);
  await pgProxy.start();
  await redisProxy.start();
  await run(process.execPath, ['scripts/migrate.mjs'], { DATABASE_URL: pgCluster.url });
  log('schema applied (scripts/migrate.mjs)');
  const receiver = new PushReceiver(loadStart);
  await receiver.start();
  const backend = new HttpBackend(BACKEND_SECRET, BACKEND_SCRIPT, () => Date.now() - t0);
  await backend.start();
  const upstream = new UpstreamAgent(UPSTREAM_SCRIPT, () => Date.now() - t0);
  await upstream.start();

  const adminKey = `aaas_${alnum(8)}_${alnum(32)}`;
  const viaProxy = new URL(pgCluster.url);
  viaProxy.port = String(pgProxy.port);
  const env: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    DATABASE_URL: viaProxy.toString(),
    REDIS_URL: `redis://127.0.0.1:${redisProxy.port}`,
    REDIS_PREFIX: `aaas-faults-${alnum(6)}`,
    BOOTSTRAP_ORG_SLUG: 'faults',
    BOOTSTRAP_ADMIN_KEY: adminKey,
    PAGE_TOKEN_SECRET: alnum(32),
    PUSH_ENCRYPTION_SECRET: 'faults-only-push-encryption-secret',
    PUSH_ALLOWED_CIDRS: '127.0.0.0/8',
    PUSH_SWEEP_INTERVAL_MS: '250',
    PUSH_RETRY_BASE_MS: '100',
    PUSH_RETRY_MAX_DELAY_MS: '2000',
    PUSH_TIMEOUT_MS: '3000',
    STREAM_POLL_INTERVAL_MS: '250',
    A2A_BLOCKING_TIMEOUT_MS: '5000',
    DATABASE_CONNECT_TIMEOUT_MS: '2000',
    DATABASE_STATEMENT_TIMEOUT_MS: '5000',
    EXECUTION_HEARTBEAT_MS: '1000',
    RUN_SWEEP_INTERVAL_MS: '500',
    RUN_STALE_AFTER_MS: String(STALE_AFTER_MS),
    OUTBOX_RELAY_INTERVAL_MS: '250',
    WORKER_SHUTDOWN_TIMEOUT_MS: '3000',
    WORKER_CONCURRENCY: '20',
    EXECUTION_MAX_PER_AGENT: String(AGENT_CAP),
    // the `http` backend and the upstream A2A agent live in this process, on loopback
    HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8',
    [BACKEND_SECRET_ENV]: BACKEND_SECRET,
    RATE_LIMIT_PER_KEY: '0',
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_AUTH_FAILURES_PER_IP: '0',
    OTEL_SDK_DISABLED: 'true',
  };
  const apis: Record<string, AppProcess> = {};
  for (const name of ['A', 'B']) {
    const port = await freePort();
    apis[name] = new AppProcess(`api-${name}`, 'dist/apps/api/src/main.js', { ...env, PORT: String(port) }, path.join(dir, `api-${name}.log`), `http://127.0.0.1:${port}`);
  }
  const workers: Record<string, AppProcess> = {};
  for (const name of ['W1', 'W2']) workers[name] = new AppProcess(`worker-${name}`, 'dist/apps/worker/src/main.js', env, path.join(dir, `worker-${name}.log`), null);
  // A first (it bootstraps the org and key), then the others
  await apis.A!.start();
  await Promise.all([apis.B!.start(), workers.W1!.start(), workers.W2!.start()]);
  log(`APIs ${Object.values(apis).map((a) => a.baseUrl).join(', ')}; workers W1, W2; push receiver ${receiver.port}; http backend ${backend.port}; upstream A2A agent ${upstream.port}`);
  const db = new pg.Pool({ connectionString: pgCluster.url, max: 2, connectionTimeoutMillis: 5000 });
  db.on('error', () => undefined);
  onCleanup(() => void db.end().catch(() => undefined));
  return { pg: pgCluster, redis, pgProxy, redisProxy, apis, workers, receiver, backend, upstream, db, adminKey };
}

/**
 * The runtime of each of the suite's agents: the scripted one; the `http` one on the suite's
 * backend (`retries: 0`: every second request for one execution is a duplicate, not a retry);
 * the `a2a` one in front of the suite's upstream agent.
 */
function runtimes(w: World): Record<AgentSlug, unknown> {
  return {
    [AGENTS.scripted]: FAULTS_RUNTIME,
    [AGENTS.http]: { kind: 'http', url: w.backend.url, secretEnv: BACKEND_SECRET_ENV, retries: 0, timeoutMs: 30_000 },
    [AGENTS.a2a]: { kind: 'a2a', cardUrl: w.upstream.cardUrl, timeoutMs: 60_000 },
  };
}

/** Create an agent through the admin API (agent → revision → publish → activate → A2A binding); its base path. */
async function publishAgent(w: World, slug: string, runtime: unknown): Promise<string> {
  const base = w.apis.A!.baseUrl!;
  const call = async (method: string, p: string, body?: unknown): Promise<any> => {
    const res = await fetch(base + p, { method, headers: { authorization: `Bearer ${w.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`admin ${method} ${p}: HTTP ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const org = await call('GET', '/v1/organization');
  const agent = await call('POST', '/v1/agents', { slug, name: slug, description: `The fault suite agent ${slug}` });
  const rev = await call('POST', `/v1/agents/${agent.id}/revisions`, {
    protocolProfiles: { a2a: { skillsProjection: [{ id: 'faults', name: 'Faults', description: 'Scripted work', tags: ['faults'] }], capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false } } },
    runtime,
  });
  await call('POST', `/v1/agents/${agent.id}/revisions/${rev.id}/publish`);
  await call('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: rev.id });
  await call('PUT', `/v1/agents/${agent.id}/bindings/a2a`, { transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'none' } });
  return `/a2a/${org.slug}/${agent.slug}`;
}

/** Start a process until it stays up (its dependencies may be down while it boots). */
async function bringUp(p: AppProcess, deadlineMs = 120_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      await p.start();
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await p.stop('SIGKILL');
      await sleep(1_000);
    }
  }
}

/** Run one planned fault to its end (the resource is healthy again when it resolves). */
async function inject(w: World, f: PlannedFault): Promise<string> {
  const proc = f.kind.endsWith('-api') ? w.apis[f.target]! : f.kind.endsWith('-worker') ? w.workers[f.target]! : null;
  switch (f.kind) {
    case 'kill-api':
    case 'kill-worker': {
      await proc!.stop('SIGKILL');
      await sleep(f.durationMs);
      await bringUp(proc!);
      return `pid restarted (start #${proc!.starts})`;
    }
    case 'term-api':
    case 'term-worker': {
      const r = await proc!.stop('SIGTERM', 25_000);
      await sleep(f.durationMs);
      await bringUp(proc!);
      return `exited in ${r.exitedInMs} ms (code ${r.code}, signal ${r.signal})`;
    }
    case 'pg-restart':
      await w.pg.restart();
      return 'pg_ctl restart -m fast';
    case 'pg-stop':
      await w.pg.stop();
      await sleep(f.durationMs);
      await w.pg.start();
      return 'pg_ctl stop -m fast; start';
    case 'redis-restart':
      await w.redis.stopWith('SIGTERM');
      await w.redis.start();
      return 'SIGTERM (AOF kept), start';
    case 'redis-stop':
      await w.redis.stopWith('SIGKILL');
      await sleep(f.durationMs);
      await w.redis.start();
      return 'SIGKILL, start';
    case 'pg-partition':
    case 'redis-partition':
    case 'pg-delay':
    case 'redis-delay': {
      const proxy = f.kind.startsWith('pg') ? w.pgProxy : w.redisProxy;
      proxy.mode = f.kind.endsWith('delay') ? 'delay' : 'partition';
      await sleep(f.durationMs);
      proxy.heal();
      return f.kind.endsWith('delay') ? `${proxy.delayMs} ms per chunk` : 'stalled, then cut';
    }
    case 'push-flaky':
      w.receiver.flaky = true;
      await sleep(f.durationMs);
      w.receiver.flaky = false;
      return '500 / 503 Retry-After';
  }
}

/** Everything back to normal, whatever a fault left behind. */
async function heal(w: World): Promise<void> {
  w.pgProxy.heal();
  w.redisProxy.heal();
  w.receiver.flaky = false;
  if (!(await w.pg.running())) await w.pg.start();
  if (!w.redis.running) await w.redis.start();
  for (const p of [...Object.values(w.apis), ...Object.values(w.workers)]) if (!p.running) await bringUp(p);
}

async function snapshot(db: pg.Pool): Promise<DbSnapshot> {
  const runs = await db.query(
    `SELECT id, agent_id AS "agentId", status::text AS status, blocked_reason AS "blockedReason", last_sequence AS "lastSequence",
            origin_message_id AS "originMessageId", created_by AS "createdBy", COALESCE(lease_expires_at < now(), false) AS "leaseExpired" FROM runs`,
  );
  const events = await db.query(`SELECT run_id AS "runId", sequence, type, payload, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt" FROM run_events`);
  const messages = await db.query(`SELECT run_id AS "runId", message_id AS "messageId", role, sequence FROM messages`);
  const outbox = await db.query(`SELECT run_id AS "runId", trigger_sequence AS "triggerSequence" FROM run_dispatches`);
  const push = await db.query(
    `SELECT run_id AS "runId", config_id AS "configId", url, status, cursor, deleted_at AS "deletedAt", COALESCE(lease_until < now(), false) AS "leaseExpired",
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt" FROM push_configs`,
  );
  const agents = await db.query(`SELECT id, slug FROM agents`);
  return {
    runs: runs.rows,
    events: events.rows,
    messages: messages.rows,
    outbox: outbox.rows,
    pushConfigs: push.rows.map((r) => ({
      runId: r.runId,
      configId: r.configId,
      path: new URL(r.url).pathname,
      status: r.status,
      cursor: r.cursor,
      deletedAt: r.deletedAt ? String(r.deletedAt) : null,
      leaseExpired: r.leaseExpired,
      createdAt: r.createdAt,
    })),
    agents: agents.rows,
  };
}

/** Not settled yet: active unblocked runs, outbox rows, push configs still delivering a finished run. */
async function unsettled(db: pg.Pool): Promise<{ active: number; outbox: number; push: number }> {
  const r = await db.query(`SELECT
      (SELECT count(*)::int FROM runs WHERE status IN ('submitted', 'working') AND blocked_reason IS NULL) AS active,
      (SELECT count(*)::int FROM run_dispatches) AS outbox,
      (SELECT count(*)::int FROM push_configs p JOIN runs r ON r.id = p.run_id
        WHERE p.status = 'active' AND p.deleted_at IS NULL AND r.status IN ('completed', 'failed', 'canceled', 'rejected')) AS push`);
  return r.rows[0];
}

async function main(): Promise<number> {
  if (!existsSync('dist/apps/api/src/main.js') || !existsSync('dist/apps/worker/src/main.js') || !existsSync('scripts/migrate.mjs')) {
    console.error('[faults] run from the repository root after a build (npm run faults builds first)');
    return 2;
  }
  installSignalCleanup();
  if (PG_STOPS && (PG_STOPS.length === 0 || PG_STOPS.some((x) => !(x > 0)))) {
    console.error(`[faults] FAULTS_PG_STOPS must be seconds separated by commas, e.g. 30,30 (got ${process.env.FAULTS_PG_STOPS})`);
    return 2;
  }
  const plan = PG_STOPS ? planPgStops(PG_STOPS, DURATION_MS) : planFaults(SEED, DURATION_MS);
  // FAULTS_PG_STOPS: a stop that does not fit the load stretches it (every stop asked for happens)
  const durationMs = PG_STOPS ? Math.max(DURATION_MS, ...plan.map((f) => f.at + f.durationMs + 5_000)) : DURATION_MS;
  log(`seed ${SEED}, duration ${durationMs / 1000} s, ${CLIENTS} clients; ${PG_STOPS ? `FAULTS_PG_STOPS=${PG_STOPS.join(',')}: ` : ''}schedule (${plan.length} faults):\n${formatPlan(plan)}`);
  const dir = tempDir();
  const w = await startWorld(dir, Date.now());
  const agents = {} as Record<AgentSlug, string>;
  for (const [slug, runtime] of Object.entries(runtimes(w)) as Array<[AgentSlug, unknown]>) agents[slug] = await publishAgent(w, slug, runtime);
  const apis = Object.fromEntries(Object.entries(w.apis).map(([k, p]) => [k, p.baseUrl!]));
  const loadStart = Date.now();
  t0 = loadStart;
  const workload = new Workload({ apis, agents, pushUrl: (p) => w.receiver.url(p), t0: loadStart });
  await workload.init();
  log(`agents ${Object.values(agents).join(', ')} published; load starts`);

  // ---------------------------------------------------------------- load + nemesis
  const faults: FaultRecord[] = [];
  const running: Array<Promise<void>> = [];
  const timers = plan.map((f) =>
    setTimeout(() => {
      const startedAt = Date.now() - loadStart;
      log(`${stamp()} fault  ${f.kind} ${f.target} (${(f.durationMs / 1000).toFixed(1)} s)`);
      running.push(
        inject(w, f).then(
          (note) => {
            faults.push({ kind: f.kind, target: f.target, startedAt, endedAt: Date.now() - loadStart, note });
            log(`${stamp()} healed ${f.kind} ${f.target}: ${note}`);
          },
          (e) => {
            faults.push({ kind: f.kind, target: f.target, startedAt, endedAt: Date.now() - loadStart, note: `error: ${(e as Error).message}` });
            log(`${stamp()} fault ${f.kind} ${f.target} failed: ${(e as Error).message}`);
          },
        ),
      );
    }, f.at),
  );
  const seeds = prng(SEED ^ 0x5eed);
  const clients = Array.from({ length: CLIENTS }, (_, i) => workload.loop(i, Math.floor(seeds() * 2 ** 31)));
  const progress = setInterval(() => log(`${stamp()} ${workload.operations.length + workload.streams.length} operations, ${faults.length} faults done`), 30_000);
  await sleep(durationMs);
  clearInterval(progress);
  for (const t of timers) clearTimeout(t);

  // ---------------------------------------------------------------- heal + quiet
  log(`${stamp()} load over: waiting for the faults in progress, then healing`);
  await Promise.all(running);
  await heal(w);
  workload.stopping = true;
  await Promise.race([Promise.all(clients), sleep(90_000)]);
  log(`${stamp()} healed; clients stopped; cancelling held tasks left running`);
  const held = await w.db.query<{ id: string }>(`SELECT id FROM runs WHERE origin_message_id = ANY($1) AND status IN ('submitted', 'working')`, [[...workload.holdMessageIds]]);
  const toCancel = new Set([...workload.pendingCancels, ...held.rows.map((r) => r.id)]);
  const random = prng(SEED);
  await Promise.all([...toCancel].map((id) => workload.cancelTask(-1, random, id, 30_000, true)));
  const quietStart = Date.now();
  let left = await unsettled(w.db);
  while ((left.active > 0 || left.outbox > 0 || left.push > 0) && Date.now() - quietStart < QUIET_MS) {
    await sleep(1_000);
    left = await unsettled(w.db);
  }
  log(`${stamp()} quiet period ${((Date.now() - quietStart) / 1000).toFixed(1)} s (left: ${left.active} active runs, ${left.outbox} outbox rows, ${left.push} push configs delivering)`);

  // ---------------------------------------------------------------- check
  const db = await snapshot(w.db);
  const history: History = {
    operations: workload.operations,
    streams: workload.streams,
    pushConfigs: workload.pushConfigs,
    pushReceipts: w.receiver.receipts,
    backendCalls: [...w.backend.calls, ...w.upstream.calls],
    faults,
  };
  if (process.env.FAULTS_OUT) writeFileSync(process.env.FAULTS_OUT, JSON.stringify({ seed: SEED, loadStartedAt: new Date(loadStart).toISOString(), plan, history, db }, null, 1));
  const result = check(history, db, { staleAfterMs: STALE_AFTER_MS, agents: AGENT_MODELS });
  const byKind = new Map<string, number>();
  for (const f of faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  console.log(`\n[faults] seed ${SEED}: operations by kind and outcome\n${workload.summary()}`);
  console.log(`[faults] faults by kind: ${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  const crashes = [...Object.values(w.apis), ...Object.values(w.workers)].map((p) => `${p.name} ${p.crashes}`).join(', ');
  console.log(`[faults] unplanned exits restarted by the supervisor: ${crashes}`);
  for (const p of [...Object.values(w.apis), ...Object.values(w.workers)]) for (const note of p.crashNotes) console.log(`  ${p.name}: ${note}`);
  const runsBy = new Map<string, number>();
  const slugs = new Map(db.agents?.map((a) => [a.id, a.slug]));
  for (const r of db.runs) runsBy.set(slugs.get(r.agentId) ?? '?', (runsBy.get(slugs.get(r.agentId) ?? '?') ?? 0) + 1);
  console.log(`[faults] database: ${db.runs.length} runs (${[...runsBy].map(([k, n]) => `${k} ${n}`).join(', ')}), ${db.events.length} events, ${db.pushConfigs.length} push configs, ${w.receiver.receipts.length} push requests received`);
  console.log(`[faults] backends: http ${w.backend.calls.length} requests (${w.backend.refused} refused for their signature), upstream A2A agent ${w.upstream.calls.length} tasks started`);
  if (result.violations.length > 0) {
    for (const p of [...Object.values(w.apis), ...Object.values(w.workers)]) console.log(`\n[faults] last lines of ${p.name} (${p.starts} starts):\n${p.tail(12).split('\n').filter((l) => l.trim() !== '').join('\n')}`);
  }
  console.log(`\n${formatReport(result, workload.operations.length + workload.streams.length, faults.length)}`);
  return result.violations.length > 0 ? 1 : 0;
}

main().then(
  async (code) => {
    cleanupNow();
    process.exit(code);
  },
  (e) => {
    console.error(`[faults] ${(e as Error).stack ?? e}`);
    cleanupNow();
    process.exit(2);
  },
);
