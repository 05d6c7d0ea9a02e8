/**
 * The bench's world (its own PostgreSQL cluster and redis-server, lib/own-services.ts), CPU
 * pinning, and the targets of `bench:tokens`, each server a child process pinned to CPU 0:
 *
 * | target | what |
 * |---|---|
 * | `sdk` | `@a2a-js/sdk` 1.3 in memory, its executor streaming the chunks (tokens/sdk-agent.mjs) |
 * | `http` | ours (API + one worker) with an `http`-runtime agent in front of the NDJSON backend (tokens/backend.ts) |
 * | `a2a` | ours with an `a2a`-runtime agent in front of an sdk-agent process |
 * | `direct` | that same sdk-agent process, called directly (measured after `a2a`, ours stopped) |
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startChildServer, type ChildServer } from '../lib/child-server.js';
import { BenchPostgres, BenchRedis, RedisCounter, SAMPLER_ROLE, SqlCounter, stopOwnServices, withUser } from '../lib/own-services.js';
import { processTree } from '../lib/proc-cpu.js';
import { startOursProcesses, type OursProcesses } from '../ours/ours.js';

/** Where the servers run and where the load generator runs. */
export const SERVER_CPU = 0;
export const LOAD_CPU = 1;

let pinning: boolean | null = null;

/** Whether `taskset` exists (checked once; prints a note when it does not). */
export function canPin(): boolean {
  if (pinning === null) {
    try {
      execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
      pinning = true;
    } catch {
      pinning = false;
      console.log('note: taskset not found: servers and load generator are NOT pinned to CPUs');
    }
  }
  return pinning;
}

/** Pin every thread of each pid to `cpu` (`taskset -a -p -c`); processes gone meanwhile are skipped. */
export function pin(pids: Array<number | undefined>, cpu: number): void {
  if (!canPin()) return;
  for (const pid of pids) {
    if (!pid) continue;
    try {
      execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
    } catch {
      // exited meanwhile
    }
  }
}

/** The bench's own PostgreSQL and Redis with their counters, pinned to SERVER_CPU. */
export interface World {
  pg: BenchPostgres;
  redis: BenchRedis;
  /** Null when pg_stat_statements is not available. */
  sql: SqlCounter | null;
  redisCounter: RedisCounter;
  /** Extra environment for our API and worker (BENCH_APP_ENV), after the bench's own. */
  appEnv: Record<string, string>;
  close(): Promise<void>;
}

export async function startWorld(appEnv: Record<string, string>): Promise<World> {
  const pg = await BenchPostgres.start();
  const redis = await BenchRedis.start();
  pin([...processTree(pg.pid), redis.pid], SERVER_CPU);
  const sql = await SqlCounter.open(withUser(pg.url('postgres'), SAMPLER_ROLE));
  const redisCounter = await RedisCounter.open(redis.url);
  return {
    pg,
    redis,
    sql: sql.available ? sql : null,
    redisCounter,
    appEnv,
    async close() {
      await sql.close().catch(() => undefined);
      await redisCounter.close();
      stopOwnServices();
    },
  };
}

/** A started target. CPU `groups` list each group's pids now (read at both ends of a window). */
export interface Target {
  name: 'sdk' | 'http' | 'a2a' | 'direct';
  /** The agent's JSON-RPC endpoint. */
  url: string;
  /** Ours: SQL and Redis are counted, API and worker RSS read. */
  ours: OursProcesses | null;
  groups: Record<string, () => number[]>;
  /** `http`: the NDJSON backend's `POST /run` URL (its `GET /stats` beside it). */
  backendUrl?: string;
  close(): Promise<void>;
}

/** A child server pinned to SERVER_CPU. */
async function pinnedChild(script: string): Promise<ChildServer> {
  const child = await startChildServer({ script, startTimeoutMs: 30_000 });
  pin([child.pid], SERVER_CPU);
  return child;
}

/** The SDK token agent (sdk, direct, the a2a runtime's upstream). `cardUrl` is its agent card. */
export async function startSdkAgent(): Promise<ChildServer & { cardUrl: string }> {
  const child = await pinnedChild('bench/tokens/sdk-agent.mjs');
  return { ...child, cardUrl: String(child.info.cardUrl) };
}

/** The NDJSON backend (`url` is its `POST /run`; `GET /stats` beside it). */
export const startBackend = () => pinnedChild('dist/bench/tokens/backend.js');

// the bootstrap organization's namespace (slug `bench`): AAAS_RUNTIME_SECRET_BENCH_<NAME without _>
const SECRET_ENV = 'AAAS_RUNTIME_SECRET_BENCH_TOKENS';

/**
 * Ours (fresh `aaas_bench` database, API + one worker) with one agent on `runtime`, streaming in
 * its card. Shipped defaults except: MAX_STREAMS_PER_CALLER raised (every bench client is one
 * caller), loopback allowed for runtimes, DATABASE_POOL_MAX back to the shipped default (ours.ts
 * sets the SendMessage bench's 20), the request rate limits out of reach (ours.ts); then
 * BENCH_APP_ENV on top.
 */
export async function startOurs(world: World, runtime: Record<string, unknown>): Promise<OursProcesses> {
  const { ConfigSchema } = await import('#libs/config');
  const o = await startOursProcesses({
    databaseUrl: world.pg.url('aaas_bench'),
    samplerDatabaseUrl: withUser(world.pg.url('aaas_bench'), SAMPLER_ROLE),
    redisUrl: world.redis.url,
    capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
    runtime,
    env: {
      MAX_STREAMS_PER_CALLER: '1000000',
      HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8',
      DATABASE_POOL_MAX: String(ConfigSchema.shape.DATABASE_POOL_MAX.parse(undefined)),
      [SECRET_ENV]: `whsec_${randomBytes(24).toString('base64')}`,
      LOG_LEVEL: 'silent',
      ...world.appEnv,
    },
  });
  pin([o.api.pid, o.worker?.pid, ...processTree(world.pg.pid)], SERVER_CPU);
  return o;
}

/** The http runtime's config for the backend at `url` (timeout and retries: the shipped defaults). */
export const httpRuntime = (url: string) => ({ kind: 'http', url, secretEnv: SECRET_ENV });

function oursGroups(world: World, o: OursProcesses, backendPid: number | undefined): Record<string, () => number[]> {
  return {
    api: () => [o.api.pid ?? 0],
    worker: () => [o.worker?.pid ?? 0],
    postgres: () => processTree(world.pg.pid),
    redis: () => [world.redis.pid],
    backend: () => [backendPid ?? 0],
  };
}

/** `sdk` (or `direct` over an already started agent). */
export function sdkTarget(name: 'sdk' | 'direct', agent: ChildServer, close: () => Promise<void>): Target {
  return { name, url: agent.url, ours: null, groups: { api: () => [agent.pid ?? 0] }, close };
}

export async function startHttpTarget(world: World): Promise<Target> {
  const backend = await startBackend();
  const o = await startOurs(world, httpRuntime(backend.url));
  return {
    name: 'http',
    url: o.url,
    backendUrl: backend.url,
    ours: o,
    groups: oursGroups(world, o, backend.pid),
    close: async () => {
      await o.close();
      await backend.close();
    },
  };
}

/** `a2a` over `upstream` (which the caller closes). */
export async function startA2aTarget(world: World, upstream: ChildServer & { cardUrl: string }): Promise<Target> {
  const o = await startOurs(world, { kind: 'a2a', cardUrl: upstream.cardUrl });
  return { name: 'a2a', url: o.url, ours: o, groups: oursGroups(world, o, upstream.pid), close: () => o.close() };
}
