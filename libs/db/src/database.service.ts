import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { AppError, isDependencyUnavailable, TtlLruCache } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { isTracing, withChildSpan, type SpanOptions } from '#libs/telemetry';
import { PrismaClient } from './generated/prisma/client.js';
import { currentReader, isWriteStatement, parseLsn, type ReaderState } from './read-routing.js';

/** How long (ms) a caller's write is remembered for read-your-writes on the replica. */
export const READ_YOUR_WRITES_WINDOW_MS = 60_000;
/**
 * Callers remembered at once. Past it the least recently written are dropped, and until the window
 * has passed every caller not remembered waits for the newest LSN recorded before the drop.
 */
const READ_YOUR_WRITES_CALLERS = 50_000;
/** How long (ms) one reading of the replica's replay LSN is reused. */
const REPLAY_LSN_CACHE_MS = 5;
/** Longest wait (ms) for the replica's replay LSN; past it the read goes to the primary. */
const REPLAY_LSN_TIMEOUT_MS = 250;
/** After a replica failure, reads stay on the primary this long (ms) before the replica is tried again. */
const REPLICA_BACKOFF_MS = 2_000;
/** A position no replica reaches: the caller's writes are of unknown position, it reads the primary. */
const UNKNOWN_LSN = (1n << 64n) - 1n;

/** Where lag-tolerant reads went (DatabaseService.readQuery), counted since start. */
export interface ReadRoutingStats {
  /** served by the replica */
  replica: number;
  /** sent to the primary: no replica configured, or it had not replayed the caller's last write, or it is backing off */
  primary: number;
  /** the replica failed (down, slow, canceled by recovery): served by the primary instead */
  fallback: number;
}

/**
 * The process's one connection pool to PostgreSQL, shared by Prisma (through the pg driver
 * adapter, no native engine) and by the raw SQL of the hot paths (`query`).
 * Only repositories use it.
 */
