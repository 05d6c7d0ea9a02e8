import { startChildServer, type ChildServer } from '../lib/child-server.js';

/**
 * Baseline: the official `@a2a-js/sdk` v1.0 server with its `DatabaseTaskStore` on PostgreSQL
 * (express, JSON-RPC, echo executor), in a child process on 127.0.0.1:0.
 */
export function startSdkPostgres(): Promise<ChildServer> {
  return startChildServer({ script: 'bench/baselines/sdk-postgres.mjs', startTimeoutMs: 30_000 });
}

/** Baseline: bare Fastify + one prepared pg statement (task row + event row) per request. */
export function startFastifyPg(): Promise<ChildServer> {
  return startChildServer({ script: 'bench/baselines/fastify-pg.mjs', startTimeoutMs: 30_000 });
}
