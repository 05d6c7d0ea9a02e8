import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';

/**
 * The bench's own PostgreSQL cluster and redis-server (never the shared ones on 5432 / 6379), so
 * that statements and commands can be counted per target and their CPU read from their own
 * processes only. The approach is the fault suite's (bench/faults/world.ts): `initdb` + `pg_ctl`
 * on a free port in a temp dir, as the `postgres` OS user (`runuser`) when running as root.
 *
 * Everything started here is stopped by `stopOwnServices()`, which also runs on exit, SIGINT and
 * SIGTERM.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A free TCP port on 127.0.0.1 (asked of the OS). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const cleanups: Array<() => void> = [];
let hooked = false;
function onCleanup(fn: () => void): void {
  cleanups.push(fn);
  if (hooked) return;
  hooked = true;
  process.once('exit', stopOwnServices);
  for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.once(sig, () => {
      stopOwnServices();
      process.exit(code);
    });
  }
}

/** Stop every cluster / server started here (synchronous, idempotent, newest first). */
export function stopOwnServices(): void {
  while (cleanups.length > 0) {
    try {
      cleanups.pop()!();
    } catch (e) {
      process.stderr.write(`[bench] cleanup step failed: ${(e as Error).message}\n`);
    }
  }
}

function findPgBin(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  if (existsSync('/usr/lib/postgresql')) {
    for (const v of readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))) {
      const p = `/usr/lib/postgresql/${v}/bin/${name}`;
      if (existsSync(p)) return p;
    }
  }
  throw new Error(`${name} not found on PATH nor in /usr/lib/postgresql/*/bin`);
}

/** The role the bench samples with (drain polls, pg_stat_statements reads): its statements are not counted. */
export const SAMPLER_ROLE = 'bench_sampler';

/**
 * A comment the bench's own sampling statements carry (pg_stat_statements keeps the text of the
 * first call, comments included): statements containing it are not counted, whoever ran them.
 */
export const SAMPLER_TAG = 'bench-sampler';

