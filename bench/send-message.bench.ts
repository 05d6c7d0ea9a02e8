/**
 * SendMessage throughput / latency benchmark, every server in its own child process, measured in
 * one run with one load generator (this process):
 *
 * | target | what |
 * |---|---|
 * | `bare` | bare Fastify JSON route (the HTTP + JSON floor) |
 * | `fastify+pg` | bare Fastify + one prepared pg statement inserting a task row and an event row |
 * | `sdk-mem` | `@a2a-js/sdk` 1.3 `DefaultRequestHandler` + `InMemoryTaskStore`, echo executor |
 * | `sdk-pg` | `@a2a-js/sdk` 1.3 with its `DatabaseTaskStore` on PostgreSQL |
 * | `ours` | our API + one worker process (durable accept, outbox, BullMQ, worker executes) |
 * | `proxy` | ours with the `a2a` runtime in front of an in-memory SDK upstream (`sdk-mem`'s server) |
 * | `ours-grpc` (`grpc`) | ours, SendMessage over the gRPC binding (GRPC_PORT) instead of JSON-RPC |
 * | `sdk-grpc` (`sdkgrpc`) | `@a2a-js/sdk/server/grpc` + `InMemoryTaskStore`, echo executor |
 *
 * The gRPC targets are driven by `lib/grpc-load.ts` (unary calls, BENCH_CONNECTIONS in flight on
 * one HTTP/2 channel) instead of autocannon; their rows are compared with `sdk-grpc`.
 *
 * The A2A targets run in two modes: `returnImmediately: true` (durable accept) and blocking (the
 * answer is the completed task). Each target and mode runs BENCH_REPEAT times (`npm run bench`: 3);
 * every run prints req/s, p50/p99 and, per task, CPU ms of each process group (server, worker,
 * upstream, postgres, redis — /proc), SQL statements (pg_stat_statements) and Redis commands
 * (INFO commandstats). PostgreSQL and Redis are the bench's own (lib/own-services.ts), so both
 * are counted for the target alone; with BENCH_DATABASE_URL the given server is used instead
 * (SQL counted only if it preloads pg_stat_statements, postgres CPU machine-wide).
 * For our targets a run's figures cover the load AND the drain after it (until every accepted
 * run is terminal), divided by the runs that finished. The tables and the issue-19 goals
 * (PASS/MISS) use the medians. The `proxy` target also reports its latency at a fixed offered
 * load (BENCH_FIXED_RATE, default 200 req/s) beside the same upstream called directly.
 *
 *   npm run bench          (BENCH_DURATION_S, BENCH_WARMUP_S, BENCH_CONNECTIONS, BENCH_TARGETS,
 *                           BENCH_MODES=immediate,blocking, BENCH_REPEAT, BENCH_DRAIN_TIMEOUT_S,
 *                           BENCH_FIXED_RATE, BENCH_DATABASE_URL, BENCH_REDIS_URL, BENCH_OUT,
 *                           BENCH_PROFILE_DIR)
 *
 * Requests carry `A2A-Version: 1.0` (the SDK server treats a missing header as 0.3 and rejects it).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { startBareFastify } from './baselines/bare-fastify.js';
import { startSdkInMemory } from './baselines/sdk-in-memory.js';
import { startSdkGrpc } from './baselines/sdk-grpc.js';
import { runGrpcLoad } from './lib/grpc-load.js';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { startFastifyPg, startSdkPostgres } from './baselines/sdk-postgres.js';
import { CpuWindow, pidsByName, processTree } from './lib/proc-cpu.js';
import { BenchPostgres, BenchRedis, RedisCounter, SAMPLER_ROLE, SAMPLER_TAG, SqlCounter, stopOwnServices, withUser, type RedisCount, type SqlCount } from './lib/own-services.js';
import { repoPath } from './lib/child-server.js';
import { startOursProcesses } from './ours/ours.js';
import { printTable, runLoad, type JsonBody, type LoadOptions, type LoadResult } from './lib/load.js';
import { envNumber } from './lib/stats.js';

/** One thing to benchmark. `url` is the endpoint the SendMessage body is POSTed to. */
export interface BenchTarget {
  name: string;
  url: string;
  /** Pids of the server's own processes (CPU accounting). */
  pids: Record<string, number>;
  headers?: Record<string, string>;
  /** Set for a gRPC target: SendMessage is a unary gRPC call to `address` with this `tenant` (`url` is unused). */
  grpc?: { address: string; tenant: string };
  /**
   * Wait until the work a measured load left behind is done (every accepted run terminal), at
   * most `timeoutMs`; resolves with the runs left unfinished.
   */
  drain?(timeoutMs?: number): Promise<{ left: number; waitedMs: number }>;
  /** Runs in a terminal status now, and of them completed (our targets): a window's tasks are the completed delta. */
  terminalRuns?(): Promise<{ terminal: number; completed: number }>;
  /** The target's databases (PostgreSQL-backed targets; their statements are the ones counted). */
  databases?: string[];
  /** Set for a target in front of an upstream: the upstream's URL, for the fixed-rate comparison. */
  fixedRateDirectUrl?: string;
  close(): Promise<void>;
}

