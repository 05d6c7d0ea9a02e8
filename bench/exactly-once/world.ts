import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { AppProcess, PgCluster, RedisServer, freePort, onCleanup } from '../faults/world.js';
import type { LogEvent, RunRow } from './judge.js';

/**
 * The exactly-once scenarios' world: one PostgreSQL cluster and one redis-server of their own
 * (free ports, never 5432 / 6379; bench/faults/world.ts), shared by the scenarios, which run one
 * after the other; per scenario a `Stack`: a fresh database (scripts/migrate.mjs), a fresh Redis
 * prefix, its API and worker processes from dist/ with the scenario's settings, and its agents,
 * published through the admin API. A stack is torn down before the next scenario starts.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
export const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

/** The organization every stack bootstraps, and the worker variable its http agents sign with. */
const ORG = 'eo';
const SECRET_ENV = 'AAAS_RUNTIME_SECRET_EO_BACKEND';

/**
 * The fault suite's timings (bench/faults/run.ts): leases renewed every second, lost executions
 * found within ~2 s, a run with no live job failed after 15 s; plus its short database timeouts.
 */
export const FAULT_SUITE_TIMINGS: Record<string, string> = {
  EXECUTION_HEARTBEAT_MS: '1000',
  RUN_SWEEP_INTERVAL_MS: '500',
  RUN_STALE_AFTER_MS: '15000',
  OUTBOX_RELAY_INTERVAL_MS: '250',
  STREAM_POLL_INTERVAL_MS: '250',
  A2A_BLOCKING_TIMEOUT_MS: '5000',
  DATABASE_CONNECT_TIMEOUT_MS: '2000',
  DATABASE_STATEMENT_TIMEOUT_MS: '5000',
  WORKER_SHUTDOWN_TIMEOUT_MS: '3000',
};

/** `K=V,K=V` (EXACTLY_ONCE_APP_ENV): settings given to every API and worker, after the scenario's. */
export function parseEnvList(s: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (s ?? '').split(',')) {
    const i = pair.indexOf('=');
    if (i > 0) out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return out;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 180_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

/** The shared servers: one PostgreSQL cluster, one redis-server. */
export class World {
  private constructor(
    readonly dir: string,
    readonly pg: PgCluster,
    readonly redis: RedisServer,
  ) {}

  /** `keep`: leave the temp dir (process logs, the cluster's data) for diagnosis. */
  static async start(log: (s: string) => void, keep = false): Promise<World> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'aaas-exactly-once-'));
    if (!keep) onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    const cluster = new PgCluster(dir, await freePort());
    await cluster.init();
    const redis = new RedisServer(dir, await freePort());
    await redis.start();
    log(`PostgreSQL ${cluster.port} (${cluster.dataDir}), Redis ${redis.port}`);
    return new World(dir, cluster, redis);
  }

  databaseUrl(db: string): string {
    return `postgresql://postgres@127.0.0.1:${this.pg.port}/${db}`;
  }
}

export interface StackOptions {
  /** e.g. `pg-stop-8`: names the database, the Redis prefix and the log files. */
  name: string;
  apis: number;
  workers: number;
  /** The scenario's settings (timings, caps), before EXACTLY_ONCE_APP_ENV. */
  env: Record<string, string>;
}

/** One scenario's service: its database, APIs and workers, agents and a pool to read the log. */
export class Stack {
  readonly apis: AppProcess[] = [];
  readonly workers: AppProcess[] = [];
  readonly db: pg.Pool;
  readonly adminKey = `aaas_${alnum(8)}_${alnum(32)}`;
  readonly env: Record<string, string>;
  private readonly dbName: string;