/** Replace the user (and optionally the database) of a PostgreSQL URL. */
export function withUser(url: string, user: string, database?: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  if (database) u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A PostgreSQL cluster of the bench's own, in a temp dir, on a free port, with
 * `shared_preload_libraries=pg_stat_statements` (track = top, utility statements tracked), and
 * durability as the shared server (`fsync`, `synchronous_commit` and `full_page_writes` on).
 */
export class BenchPostgres {
  readonly root: string;
  readonly dataDir: string;
  private readonly asRoot = process.getuid?.() === 0;

  private constructor(readonly port: number) {
    this.root = mkdtempSync(path.join(os.tmpdir(), 'aaas-bench-pg-'));
    this.dataDir = path.join(this.root, 'pgdata');
  }

  /** `postgresql://postgres@127.0.0.1:<port>/<database>` (trust auth). */
  url(database: string): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Postmaster pid (read from postmaster.pid), the root of the cluster's process tree. */
  get pid(): number {
    return Number(readFileSync(path.join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  }

  private run(bin: string, args: string[], timeoutMs = 120_000): string {
    const [cmd, argv] = this.asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, cwd: this.root });
  }

  /** initdb, start, create the extension and the sampler role. Throws when PostgreSQL's binaries are missing. */
  static async start(): Promise<BenchPostgres> {
    const pgc = new BenchPostgres(await freePort());
    onCleanup(() => rmSync(pgc.root, { recursive: true, force: true }));
    if (pgc.asRoot) {
      const ids = execFileSync('id', ['postgres'], { encoding: 'utf8' });
      chownSync(pgc.root, Number(/uid=(\d+)/.exec(ids)![1]), Number(/gid=(\d+)/.exec(ids)![1]));
    }
    pgc.run(findPgBin('initdb'), ['-D', pgc.dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    const opts = [
      `-p ${pgc.port}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${pgc.root}`,
      '-c shared_preload_libraries=pg_stat_statements',
      '-c pg_stat_statements.track=top',
      '-c pg_stat_statements.track_utility=on',
      // planning time too: a prepared statement PostgreSQL re-plans on every call shows here
      '-c pg_stat_statements.track_planning=on',
      '-c pg_stat_statements.max=10000',
      '-c fsync=on',
      '-c synchronous_commit=on',
      '-c full_page_writes=on',
      '-c max_connections=200',
    ].join(' ');
    pgc.run(findPgBin('pg_ctl'), ['start', '-D', pgc.dataDir, '-l', path.join(pgc.root, 'postgres.log'), '-w', '-t', '60', '-o', opts]);
    onCleanup(() => {
      try {
        pgc.run(findPgBin('pg_ctl'), ['stop', '-D', pgc.dataDir, '-m', 'immediate', '-w', '-t', '10'], 15_000);
      } catch {
        // not running
      }
    });
    const c = new pg.Client({ connectionString: pgc.url('postgres') });
    await c.connect();
    try {
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      // superuser so it can read any bench database and reset the statistics
      await c.query(`CREATE ROLE ${SAMPLER_ROLE} LOGIN SUPERUSER`);
    } finally {
      await c.end();
    }
    return pgc;
  }
}

/** A redis-server of the bench's own (no persistence), on a free port. */
export class BenchRedis {
  private child?: ChildProcess;

  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  static async start(): Promise<BenchRedis> {
    const r = new BenchRedis(await freePort());
    const child = spawn('redis-server', ['--port', String(r.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'], { stdio: 'ignore' });
    r.child = child;
    onCleanup(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const probe = new Redis(r.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined); // refused until the server listens: retried below
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        await probe.connect();
        await probe.ping();
        break;
      } catch {
        probe.disconnect();
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server on ${r.port} did not start`);
        await sleep(50);
      }
    }
    probe.disconnect();
    return r;
  }
}

/** Statement counts from pg_stat_statements (calls summed over every statement except the sampler's). */
export interface SqlCount {
  /** Every statement executed, transaction control (BEGIN/COMMIT/ROLLBACK) included. */
  calls: number;
  /** Of `calls`, BEGIN / COMMIT / ROLLBACK / SAVEPOINT / RELEASE / SET statements. */
  utilityCalls: number;
  /** The most called statements (query text as normalised by pg_stat_statements, truncated to 160 chars). */
  top: Array<SqlStatementCount>;
  /**
   * The statements that took the most time in all (`total_exec_time` + `total_plan_time`, ms),
   * same shape: where PostgreSQL's CPU goes.
   */
  topByTime: Array<SqlStatementCount>;
}

/** One statement of pg_stat_statements: calls, execution and planning time (ms; planning 0 where not tracked), and how often it was planned. */
export interface SqlStatementCount {
  query: string;
  calls: number;
  execMs: number;
  planMs: number;
  plans: number;
}

/**
 * Counts SQL statements with pg_stat_statements on one server. `reset()` zeroes the statistics,
 * `read()` returns the calls since then. Every statement of the sampler role (this counter, the
 * drain polls) is excluded. `available` is false (and `read()` returns null) when the server
 * does not preload pg_stat_statements.
 */
export class SqlCounter {
  private constructor(
    private readonly client: pg.Client,
    readonly available: boolean,
  ) {}

  /**
   * `adminUrl`: a database of the server where the pg_stat_statements extension is created,
   * connected as a role allowed to read and reset the statistics.
   */
  static async open(adminUrl: string): Promise<SqlCounter> {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    let available = false;
    try {
      // never installs anything on a server that is not the bench's own: the extension must be there
      const { rows } = await client.query<{ ok: boolean }>(
        `SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'
                AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements') AS ok`,
      );
      available = rows[0]?.ok === true;
    } catch {
      available = false;
    }
    return new SqlCounter(client, available);
  }

  async reset(): Promise<void> {
    if (this.available) await this.client.query('SELECT pg_stat_statements_reset()');
  }

  /** Statements since `reset()`; `databases`: count only those run in these databases (default: all). */
  async read(databases?: string[]): Promise<SqlCount | null> {
    if (!this.available) return null;
    const { rows } = await this.client.query<{ query: string; calls: string; utility: boolean; exec_ms: number; plan_ms: number; plans: string }>(
      `SELECT s.query, s.calls::text AS calls, s.total_exec_time AS exec_ms, s.total_plan_time AS plan_ms, s.plans::text AS plans,
              s.query ~* '^\\s*(begin|commit|rollback|start transaction|savepoint|release|set|deallocate|discard)\\y' AS utility
         FROM pg_stat_statements s
        WHERE s.userid NOT IN (SELECT oid FROM pg_roles WHERE rolname = '${SAMPLER_ROLE}')
          AND s.query NOT LIKE '%${SAMPLER_TAG}%'
          AND ($1::text[] IS NULL OR s.dbid IN (SELECT oid FROM pg_database WHERE datname = ANY($1::text[])))
        ORDER BY s.calls DESC`,
      [databases ?? null],
    );
    let calls = 0;
    let utilityCalls = 0;
    for (const r of rows) {
      calls += Number(r.calls);
      if (r.utility) utilityCalls += Number(r.calls);
    }
    const entry = (r: (typeof rows)[number]): SqlStatementCount => ({
      query: r.query.replace(/\s+/g, ' ').slice(0, 160),
      calls: Number(r.calls),
      execMs: Math.round(Number(r.exec_ms) * 10) / 10,
      planMs: Math.round(Number(r.plan_ms) * 10) / 10,
      plans: Number(r.plans),
    });
    const byTime = [...rows].sort((a, b) => Number(b.exec_ms) + Number(b.plan_ms) - Number(a.exec_ms) - Number(a.plan_ms));
    return { calls, utilityCalls, top: rows.slice(0, 12).map(entry), topByTime: byTime.slice(0, 12).map(entry) };
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

/** Redis command calls per command name (lower case), from `INFO commandstats`. */
export type CommandCalls = Record<string, number>;

function parseCommandStats(info: string): CommandCalls {
  const out: CommandCalls = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** Redis commands counted from `INFO commandstats` deltas. */
export interface RedisCount {
  /** Sum of calls over every command (commands run inside Lua scripts count too, as Redis counts them). */
  calls: number;
  /** Of `calls`, the script invocations themselves (EVAL, EVALSHA, FCALL and their _RO forms). */
  scriptCalls: number;
  /** Calls per command. */
  byCommand: CommandCalls;
}

/**
 * Counts Redis commands on one server by `INFO commandstats` deltas between `mark()` and `read()`;
 * the counter's own INFO calls are subtracted.
 */
export class RedisCounter {
  private before: CommandCalls = {};

  private constructor(private readonly redis: Redis) {}

  static async open(url: string): Promise<RedisCounter> {
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    return new RedisCounter(redis);
  }

  private async snapshot(): Promise<CommandCalls> {
    return parseCommandStats(await this.redis.info('commandstats'));
  }

  async mark(): Promise<void> {
    this.before = await this.snapshot();
  }

  async read(): Promise<RedisCount> {
    const after = await this.snapshot();
    const byCommand: CommandCalls = {};
    let calls = 0;
    let scriptCalls = 0;
    for (const [cmd, n] of Object.entries(after)) {
      // a command is counted after it runs: mark()'s INFO shows here, this one does not
      const d = n - (this.before[cmd] ?? 0) - (cmd === 'info' ? 1 : 0);
      if (d <= 0) continue;
      byCommand[cmd] = d;
      calls += d;
      if (/^(eval|evalsha|fcall)(_ro)?$/.test(cmd)) scriptCalls += d;
    }
    return { calls, scriptCalls, byCommand };
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
