import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { randomBytes, randomUUID } from 'node:crypto';
import { repoPath, startChildServer, type ChildServer } from '../lib/child-server.js';
import { SAMPLER_TAG } from '../lib/own-services.js';

/** The terminal run statuses, as SQL literals. */
const TERMINAL = `'completed', 'failed', 'canceled', 'rejected'`;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

async function admin(base: string, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export interface OursOptions {
  /** Binding transports of the echo agent (default JSON-RPC only). */
  transports?: string[];
  /** Start the worker child too (default true). */
  worker?: boolean;
  /** Database to reset and use (default: BENCH_DATABASE_URL, else `aaas_bench`). */
  databaseUrl?: string;
  /**
   * Database URL `drain()` and `terminalRuns()` poll with (default `databaseUrl`): the bench
   * passes its sampler role's, whose statements it leaves out of the counts.
   */
  samplerDatabaseUrl?: string;
  /** Redis of both children (default: REDIS_URL of this process, else the config's default). */
  redisUrl?: string;
  /** Extra environment for the API child only (e.g. SSE_HEARTBEAT_MS). */
  apiEnv?: Record<string, string>;
  /** Repo-relative script of the API child (default `bench/ours/api-server.mjs`). */
  apiScript?: string;
  /** The agent's `protocolProfiles.a2a.capabilities` (default: none, i.e. the profile's defaults). */
  capabilities?: { streaming?: boolean; pushNotifications?: boolean; extendedAgentCard?: boolean };
  /** The scripted runtime's rules (default `[]`: every message is echoed). */
  rules?: unknown[];
  /** Extra environment for both children (e.g. push settings). */
  env?: Record<string, string>;
  /** The echo agent's runtime config (default: scripted with `rules`). */
  runtime?: Record<string, unknown>;
}

/** What `startOursProcesses` started (`url`/`close` as before; the rest for benches that need more). */
export interface OursProcesses {
  /** The agent's JSON-RPC endpoint. */
  url: string;
  /** The API's base URL. */
  base: string;
  /** The bootstrap org's admin key. */
  key: string;
  /** The environment shared by the children (DATABASE_URL, REDIS_PREFIX, …). */
  env: Record<string, string>;
  api: ChildServer;
  worker: ChildServer | null;
  /**
   * Wait until every run is terminal (the worker has executed the backlog a load left), polling
   * the database every 100 ms, at most `timeoutMs` (default 120 000). Resolves with the runs
   * still not terminal (0 when drained) and the milliseconds waited; never rejects on timeout.
   */
  drain(timeoutMs?: number): Promise<{ left: number; waitedMs: number }>;
  /** Runs in a terminal status (completed, failed, canceled, rejected) now, and of them the completed ones. */
  terminalRuns(): Promise<{ terminal: number; completed: number }>;
  close(): Promise<void>;
}

/**
 * Our service as a bench target: a fresh `aaas_bench` database (migrated), the API and one worker
 * each in its own child process (compiled tree), and an echo agent published through the admin
 * API. Returns the agent's JSON-RPC endpoint.
 */
export async function startOursProcesses(opts: OursOptions = {}): Promise<OursProcesses> {
  const databaseUrl = opts.databaseUrl ?? process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench';
  execFileSync(process.execPath, [repoPath('scripts/migrate.mjs'), '--reset'], { stdio: 'inherit', env: { ...process.env, DATABASE_URL: databaseUrl } });
  const key = `aaas_${alnum(8)}_${alnum(32)}`;
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_PREFIX: `aaas-bench-${randomUUID().slice(0, 8)}`,
    BOOTSTRAP_ORG_SLUG: 'bench',
    BOOTSTRAP_ADMIN_KEY: key,
    DATABASE_POOL_MAX: process.env.BENCH_POOL_MAX ?? '20',
    // the request rate limits stay on (their counting is on the path measured) but out of reach:
    // the defaults (120,000 / 60,000 per minute) are below what one bench run now sends
    RATE_LIMIT_PER_IP: '1000000000',
    RATE_LIMIT_PER_KEY: '1000000000',
    ...(opts.redisUrl ? { REDIS_URL: opts.redisUrl } : {}),
    ...opts.env,
  };
  const nodeArgs = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  const api = await startChildServer({ script: opts.apiScript ?? 'bench/ours/api-server.mjs', env: { ...env, ...opts.apiEnv }, startTimeoutMs: 30_000, nodeArgs });
  const worker = opts.worker === false ? null : await startChildServer({ script: 'bench/ours/worker.mjs', env, startTimeoutMs: 30_000, nodeArgs });
  const base = api.url;
  await admin(base, key, 'POST', '/v1/agents', { slug: 'echo', name: 'Echo', description: 'bench echo agent' });
  const rev = await admin(base, key, 'POST', '/v1/agents/echo/revisions', {
    protocolProfiles: {
      a2a: {
        skillsProjection: [{ id: 'echo', name: 'Echo', description: 'Echoes', tags: ['bench'] }],
        ...(opts.capabilities ? { capabilities: opts.capabilities } : {}),
      },
    },
    runtime: opts.runtime ?? { kind: 'scripted', rules: opts.rules ?? [] },
  });
  await admin(base, key, 'POST', `/v1/agents/echo/revisions/${rev.id}/publish`);
  await admin(base, key, 'PUT', '/v1/agents/echo/active-revision', { revisionId: rev.id });
  await admin(base, key, 'PUT', '/v1/agents/echo/bindings/a2a', { transports: opts.transports ?? ['JSONRPC'] });
  const samplerUrl = opts.samplerDatabaseUrl ?? databaseUrl;
  return {
    url: `${base}/a2a/bench/echo`,
    base,
    key,
    env,
    api,
    worker,
    async drain(timeoutMs = 120_000) {
      const started = Date.now();
      const client = new pg.Client({ connectionString: samplerUrl });
      await client.connect();
      try {
        let left = 0;
        for (const deadline = started + timeoutMs; ; ) {
          const { rows } = await client.query<{ n: number }>(`/* ${SAMPLER_TAG} */ SELECT count(*)::int AS n FROM runs WHERE status NOT IN (${TERMINAL})`);
          left = rows[0]!.n;
          if (left === 0 || Date.now() >= deadline) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        return { left, waitedMs: Date.now() - started };
      } finally {
        await client.end();
      }
    },
    async terminalRuns() {
      const client = new pg.Client({ connectionString: samplerUrl });
      await client.connect();
      try {
        const { rows } = await client.query<{ terminal: number; completed: number }>(
          `/* ${SAMPLER_TAG} */ SELECT count(*)::int AS terminal, (count(*) FILTER (WHERE status = 'completed'))::int AS completed FROM runs WHERE status IN (${TERMINAL})`,
        );
        return rows[0]!;
      } finally {
        await client.end();
      }
    },
    async close() {
      await worker?.close();
      await api.close();
    },
  };
}