export const A2A_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json',
  'a2a-version': '1.0',
};

let rpcId = 0;
/** JSON-RPC v1.0 SendMessage with a fresh messageId; `blocking` waits for the completed task. */
export function sendMessageBody(blocking = false): JsonBody {
  rpcId += 1;
  return {
    jsonrpc: '2.0',
    id: rpcId,
    method: 'SendMessage',
    params: {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from bench' }] },
      ...(blocking ? {} : { configuration: { returnImmediately: true } }),
    },
  };
}

/** Cheap per-response check: a JSON-RPC success (has `result`, no `error` member). JSON-RPC errors are HTTP 200. */
export function isJsonRpcSuccess(body: string): boolean {
  return /"result"\s*:/.test(body) && !/"error"\s*:/.test(body);
}

/** Blocking answers must be the completed task (so errors or timeouts are never measured as success). */
export function isCompletedTask(body: string): boolean {
  return isJsonRpcSuccess(body) && body.includes('TASK_STATE_COMPLETED');
}

/** gRPC SendMessageRequest (the SDK's proto objects) with a fresh messageId. */
export function grpcSendMessage(tenant: string, blocking = false): unknown {
  return SendMessageRequest.fromJSON({
    tenant,
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from bench' }] },
    ...(blocking ? {} : { configuration: { returnImmediately: true } }),
  });
}

/** A gRPC SendMessageResponse that is a task (blocking: a completed one). */
function grpcVerifier(blocking: boolean): (res: unknown) => boolean {
  return (res) => {
    const payload = (res as { payload?: { $case?: string; value?: { status?: { state?: number } } } } | undefined)?.payload;
    if (payload?.$case !== 'task') return false;
    return !blocking || payload.value?.status?.state === TaskState.TASK_STATE_COMPLETED;
  };
}

async function smokeCheck(target: BenchTarget, blocking: boolean): Promise<void> {
  if (target.grpc) {
    const r = await runGrpcLoad({ name: 'smoke', address: target.grpc.address, requestFactory: () => grpcSendMessage(target.grpc!.tenant, blocking), verify: grpcVerifier(blocking), metadata: { 'a2a-version': '1.0' }, concurrency: 1, durationSeconds: 30, maxCalls: 1 });
    if (r.requests < 1 || r.mismatches > 0 || r.errors > 0 || r.non2xx > 0) throw new Error(`${target.name}: smoke SendMessage over gRPC failed: ${JSON.stringify(r.statusCodes)}, ${r.mismatches} bad answers`);
    console.log(`[${target.name}${blocking ? ' blocking' : ''}] smoke OK (gRPC ${target.grpc.address}, tenant '${target.grpc.tenant}')`);
    return;
  }
  const res = await fetch(target.url, { method: 'POST', headers: { ...A2A_HEADERS, ...target.headers }, body: JSON.stringify(sendMessageBody(blocking)) });
  const text = await res.text();
  const ok = (blocking ? isCompletedTask : isJsonRpcSuccess)(text);
  if (!res.ok || !ok) throw new Error(`${target.name}: smoke SendMessage failed (HTTP ${res.status}): ${text.slice(0, 500)}`);
  console.log(`[${target.name}${blocking ? ' blocking' : ''}] smoke OK, ${Buffer.byteLength(text)} B: ${text.slice(0, 120)}…`);
}

/** Where the PostgreSQL-backed targets keep their data, and how statements and commands are counted. */
interface BenchWorld {
  /** Database URL for a target's database `name` (the bench's own cluster, or the shared server). */
  databaseUrl(name: string): string;
  /** The same database as the sampler role (own cluster) or as is (shared). */
  samplerUrl(name: string): string;
  /** Databases whose statements count (null: every one of the own cluster). */
  databasesOf(names: string[]): string[] | undefined;
  redisUrl: string | undefined;
  sql: SqlCounter | null;
  redis: RedisCounter | null;
  /** CPU groups of the shared services. */
  postgresPids(): number[];
  redisPids(): number[];
  /** One line saying where PostgreSQL and Redis are and how they are counted. */
  describe: string;
  close(): Promise<void>;
}

