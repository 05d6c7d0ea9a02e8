import { startChildServer, type ChildServer } from '../lib/child-server.js';

/**
 * Baseline: the official `@a2a-js/sdk` v1.0 server with its `DatabaseTaskStore` on PostgreSQL
 * (express, JSON-RPC, echo executor), in a child process on 127.0.0.1:0; schema by the SDK's
 * `a2a-db upgrade`, pg's default pool (10). `databaseUrl`: the database to recreate and use
 * (default BENCH_SDK_DATABASE_URL, else `aaas_bench_sdk` on 127.0.0.1:5432).
 */
export function startSdkPostgres(databaseUrl?: string): Promise<ChildServer> {
  return startChildServer({ script: 'bench/baselines/sdk-postgres.mjs', startTimeoutMs: 60_000, env: databaseUrl ? { BENCH_SDK_DATABASE_URL: databaseUrl } : {} });
}

/**
 * Baseline: bare Fastify + one prepared pg statement (task row + event row) per request.
 * `databaseUrl`: the database to recreate and use (default BENCH_LEAN_DATABASE_URL, else
 * `aaas_bench_lean` on 127.0.0.1:5432).
 */
export function startFastifyPg(databaseUrl?: string): Promise<ChildServer> {
  return startChildServer({ script: 'bench/baselines/fastify-pg.mjs', startTimeoutMs: 30_000, env: databaseUrl ? { BENCH_LEAN_DATABASE_URL: databaseUrl } : {} });
}