@Injectable()
export class DatabaseService implements OnApplicationShutdown {
  readonly pool: pg.Pool;
  readonly prisma: PrismaClient;
  /** Pool of the read replica (DATABASE_READ_URL), null when unset: every read goes to the primary. */
  readonly readPool: pg.Pool | null;
  readonly readStats: ReadRoutingStats = { replica: 0, primary: 0, fallback: 0 };
  /** caller key -> WAL position (LSN) of the primary after that caller's last write */
  private readonly writtenAt = new TtlLruCache<string, bigint>(READ_YOUR_WRITES_CALLERS, READ_YOUR_WRITES_WINDOW_MS);
  private replay: { at: number; lsn: Promise<bigint | null | undefined> } | null = null;
  private replicaDownUntil = 0;
  /** newest LSN recorded when a caller had to be dropped from `writtenAt`, and when (see READ_YOUR_WRITES_CALLERS) */
  private newestLsn = 0n;
  private dropped: { lsn: bigint; at: number } | null = null;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    // Bounded everywhere: a database that is down or silent costs a request at most these waits
    // (then 503), never a hung request or shutdown
    this.pool = new pg.Pool({
      connectionString: config.DATABASE_URL,
      max: config.DATABASE_POOL_MAX,
      connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS,
      statement_timeout: config.DATABASE_STATEMENT_TIMEOUT_MS,
      idle_in_transaction_session_timeout: config.DATABASE_STATEMENT_TIMEOUT_MS,
      query_timeout: config.DATABASE_STATEMENT_TIMEOUT_MS + 5_000,
      keepAlive: true,
    });
    // A dropped idle connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => undefined);
    // Nor an 'error' a connection emits while no one of ours listens (between or after the
    // statements of a checkout): seen once as an uncaught "terminating connection due to
    // administrator command" that killed a worker during `pg_ctl stop -m fast` (npm run
    // bench:exactly-once; the emitting path was not pinned down). A client that errs is not
    // queryable: its next use fails and the pool drops it.
    this.pool.on('connect', (client) => client.on('error', () => undefined));
    this.prisma = new PrismaClient({ adapter: new PrismaPg(this.pool) });
    this.readPool = config.DATABASE_READ_URL
      ? new pg.Pool({
          connectionString: config.DATABASE_READ_URL,
          max: config.DATABASE_POOL_MAX,
          // a replica that does not answer costs little: the read goes to the primary
          connectionTimeoutMillis: Math.min(config.DATABASE_CONNECT_TIMEOUT_MS, 1_000),
          statement_timeout: config.DATABASE_STATEMENT_TIMEOUT_MS,
          query_timeout: config.DATABASE_STATEMENT_TIMEOUT_MS + 5_000,
          keepAlive: true,
          application_name: 'aaas-read',
        })
      : null;
    this.readPool?.on('error', () => undefined);
    this.readPool?.on('connect', (client) => client.on('error', () => undefined));
  }

  /**
   * A lag-tolerant read (lists, search, counts, archive export): served by the read replica
   * (DATABASE_READ_URL) when one is configured, else by the primary. Read-your-writes: when the
   * current request's caller (`runAsReader`) wrote within READ_YOUR_WRITES_WINDOW_MS, the replica
   * serves it only once it has replayed the WAL up to that write (`pg_last_wal_replay_lsn()`, read
   * at most every few ms), else the primary does; a request that wrote itself reads the primary.
   * A replica that fails (down, slow, its statement canceled by recovery) never fails the read: the
   * primary answers it, and the replica is left alone for REPLICA_BACKOFF_MS. Errors: those of
   * `query` on the primary. Counted in `readStats`.
   */
  async readQuery<T extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<T[]> {
    if (!this.readPool || !(await this.replicaServes(currentReader()))) {
      this.readStats.primary += 1;
      return this.query<T>(text, values, name);
    }
    try {
      const res = await this.readPool.query<T>(name ? { name, text, values } : { text, values });
      this.readStats.replica += 1;
      return res.rows;
    } catch (e) {
      if (!replicaFailure(e)) throw e;
      this.replicaDownUntil = performance.now() + REPLICA_BACKOFF_MS;
      this.readStats.fallback += 1;
      return this.query<T>(text, values, name);
    }
  }

  /**
   * After a request of `reader` that wrote (called by the edges before they answer): remember the
   * primary's WAL position (`pg_current_wal_insert_lsn()`, read after the writes committed) for
   * that caller, so its next lag-tolerant reads wait for a replica that replayed it. A no-op
   * without a replica or when the request did not write; never throws (when the position cannot be
   * read, the caller's lag-tolerant reads go to the primary for the whole window).
   */
  async rememberWrite(reader: ReaderState | undefined): Promise<void> {
    if (!this.readPool || !reader || !(reader.writes || reader.wrote)) return;
    try {
      const [row] = await this.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn', [], 'db.wal_insert_lsn');
      const lsn = parseLsn(row?.lsn);
      if (lsn !== null) {
        if (this.writtenAt.size >= READ_YOUR_WRITES_CALLERS && this.writtenAt.get(reader.key) === undefined) this.dropped = { lsn: this.newestLsn, at: performance.now() };
        if (lsn > this.newestLsn) this.newestLsn = lsn;
        this.writtenAt.set(reader.key, lsn);
      }
      reader.writes = false;
      reader.wrote = false;
    } catch {
      // the position is unknown: the caller reads the primary for the whole window
      this.writtenAt.set(reader.key, UNKNOWN_LSN);
    }
  }

  private async replicaServes(reader: ReaderState | undefined): Promise<boolean> {
    if (performance.now() < this.replicaDownUntil) return false;
    if (!reader) return true;
    if (reader.wrote) return false;
    let need = this.writtenAt.get(reader.key);
    if (need === undefined && this.dropped && performance.now() - this.dropped.at < READ_YOUR_WRITES_WINDOW_MS) need = this.dropped.lsn;
    if (need === undefined) return true;
    const replayed = await this.replayLsn();
    // null: the read server is not a standby (it is the primary, or was promoted): up to date
    return replayed === null || (replayed !== undefined && replayed >= need);
  }

  /** The replica's replay position, shared by the reads of a few ms; undefined when it could not be read. */
  private replayLsn(): Promise<bigint | null | undefined> {
    const now = performance.now();
    if (this.replay && now - this.replay.at < REPLAY_LSN_CACHE_MS) return this.replay.lsn;
    const pool = this.readPool!;
    const lsn = new Promise<bigint | null | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.replicaDownUntil = performance.now() + REPLICA_BACKOFF_MS;
        resolve(undefined);
      }, REPLAY_LSN_TIMEOUT_MS);
      pool.query<{ lsn: string | null }>({ name: 'db.wal_replay_lsn', text: 'SELECT pg_last_wal_replay_lsn()::text AS lsn' }).then(
        (res) => {
          clearTimeout(timer);
          resolve(parseLsn(res.rows[0]?.lsn));
        },
        () => {
          clearTimeout(timer);
          this.replicaDownUntil = performance.now() + REPLICA_BACKOFF_MS;
          resolve(undefined);
        },
      );
    });
    this.replay = { at: now, lsn };
    return lsn;
  }

  /**
   * One round trip of raw SQL. Rows come back as plain objects. With `name`, the statement is
   * prepared once per connection and its plan reused (hot paths: the append path, run reads).
   * When tracing, each statement is a client span named `name` (no SQL text, no values).
   */
  async query<T extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<T[]> {
    if (this.readPool) markWrite(text);
    if (isTracing()) return withChildSpan(name ?? summary(text), DB_SPAN, async () => (await this.pool.query<T>(name ? { name, text, values } : { text, values })).rows);
    const res = await this.pool.query<T>(name ? { name, text, values } : { text, values });
    return res.rows;
  }

  /**
   * Run `fn` inside one transaction on one connection: COMMIT when it resolves, ROLLBACK when it
   * throws (the error is rethrown). `q` is `query` bound to that connection.
   */
  async transaction<R>(fn: (q: <T extends pg.QueryResultRow>(text: string, values?: unknown[], name?: string) => Promise<T[]>) => Promise<R>): Promise<R> {
    const reader = this.readPool ? currentReader() : undefined;
    if (reader) reader.wrote = true;
    if (isTracing()) return withChildSpan('db.transaction', DB_SPAN, () => this.inTransaction(fn));
    return this.inTransaction(fn);
  }

  private async inTransaction<R>(fn: (q: <T extends pg.QueryResultRow>(text: string, values?: unknown[], name?: string) => Promise<T[]>) => Promise<R>): Promise<R> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // pg emits 'error' on a checked-out client whose connection drops between statements; with no
    // listener that is an uncaught exception (the process would die with its database)
    const onError = (e: Error) => (broken ??= e);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await fn(async <T extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string) => {
        if (isTracing()) return withChildSpan(name ?? summary(text), DB_SPAN, async () => (await client.query<T>(name ? { name, text, values } : { text, values })).rows);
        const res = await client.query<T>(name ? { name, text, values } : { text, values });
        return res.rows;
      });
      await client.query('COMMIT');
      return result;
    } catch (e) {
      // a lost or silent connection: no ROLLBACK (it would wait out query_timeout); the pool drops
      // the connection and the server rolls the transaction back when it goes
      if (isDependencyUnavailable(e)) broken ??= e instanceof Error ? e : new Error(String(e));
      // a ROLLBACK that fails (or times out) leaves the connection unusable: drop it too
      if (!broken) await client.query('ROLLBACK').catch((x: unknown) => (broken ??= x instanceof Error ? x : new Error(String(x))));
      throw e;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    await this.prisma.$disconnect().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
    await this.readPool?.end().catch(() => undefined);
  }
}