  constructor(
    readonly world: World,
    readonly opts: StackOptions,
    extraEnv: Record<string, string>,
  ) {
    this.dbName = `aaas_eo_${opts.name.replace(/[^a-z0-9]/gi, '_')}`;
    this.env = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATABASE_URL: world.databaseUrl(this.dbName),
      REDIS_URL: `redis://127.0.0.1:${world.redis.port}`,
      REDIS_PREFIX: `aaas-eo-${opts.name}-${alnum(4)}`,
      BOOTSTRAP_ORG_SLUG: ORG,
      BOOTSTRAP_ADMIN_KEY: this.adminKey,
      PAGE_TOKEN_SECRET: alnum(32),
      RATE_LIMIT_PER_KEY: '0',
      RATE_LIMIT_PER_IP: '0',
      RATE_LIMIT_AUTH_FAILURES_PER_IP: '0',
      // every stream client is the same anonymous caller
      MAX_STREAMS_PER_CALLER: '0',
      RETENTION_INTERVAL_MS: '0',
      OTEL_SDK_DISABLED: 'true',
      // the counting backend listens on loopback, which the outbound guard refuses unless allowed
      HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8',
      [SECRET_ENV]: `whsec_${randomBytes(24).toString('base64')}`,
      ...opts.env,
      ...extraEnv,
    };
    this.db = new pg.Pool({ connectionString: this.env.DATABASE_URL, max: 3, connectionTimeoutMillis: 3_000 });
    this.db.on('error', () => undefined);
  }

  get api(): string {
    return this.apis[0]!.baseUrl!;
  }

  async start(): Promise<void> {
    await run(process.execPath, ['scripts/migrate.mjs'], { DATABASE_URL: this.env.DATABASE_URL! });
    for (let i = 0; i < this.opts.apis; i++) {
      const port = await freePort();
      this.apis.push(new AppProcess(`api-${i + 1}`, 'dist/apps/api/src/main.js', { ...this.env, PORT: String(port) }, this.logFile(`api-${i + 1}`), `http://127.0.0.1:${port}`));
    }
    for (let i = 0; i < this.opts.workers; i++) this.workers.push(new AppProcess(`worker-${i + 1}`, 'dist/apps/worker/src/main.js', this.env, this.logFile(`worker-${i + 1}`), null));
    // the first API bootstraps the organization and the admin key, then the others
    await this.apis[0]!.start();
    await Promise.all([...this.apis.slice(1), ...this.workers].map((p) => p.start()));
    onCleanup(() => void this.db.end().catch(() => undefined));
  }

  logFile(name: string): string {
    return path.join(this.world.dir, `${this.opts.name}-${name}.log`);
  }

  /** Every process: unplanned exits (restarted by AppProcess) as one line. */
  crashes(): string {
    return [...this.apis, ...this.workers].map((p) => `${p.name} ${p.crashes}`).join(', ');
  }

  /** Stop every process (SIGTERM, SIGKILL after 5 s) and close the pool. */
  async stop(): Promise<void> {
    await Promise.all([...this.apis, ...this.workers].map((p) => p.stop('SIGTERM', 5_000)));
    await this.db.end().catch(() => undefined);
  }

  private async admin(method: string, p: string, body?: unknown): Promise<any> {
    const res = await fetch(this.api + p, {
      method,
      headers: { authorization: `Bearer ${this.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`admin ${method} ${p}: HTTP ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  /** Agent → revision → publish → activate → A2A binding (as bench/faults/run.ts publishAgent). Returns its id and A2A path. */
  async publishAgent(slug: string, runtime: Record<string, unknown>): Promise<{ id: string; path: string }> {
    const org = await this.admin('GET', '/v1/organization');
    const agent = await this.admin('POST', '/v1/agents', { slug, name: slug, description: `exactly-once scenario agent ${slug}` });
    const rev = await this.admin('POST', `/v1/agents/${agent.id}/revisions`, {
      protocolProfiles: { a2a: { skillsProjection: [{ id: slug, name: slug, description: 'Scenario work', tags: ['bench'] }], capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } },
      runtime,
    });
    await this.admin('POST', `/v1/agents/${agent.id}/revisions/${rev.id}/publish`);
    await this.admin('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: rev.id });
    await this.admin('PUT', `/v1/agents/${agent.id}/bindings/a2a`, { transports: ['JSONRPC'], security: { scheme: 'none' } });
    return { id: agent.id, path: `/a2a/${org.slug}/${agent.slug}` };
  }

  /** An `http`-runtime config for the counting backend (signed with the stack's worker variable; no retry: a second POST is a second execution). */
  httpRuntime(url: string, timeoutMs = 120_000): Record<string, unknown> {
    return { kind: 'http', url, secretEnv: SECRET_ENV, timeoutMs, retries: 0, resumable: true };
  }

  /**
   * SendMessage (JSON-RPC v1.0, returnImmediately) with `text`; retried with the same messageId
   * until acknowledged (at most `budgetMs`). Returns the task id, or null.
   */
  async send(agentPath: string, text: string, messageId: string, budgetMs = 60_000): Promise<string | null> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId, role: 'ROLE_USER', parts: [{ text }] }, configuration: { returnImmediately: true } } });
    const deadline = Date.now() + budgetMs;
    for (let n = 0; ; n++) {
      try {
        const res = await fetch(this.api + agentPath, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body, signal: AbortSignal.timeout(20_000) });
        const answer = (await res.json()) as { result?: { task?: { id?: string }; id?: string } };
        const id = answer.result?.task?.id ?? answer.result?.id;
        if (id) return id;
      } catch {
        // refused or timed out: sent again with the same messageId
      }
      if (Date.now() > deadline) return null;
      await sleep(Math.min(2_000, 100 * 2 ** Math.min(n, 5)));
    }
  }

  /** A query that waits out an outage of the database (the scenario stops it on purpose). */
  async query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = [], budgetMs = 120_000): Promise<T[]> {
    const deadline = Date.now() + budgetMs;
    for (;;) {
      try {
        return (await this.db.query<T>(sql, params)).rows;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await sleep(500);
      }
    }
  }

  /** Runs of an agent by status. */
  async statusCounts(agentId: string): Promise<Record<string, number>> {
    const rows = await this.query<{ status: string; n: number }>(`SELECT status::text AS status, count(*)::int AS n FROM runs WHERE agent_id = $1 GROUP BY status`, [agentId]);
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /** Dispatches not yet claimed by a worker (the outbox). */
  async outbox(): Promise<number> {
    const rows = await this.query<{ n: number }>(`SELECT count(*)::int AS n FROM run_dispatches`);
    return rows[0]!.n;
  }

  /** The runs of an agent and their logs, as the judge reads them. */
  async snapshot(agentId: string): Promise<{ runs: RunRow[]; events: LogEvent[] }> {
    const runs = await this.query<RunRow>(`SELECT id, status::text AS status FROM runs WHERE agent_id = $1`, [agentId]);
    const events = await this.query<LogEvent>(
      `SELECT e.run_id AS "runId", e.sequence, e.type, e.payload, (extract(epoch FROM e.created_at) * 1000)::float8 AS at FROM run_events e JOIN runs r ON r.id = e.run_id AND r.org_id = e.org_id WHERE r.agent_id = $1 ORDER BY e.run_id, e.sequence`,
      [agentId],
    );
    return { runs, events };
  }
}