async function startWorld(needsPg: boolean): Promise<BenchWorld> {
  const givenDb = process.env.BENCH_DATABASE_URL;
  const givenRedis = process.env.BENCH_REDIS_URL;
  const ownPg = needsPg && !givenDb ? await BenchPostgres.start() : null;
  const ownRedis = givenRedis ? null : await BenchRedis.start();
  const redisUrl = givenRedis ?? ownRedis!.url;
  let sql: SqlCounter | null = null;
  if (ownPg) sql = await SqlCounter.open(withUser(ownPg.url('postgres'), SAMPLER_ROLE));
  else if (givenDb) sql = await SqlCounter.open(withUser(givenDb, new URL(givenDb).username || 'postgres', 'postgres')).catch(() => null);
  const redis = await RedisCounter.open(redisUrl);
  const sharedDb = (name: string) => {
    // with BENCH_DATABASE_URL: ours uses it as is; the baselines their own databases beside it
    if (name === 'aaas_bench') return givenDb!;
    const u = new URL(givenDb!);
    u.pathname = `/${new URL(givenDb!).pathname.slice(1)}_${name.replace(/^aaas_bench_/, '')}`;
    return u.toString();
  };
  return {
    databaseUrl: (name) => (ownPg ? ownPg.url(name) : givenDb ? sharedDb(name) : `postgresql://postgres@127.0.0.1:5432/${name}`),
    samplerUrl: (name) => (ownPg ? withUser(ownPg.url(name), SAMPLER_ROLE) : givenDb ? sharedDb(name) : `postgresql://postgres@127.0.0.1:5432/${name}`),
    databasesOf: (names) => (ownPg ? undefined : names.map((n) => new URL(sharedDb(n)).pathname.slice(1))),
    redisUrl,
    sql: sql?.available ? sql : null,
    redis,
    postgresPids: () => (ownPg ? processTree(ownPg.pid) : pidsByName('postgres')),
    redisPids: () => (ownRedis ? [ownRedis.pid] : pidsByName('redis-server')),
    describe:
      (ownPg
        ? `PostgreSQL: the bench's own cluster on 127.0.0.1:${ownPg.port} (fsync on, pg_stat_statements; CPU of its process tree)`
        : `PostgreSQL: ${givenDb ?? 'shared 127.0.0.1:5432'} (${sql?.available ? 'pg_stat_statements' : 'no pg_stat_statements: SQL n/a'}; CPU of every postgres process on the machine)`) +
      `; Redis: ${ownRedis ? `the bench's own redis-server on ${ownRedis.port} (no persistence)` : `${givenRedis} (commands and CPU machine-wide)`}`,
    async close() {
      await sql?.close().catch(() => undefined);
      await redis.close();
      stopOwnServices();
    },
  };
}

interface Starter {
  key: 'bare' | 'lean' | 'sdk' | 'sdkpg' | 'ours' | 'proxy' | 'grpc' | 'sdkgrpc';
  /** Modes this target supports (bare servers only answer a submitted task). */
  modes: Array<'immediate' | 'blocking'>;
  /** Uses PostgreSQL (the bench starts its own cluster when one of these is wanted). */
  pg?: boolean;
  start(world: BenchWorld): Promise<BenchTarget>;
}

const oursOptions = (world: BenchWorld) => ({ databaseUrl: world.databaseUrl('aaas_bench'), samplerDatabaseUrl: world.samplerUrl('aaas_bench'), redisUrl: world.redisUrl });