/** A write statement run in a request marks the request as one that wrote (read-your-writes). */
function markWrite(text: string): void {
  const reader = currentReader();
  if (reader && !reader.wrote && text !== 'SELECT pg_current_wal_insert_lsn()::text AS lsn' && isWriteStatement(text)) reader.wrote = true;
}

/** A replica that cannot serve: unreachable, slow, shutting down, or its statement canceled by recovery (40001). */
function replicaFailure(e: unknown): boolean {
  return isDependencyUnavailable(e) || sqlState(e) === '40001' || !sqlState(e);
}

/** Spans of statements (when tracing): named by the statement's name (`runs.append`), else its first keyword. */
const DB_SPAN: SpanOptions = { kind: 'client', attributes: { 'db.system.name': 'postgresql' } };

/** Low-cardinality name of an unnamed statement: its first SQL keyword (`SELECT`, `WITH`, ...). */
function summary(text: string): string {
  return /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? 'SQL';
}

/** Postgres SQLSTATE of a unique violation. */
export const PG_UNIQUE_VIOLATION = '23505';
/** Postgres SQLSTATE raised by our immutability triggers. */
export const PG_CHECK_VIOLATION = '23514';

/**
 * A repository's translation of database errors into AppErrors: `p`'s rejection becomes
 * `unique()` on a unique violation and `check()` on a check violation (our triggers); any other
 * error passes unchanged. Services above repositories never see SQLSTATEs.
 */
export async function translated<T>(p: Promise<T>, map: { unique?: () => AppError; check?: () => AppError }): Promise<T> {
  try {
    return await p;
  } catch (e) {
    const state = sqlState(e);
    if (state === PG_UNIQUE_VIOLATION && map.unique) throw withCause(map.unique(), e);
    if (state === PG_CHECK_VIOLATION && map.check) throw withCause(map.check(), e);
    throw e;
  }
}

function withCause(err: AppError, cause: unknown): AppError {
  if (err.cause === undefined) Object.defineProperty(err, 'cause', { value: cause, enumerable: false });
  return err;
}

/** SQLSTATE of a pg or Prisma error, when there is one. */
export function sqlState(e: unknown): string | undefined {
  const err = e as { code?: unknown; cause?: { code?: unknown; originalCode?: unknown }; meta?: { code?: unknown } };
  // Prisma's own code for the same condition
  if (err?.code === 'P2002') return PG_UNIQUE_VIOLATION;
  for (const c of [err?.code, err?.cause?.originalCode, err?.cause?.code, err?.meta?.code]) {
    if (typeof c === 'string' && /^[0-9A-Z]{5}$/.test(c) && !c.startsWith('P')) return c;
  }
  return undefined;
}
