import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { AppError, isDependencyUnavailable } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { isTracing, withChildSpan, type SpanOptions } from '#libs/telemetry';
import { PrismaClient } from './generated/prisma/client.js';

/**
 * The process's one connection pool to PostgreSQL, shared by Prisma (through the pg driver
 * adapter, no native engine) and by the raw SQL of the hot paths (`query`).
 * Only repositories use it.
 */
@Injectable()
export class DatabaseService implements OnApplicationShutdown {
  readonly pool: pg.Pool;
  readonly prisma: PrismaClient;

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
    this.prisma = new PrismaClient({ adapter: new PrismaPg(this.pool) });
  }

  /**
   * One round trip of raw SQL. Rows come back as plain objects. With `name`, the statement is
   * prepared once per connection and its plan reused (hot paths: the append path, run reads).
   * When tracing, each statement is a client span named `name` (no SQL text, no values).
   */
  async query<T extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<T[]> {
    if (isTracing()) return withChildSpan(name ?? summary(text), DB_SPAN, async () => (await this.pool.query<T>(name ? { name, text, values } : { text, values })).rows);
    const res = await this.pool.query<T>(name ? { name, text, values } : { text, values });
    return res.rows;
  }

  /**
   * Run `fn` inside one transaction on one connection: COMMIT when it resolves, ROLLBACK when it
   * throws (the error is rethrown). `q` is `query` bound to that connection.
   */
  async transaction<R>(fn: (q: <T extends pg.QueryResultRow>(text: string, values?: unknown[], name?: string) => Promise<T[]>) => Promise<R>): Promise<R> {
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
  }
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