const STARTERS: Starter[] = [
  {
    key: 'bare',
    modes: ['immediate'],
    start: async () => {
      const s = await startBareFastify();
      return { name: 'bare', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'lean',
    modes: ['immediate'],
    pg: true,
    start: async (world) => {
      const s = await startFastifyPg(world.databaseUrl('aaas_bench_lean'));
      return { name: 'fastify+pg', url: s.url, pids: { server: s.pid ?? 0 }, databases: ['aaas_bench_lean'], close: s.close };
    },
  },
  {
    key: 'sdk',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const s = await startSdkInMemory();
      return { name: 'sdk-mem', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'sdkpg',
    modes: ['immediate', 'blocking'],
    pg: true,
    start: async (world) => {
      const s = await startSdkPostgres(world.databaseUrl('aaas_bench_sdk'));
      return { name: 'sdk-pg', url: s.url, pids: { server: s.pid ?? 0 }, databases: ['aaas_bench_sdk'], close: s.close };
    },
  },
  {
    key: 'ours',
    modes: ['immediate', 'blocking'],
    pg: true,
    start: async (world) => {
      const o = await startOursProcesses(oursOptions(world));
      return { name: 'ours', url: o.url, pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0 }, databases: ['aaas_bench'], drain: (t) => o.drain(t), terminalRuns: () => o.terminalRuns(), close: o.close };
    },
  },
  {
    key: 'sdkgrpc',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const s = await startSdkGrpc();
      return { name: 'sdk-grpc', url: '', grpc: { address: s.address, tenant: '' }, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    // our API with the gRPC binding on (GRPC_PORT=0: a free port, read back from the agent card)
    key: 'grpc',
    modes: ['immediate', 'blocking'],
    pg: true,
    start: async (world) => {
      const o = await startOursProcesses({ ...oursOptions(world), transports: ['JSONRPC', 'GRPC'], apiEnv: { GRPC_PORT: '0' } });
      const card = (await (await fetch(`${o.url}/.well-known/agent-card.json`)).json()) as { supportedInterfaces: Array<{ url: string; protocolBinding: string; tenant?: string }> };
      const iface = card.supportedInterfaces.find((i) => i.protocolBinding === 'GRPC');
      if (!iface) {
        await o.close();
        throw new Error('ours-grpc: the agent card lists no GRPC interface');
      }
      return { name: 'ours-grpc', url: '', grpc: { address: iface.url, tenant: iface.tenant ?? '' }, pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0 }, databases: ['aaas_bench'], drain: (t) => o.drain(t), terminalRuns: () => o.terminalRuns(), close: o.close };
    },
  },
  {
    // the price of durability: the same in-memory SDK agent, called through us (a2a runtime)
    key: 'proxy',
    modes: ['immediate', 'blocking'],
    pg: true,
    start: async (world) => {
      const upstream = await startSdkInMemory();
      const o = await startOursProcesses({ ...oursOptions(world), runtime: { kind: 'a2a', cardUrl: upstream.cardUrl }, env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8' } });
      return {
        name: 'proxy',
        url: o.url,
        pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0, upstream: upstream.pid ?? 0 },
        databases: ['aaas_bench'],
        fixedRateDirectUrl: upstream.url,
        drain: (t) => o.drain(t),
        terminalRuns: () => o.terminalRuns(),
        close: async () => {
          await o.close();
          await upstream.close();
        },
      };
    },
  },
];

/** Latency at a fixed offered load (autocannon `overallRate`), through the target and straight to its upstream. */
export interface FixedRateLatency {
  /** Offered requests per second. */
  rate: number;
  through: { rps: number; p50Ms: number; p99Ms: number; bad: number };
  direct: { rps: number; p50Ms: number; p99Ms: number; bad: number };
  /** through − direct, ms. */
  addedP50Ms: number;
  addedP99Ms: number;
}

/** One measured run of one target and mode. */
export interface Measured extends LoadResult {
  /** 1-based repeat index (0 for a median row). */
  repeat: number;
  /**
   * Tasks the figures are divided by: for our targets the runs that completed between the
   * window's start and the end of the drain after it; for the others the answered requests.
   */
  tasks: number;
  /** Our targets: runs that ended failed / canceled / rejected in the same span (0 for the others). */
  notCompleted: number;
  /** Runs still not terminal when the drain gave up (0: every accepted run finished). */
  leftOver: number;
  /** Milliseconds from the end of the load until every accepted run was terminal. */
  drainMs: number;
  /** Tasks per second over load + drain (the rate the whole system finishes them at). */
  completedPerS: number;
  /** CPU ms per task by process group (server, worker, postgres, redis, upstream), load + drain. */
  cpuMsPerTask: Record<string, number>;
  /** Sum of cpuMsPerTask. */
  cpuMsPerTaskTotal: number;
  /** @deprecated name of earlier results: the same figures as cpuMsPerTask. */
  cpuMsPerRequest: Record<string, number>;
  /** SQL statements per task (pg_stat_statements; null: not countable). */
  sqlPerTask: number | null;
  /** Of sqlPerTask, transaction control and SET statements. */
  sqlUtilityPerTask: number | null;
  /** Redis commands per task (INFO commandstats; commands inside scripts included). */
  redisPerTask: number | null;
  /** Of redisPerTask, EVAL/EVALSHA/FCALL invocations. */
  redisScriptsPerTask: number | null;
  /** Totals over the window: statements (with the most called ones and those that took the most time) and commands per name; in a median, the last run's. */
  sql: SqlCount | null;
  redis: RedisCount | null;
  fixedRate?: FixedRateLatency;
}

const fmt = (n: number | null | undefined, digits = 2) => (n === undefined || n === null || !Number.isFinite(n) ? '–' : n.toFixed(digits));

function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/** Per-figure medians of repeated runs of one target and mode (errors, non2xx, bad bodies and leftovers summed). */
export function medianOf(runs: Measured[]): Measured {
  const first = runs[0]!;
  const m = (f: (r: Measured) => number | null | undefined) => {
    const xs = runs.map(f).filter((x): x is number => typeof x === 'number');
    return xs.length ? median(xs) : null;
  };
  const sum = (f: (r: Measured) => number) => runs.reduce((a, r) => a + f(r), 0);
  const groups = [...new Set(runs.flatMap((r) => Object.keys(r.cpuMsPerTask)))];
  const cpuMsPerTask = Object.fromEntries(groups.map((g) => [g, m((r) => r.cpuMsPerTask[g]) ?? 0]));
  const fr = runs.filter((r) => r.fixedRate).map((r) => r.fixedRate!);
  return {
    ...first,
    repeat: 0,
    requests: m((r) => r.requests)!,
    rps: m((r) => r.rps)!,
    p50Ms: m((r) => r.p50Ms)!,
    p90Ms: m((r) => r.p90Ms)!,
    p99Ms: m((r) => r.p99Ms)!,
    avgMs: m((r) => r.avgMs)!,
    maxMs: m((r) => r.maxMs)!,
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    non2xx: sum((r) => r.non2xx),
    mismatches: sum((r) => r.mismatches),
    tasks: m((r) => r.tasks)!,
    notCompleted: sum((r) => r.notCompleted),
    leftOver: sum((r) => r.leftOver),
    drainMs: m((r) => r.drainMs)!,
    completedPerS: m((r) => r.completedPerS)!,
    cpuMsPerTask,
    cpuMsPerRequest: cpuMsPerTask,
    cpuMsPerTaskTotal: m((r) => r.cpuMsPerTaskTotal)!,
    sqlPerTask: m((r) => r.sqlPerTask),
    sqlUtilityPerTask: m((r) => r.sqlUtilityPerTask),
    redisPerTask: m((r) => r.redisPerTask),
    redisScriptsPerTask: m((r) => r.redisScriptsPerTask),
    // the statement lists are not averaged: the last run's, as a profile
    sql: runs.at(-1)?.sql ?? null,
    redis: runs.at(-1)?.redis ?? null,
    ...(fr.length
      ? {
          fixedRate: {
            rate: fr[0]!.rate,
            through: { rps: median(fr.map((f) => f.through.rps)), p50Ms: median(fr.map((f) => f.through.p50Ms)), p99Ms: median(fr.map((f) => f.through.p99Ms)), bad: fr.reduce((a, f) => a + f.through.bad, 0) },
            direct: { rps: median(fr.map((f) => f.direct.rps)), p50Ms: median(fr.map((f) => f.direct.p50Ms)), p99Ms: median(fr.map((f) => f.direct.p99Ms)), bad: fr.reduce((a, f) => a + f.direct.bad, 0) },
            addedP50Ms: median(fr.map((f) => f.addedP50Ms)),
            addedP99Ms: median(fr.map((f) => f.addedP99Ms)),
          },
        }
      : {}),
  };
}

/** One goal of issue 19, evaluated on the medians. */
export interface GoalCheck {
  goal: string;
  figure: number | null;
  want: string;
  pass: boolean | null;
}

function evaluateGoals(by: (name: string) => Measured | undefined): GoalCheck[] {
  const out: GoalCheck[] = [];
  const ratio = (goal: string, a: string, b: string, min: number) => {
    const ra = by(a);
    const rb = by(b);
    if (!ra || !rb) return;
    const f = ra.rps / rb.rps;
    out.push({ goal, figure: f, want: `>= ${min.toFixed(1)}x`, pass: f >= min });
  };
  const atMost = (goal: string, name: string, pick: (r: Measured) => number | null, max: number, unit: string) => {
    const r = by(name);
    if (!r) return;
    const f = pick(r);
    out.push({ goal, figure: f, want: `<= ${max} ${unit}`, pass: f === null ? null : f <= max });
  };
  ratio('returnImmediately req/s vs sdk-mem', 'ours', 'sdk-mem', 1.0);
  ratio('blocking req/s vs sdk-mem blocking', 'ours blocking', 'sdk-mem blocking', 0.5);
  atMost('CPU per accepted echo task, all-in', 'ours', (r) => r.cpuMsPerTaskTotal, 0.8, 'ms');
  atMost('CPU per blocking task, all-in', 'ours blocking', (r) => r.cpuMsPerTaskTotal, 1.2, 'ms');
  atMost('SQL statements per task (immediate)', 'ours', (r) => r.sqlPerTask, 4, 'stmts');
  atMost('SQL statements per task (blocking)', 'ours blocking', (r) => r.sqlPerTask, 4, 'stmts');
  atMost('Redis commands per task (immediate)', 'ours', (r) => r.redisPerTask, 3, 'cmds');
  atMost('Redis commands per task (blocking)', 'ours blocking', (r) => r.redisPerTask, 3, 'cmds');
  return out;
}

export async function main(): Promise<Measured[]> {
  const durationSeconds = envNumber('BENCH_DURATION_S', 10);
  const warmupSeconds = envNumber('BENCH_WARMUP_S', 2);
  const connections = envNumber('BENCH_CONNECTIONS', 32);
  const repeat = Math.max(1, Math.floor(envNumber('BENCH_REPEAT', 1)));
  const drainTimeoutMs = envNumber('BENCH_DRAIN_TIMEOUT_S', 300) * 1000;
  const fixedRate = envNumber('BENCH_FIXED_RATE', 200);
  const list = (v: string | undefined, d: string) => new Set((v ?? d).split(',').map((x) => x.trim()).filter(Boolean));
  const wanted = list(process.env.BENCH_TARGETS, 'bare,lean,sdk,sdkpg,ours,proxy,grpc,sdkgrpc');
  const modes = list(process.env.BENCH_MODES, 'immediate,blocking');

  const world = await startWorld(STARTERS.some((s) => s.pg && wanted.has(s.key)));
  console.log(
    `SendMessage bench: ${durationSeconds}s measured (+${warmupSeconds}s warm-up) per target and mode, x${repeat}, ` +
      `${connections} connections, node ${process.version}, ${cpus().length} CPUs, targets=${[...wanted].join(',')}, modes=${[...modes].join(',')}\n${world.describe}`,
  );

  const runs: Measured[] = [];
  const medians: Measured[] = [];
  try {
    for (const starter of STARTERS) {
      if (!wanted.has(starter.key)) continue;
      const target = await starter.start(world);
      try {
        for (const mode of starter.modes) {
          if (!modes.has(mode)) continue;
          const blocking = mode === 'blocking';
          const name = blocking ? `${target.name} blocking` : target.name;
          await smokeCheck(target, blocking);
          const load = {
            name,
            url: target.url,
            method: 'POST' as const,
            headers: { ...A2A_HEADERS, ...target.headers },
            bodyFactory: () => sendMessageBody(blocking),
            verifyBody: blocking ? isCompletedTask : isJsonRpcSuccess,
            connections,
          };
          const runOnce = (seconds: number) =>
            target.grpc
              ? runGrpcLoad({ name, address: target.grpc.address, requestFactory: () => grpcSendMessage(target.grpc!.tenant, blocking), verify: grpcVerifier(blocking), metadata: { 'a2a-version': '1.0' }, concurrency: connections, durationSeconds: seconds })
              : runLoad({ ...load, durationSeconds: seconds });
          if (warmupSeconds > 0) {
            await runOnce(warmupSeconds);
            await target.drain?.(drainTimeoutMs);
            await analyze(world, target);
          }
          const mine: Measured[] = [];
          for (let i = 1; i <= repeat; i++) {
            const m = await measureOnce(world, target, name, () => runOnce(durationSeconds), drainTimeoutMs, i);
            if (target.fixedRateDirectUrl) m.fixedRate = await measureFixedRate(target, load, fixedRate, durationSeconds, drainTimeoutMs);
            printRun(m);
            mine.push(m);
            runs.push(m);
          }
          const med = medianOf(mine);
          if (repeat > 1) console.log(`[${name}] median of ${repeat}: ${med.rps} rps, p50 ${fmt(med.p50Ms)} ms, p99 ${fmt(med.p99Ms)} ms, CPU ${fmt(med.cpuMsPerTaskTotal, 3)} ms/task, SQL ${fmt(med.sqlPerTask)}/task, Redis ${fmt(med.redisPerTask)}/task`);
          medians.push(med);
        }
      } finally {
        await target.close();
      }
    }
  } finally {
    await world.close();
  }

  printReport(medians, repeat);
  console.log(world.describe);

  const by = (n: string) => medians.find((r) => r.name === n);
  const goals = evaluateGoals(by);
  console.log(`\nTargets (issue 19; medians of ${repeat} run${repeat > 1 ? 's' : ''}):`);
  for (const g of goals) {
    const figure = g.figure === null ? 'n/a' : g.want.endsWith('x') ? `${g.figure.toFixed(2)}x` : g.figure.toFixed(2);
    console.log(`  ${g.goal.padEnd(40)} ${figure.padStart(7)}  (goal ${g.want}): ${g.pass === null ? 'n/a' : g.pass ? 'PASS' : 'MISS'}`);
  }
  console.log('\nOther ratios (req/s):');
  for (const [a, b] of [['ours blocking', 'sdk-pg blocking'], ['ours', 'sdk-pg'], ['ours', 'fastify+pg'], ['ours', 'bare'], ['proxy', 'sdk-mem'], ['proxy blocking', 'sdk-mem blocking'], ['ours-grpc', 'sdk-grpc'], ['ours-grpc blocking', 'sdk-grpc blocking'], ['ours-grpc', 'ours'], ['ours-grpc blocking', 'ours blocking']] as const) {
    const ra = by(a);
    const rb = by(b);
    if (ra && rb) console.log(`  ${`${a} / ${b}`.padEnd(38)} ${(ra.rps / rb.rps).toFixed(2)}x`);
  }

  const out = process.env.BENCH_OUT ?? repoPath(`bench/results/send-message-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  if (out) {
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, cpus: cpus().length, durationSeconds, warmupSeconds, connections, repeat, world: world.describe, goals, results: medians, runs }, null, 2));
    console.log(`\nresults written to ${out}`);
  }
  return runs;
}

/**
 * One measured window: statements, commands and CPU are zeroed/snapshotted, the load runs, then
 * (our targets) the bench waits until every accepted run is terminal before reading them, and
 * divides by the tasks that finished.
 */
/**
 * ANALYZE the target's databases after its warm-up: the measured windows then run on planner
 * statistics as a service that has been up a while has them (autovacuum analyzes a new table
 * after 60 s at the earliest). Without them, statements prepared while the tables were nearly
 * empty keep generic plans that scan whole tables: a blocking task's final view cost grew with
 * the runs table (4.5 ms per call after the returnImmediately phase instead of about 0.1 ms).
 */
async function analyze(world: BenchWorld, target: BenchTarget): Promise<void> {
  for (const db of target.databases ?? []) {
    const client = new pg.Client({ connectionString: world.databaseUrl(db) });
    await client.connect();
    try {
      await client.query(`/* ${SAMPLER_TAG} */ ANALYZE`);
    } finally {
      await client.end();
    }
  }
}

async function measureOnce(world: BenchWorld, target: BenchTarget, name: string, load: () => Promise<LoadResult>, drainTimeoutMs: number, repeat: number): Promise<Measured> {
  const cpu = new CpuWindow({
    ...Object.fromEntries(Object.entries(target.pids).map(([k, pid]) => [k, () => (pid ? [pid] : [])])),
    postgres: () => world.postgresPids(),
    redis: () => world.redisPids(),
  });
  const before = (await target.terminalRuns?.()) ?? { terminal: 0, completed: 0 };
  await world.sql?.reset();
  await world.redis?.mark();
  const t0 = Date.now();
  cpu.start();
  const result = await load();
  const t1 = Date.now();
  const drained = (await target.drain?.(drainTimeoutMs)) ?? { left: 0, waitedMs: 0 };
  const used = cpu.stop();
  const t2 = Date.now();
  const sql = world.sql ? await world.sql.read(target.databases ? world.databasesOf(target.databases) : undefined) : null;
  const redis = world.redis ? await world.redis.read() : null;
  const after = target.terminalRuns ? await target.terminalRuns() : null;
  const tasks = after ? after.completed - before.completed : result.requests - result.non2xx - result.mismatches;
  const notCompleted = after ? after.terminal - before.terminal - tasks : 0;
  const per = (n: number) => (tasks > 0 ? n / tasks : Number.NaN);
  const cpuMsPerTask = Object.fromEntries(Object.entries(used).map(([k, ms]) => [k, per(ms)]));
  const pgBacked = target.databases !== undefined;
  return {
    ...result,
    repeat,
    tasks,
    notCompleted,
    leftOver: drained.left,
    drainMs: target.drain ? t2 - t1 : 0,
    completedPerS: tasks / ((t2 - t0) / 1000),
    cpuMsPerTask,
    cpuMsPerRequest: cpuMsPerTask,
    cpuMsPerTaskTotal: Object.values(cpuMsPerTask).reduce((a, b) => a + b, 0),
    sqlPerTask: sql ? per(sql.calls) : pgBacked ? null : 0,
    sqlUtilityPerTask: sql ? per(sql.utilityCalls) : pgBacked ? null : 0,
    redisPerTask: redis ? per(redis.calls) : null,
    redisScriptsPerTask: redis ? per(redis.scriptCalls) : null,
    sql,
    redis,
  };
}

/** Fixed offered load through the target, then straight to its upstream, each for `seconds`. */
async function measureFixedRate(target: BenchTarget, load: LoadOptions, rate: number, seconds: number, drainTimeoutMs: number): Promise<FixedRateLatency> {
  const pick = (r: LoadResult) => ({ rps: r.rps, p50Ms: r.p50Ms, p99Ms: r.p99Ms, bad: r.errors + r.non2xx + r.mismatches });
  const through = pick(await runLoad({ ...load, name: `${load.name} @${rate}/s`, overallRate: rate, durationSeconds: seconds }));
  await target.drain?.(drainTimeoutMs);
  const direct = pick(await runLoad({ ...load, name: `${load.name} direct @${rate}/s`, url: target.fixedRateDirectUrl!, overallRate: rate, durationSeconds: seconds }));
  return { rate, through, direct, addedP50Ms: through.p50Ms - direct.p50Ms, addedP99Ms: through.p99Ms - direct.p99Ms };
}

function printRun(m: Measured): void {
  const cpu = Object.fromEntries(Object.entries(m.cpuMsPerTask).map(([k, v]) => [k, Number(v.toFixed(3))]));
  const drain = m.drainMs
    ? `${m.notCompleted ? ` (+${m.notCompleted} runs ended NOT completed, e.g. failed)` : ''}, drained in ${(m.drainMs / 1000).toFixed(1)} s${m.leftOver ? ` (${m.leftOver} runs NOT finished: drain timed out)` : ''}, ${m.completedPerS.toFixed(0)} tasks/s end to end`
    : '';
  console.log(
    `[${m.name} #${m.repeat}] ${m.rps} rps, p50 ${m.p50Ms} ms, p99 ${m.p99Ms} ms, ${m.tasks} tasks${drain}; per task: CPU ms ${JSON.stringify(cpu)} = ${fmt(m.cpuMsPerTaskTotal, 3)}, ` +
      `SQL ${fmt(m.sqlPerTask)}, Redis ${fmt(m.redisPerTask)}` +
      (m.fixedRate ? `; @${m.fixedRate.rate}/s p50/p99 ${fmt(m.fixedRate.through.p50Ms)}/${fmt(m.fixedRate.through.p99Ms)} ms vs direct ${fmt(m.fixedRate.direct.p50Ms)}/${fmt(m.fixedRate.direct.p99Ms)} ms` : ''),
  );
}

function printReport(medians: Measured[], repeat: number): void {
  const of = repeat > 1 ? ` (medians of ${repeat} runs)` : '';
  console.log(`\nThroughput and latency${of}:`);
  printTable(medians, ['sdk-mem', 'sdk-pg', 'sdk-grpc'].filter((b) => medians.some((r) => r.name === b)));

  console.log(`\nPer task${of}: CPU ms by process group over load + drain, SQL statements, Redis commands`);
  console.log('(tasks: runs completed, for ours; answered requests, for the others. txn: of SQL, BEGIN/COMMIT/SET; scr: of Redis, script calls)');
  const groups = ['server', 'worker', 'upstream', 'postgres', 'redis'].filter((g) => medians.some((r) => r.cpuMsPerTask[g] !== undefined));
  const header = ['target'.padEnd(20), 'tasks'.padStart(7), ...groups.map((g) => g.padStart(9)), 'CPU all'.padStart(8), 'SQL'.padStart(6), '(txn)'.padStart(6), 'Redis'.padStart(6), '(scr)'.padStart(6), 'drain s'.padStart(8), 'failed'.padStart(7), 'left'.padStart(6)];
  console.log(header.join(' '));
  for (const r of medians) {
    console.log(
      [
        r.name.padEnd(20),
        String(Math.round(r.tasks)).padStart(7),
        ...groups.map((g) => fmt(r.cpuMsPerTask[g], 3).padStart(9)),
        fmt(r.cpuMsPerTaskTotal, 3).padStart(8),
        (r.sqlPerTask === null ? 'n/a' : fmt(r.sqlPerTask)).padStart(6),
        (r.sqlUtilityPerTask === null ? 'n/a' : fmt(r.sqlUtilityPerTask)).padStart(6),
        (r.redisPerTask === null ? 'n/a' : fmt(r.redisPerTask)).padStart(6),
        (r.redisScriptsPerTask === null ? 'n/a' : fmt(r.redisScriptsPerTask)).padStart(6),
        (r.drainMs ? (r.drainMs / 1000).toFixed(1) : '–').padStart(8),
        String(r.notCompleted).padStart(7),
        String(r.leftOver).padStart(6),
      ].join(' '),
    );
  }

  const profiled = medians.filter((r) => r.sql?.topByTime.length && r.tasks > 0);
  if (profiled.length) {
    console.log(`\nWhere PostgreSQL's time goes (pg_stat_statements of the last run, per task: execution ms, planning ms, calls, plans; the top 5 statements):`);
    for (const r of profiled) {
      console.log(`  ${r.name}`);
      for (const q of r.sql!.topByTime.slice(0, 5)) {
        console.log(
          `    ${fmt(q.execMs / r.tasks, 3).padStart(7)} ms  ${fmt((q.planMs ?? 0) / r.tasks, 3).padStart(7)} ms plan  ${fmt(q.calls / r.tasks).padStart(5)} calls  ${fmt((q.plans ?? 0) / r.tasks).padStart(5)} plans  ${q.query.slice(0, 100)}`,
        );
      }
    }
  }

  const fixed = medians.filter((r) => r.fixedRate);
  if (fixed.length) {
    console.log(`\nLatency at a fixed offered load${of} (autocannon overallRate), through us vs straight to the upstream:`);
    for (const r of fixed) {
      const f = r.fixedRate!;
      console.log(
        `  ${r.name.padEnd(16)} @${f.rate}/s (answered ${fmt(f.through.rps, 0)}/s): p50 ${fmt(f.through.p50Ms)} ms, p99 ${fmt(f.through.p99Ms)} ms; direct (${fmt(f.direct.rps, 0)}/s) ${fmt(f.direct.p50Ms)} / ${fmt(f.direct.p99Ms)} ms; adds ${fmt(f.addedP50Ms)} ms p50, ${fmt(f.addedP99Ms)} ms p99` +
          (f.through.rps < f.rate * 0.95 ? ' (the offered rate was above what it sustained: queueing included)' : '') +
          (f.through.bad || f.direct.bad ? `; ${f.through.bad}/${f.direct.bad} bad answers` : ''),
      );
    }
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().then(
    (results) => {
      const failed = results.some((r) => r.errors > 0 || r.non2xx > 0 || r.mismatches > 0);
      process.exitCode = failed ? 1 : 0;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
