// Baseline: the official @a2a-js/sdk v1.0 server with its DatabaseTaskStore on PostgreSQL
// (express + JSON-RPC, Kysely over pg), set up as the SDK's persistent-stores guide says:
//   - schema: the SDK's own migrations, applied with its CLI (`a2a-db upgrade --url <db>`, the
//     package's `bin`), into a database recreated at start: BENCH_SDK_DATABASE_URL (default
//     postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk; the bench passes its own cluster's);
//   - connection: `new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString }) }) })`,
//     i.e. pg's default pool (max 10 connections). BENCH_POOL_MAX does not apply here.
//
// Child process, started by bench/baselines/sdk-postgres.ts. Listens on 127.0.0.1:<random> and
// prints ONE JSON line on stdout:
//   {"ready":true,"url":"http://127.0.0.1:PORT/a2a/jsonrpc","restUrl":".../a2a/rest","cardUrl":".../.well-known/agent-card.json"}
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
//
// Wire notes: requests MUST carry `A2A-Version: 1.0` (absent header is treated as 0.3 -> JSON-RPC
// error -32009 with HTTP 200), method `SendMessage`, proto-JSON params
// `{message:{messageId, role:'ROLE_USER', parts:[{text}]}, configuration:{returnImmediately:true}}`.
// With returnImmediately the answer is the first executor event: `{result:{task:{…SUBMITTED…}}}`.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DatabaseTaskStore } from '@a2a-js/sdk/server/database';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { recreateDatabase } from './recreate-database.mjs';
import { serveSdk } from './sdk-common.mjs';

const databaseUrl = process.env.BENCH_SDK_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk';
await recreateDatabase(databaseUrl);

const sdkPackage = new URL('../../node_modules/@a2a-js/sdk/package.json', import.meta.url);
const a2aDb = fileURLToPath(new URL(JSON.parse(readFileSync(sdkPackage, 'utf8')).bin['a2a-db'], sdkPackage));
execFileSync(process.execPath, [a2aDb, 'upgrade', '--url', databaseUrl], { stdio: ['ignore', 'ignore', 'inherit'] });

const db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl }) }) });

await serveSdk({
  name: 'SDK Echo Agent on Postgres (bench baseline)',
  description: 'Echoes the user text; @a2a-js/sdk server with DatabaseTaskStore',
  store: new DatabaseTaskStore(db),
  onClose: () => db.destroy(),
});
