// Baseline: the official @a2a-js/sdk v1.0 server with its DatabaseTaskStore on PostgreSQL
// (express + JSON-RPC, Kysely over pg). The store's `tasks` table is (re)created in the database of
// BENCH_SDK_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk) at start,
// with the columns and indexes of the SDK's own migration (src/cli/task/migrations/0001_create_tasks).
//
// Child process, started by bench/baselines/sdk-in-memory.ts. Listens on 127.0.0.1:<random> and
// prints ONE JSON line on stdout:
//   {"ready":true,"url":"http://127.0.0.1:PORT/a2a/jsonrpc","restUrl":".../a2a/rest","cardUrl":".../.well-known/agent-card.json"}
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
//
// Wire notes (see /tmp/sdk-notes.md): requests MUST carry `A2A-Version: 1.0` (absent header is
// treated as 0.3 -> JSON-RPC error -32009 with HTTP 200), method `SendMessage`, proto-JSON params
// `{message:{messageId, role:'ROLE_USER', parts:[{text}]}, configuration:{returnImmediately:true}}`.
// With returnImmediately the answer is the first executor event: `{result:{task:{…SUBMITTED…}}}`.
import { DatabaseTaskStore } from '@a2a-js/sdk/server/database';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { recreateDatabase } from './recreate-database.mjs';
import { serveSdk } from './sdk-common.mjs';

const databaseUrl = process.env.BENCH_SDK_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk';
await recreateDatabase(databaseUrl);
const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.BENCH_POOL_MAX ?? 20) });
await pool.query(`CREATE TABLE tasks (
  tenant varchar(255) collate "C" NOT NULL, owner varchar(255) collate "C" NOT NULL, id varchar(36) collate "C" NOT NULL,
  context_id varchar(36) collate "C" NOT NULL, status_last_updated bigint NOT NULL, status_state varchar(255) collate "C",
  status text, artifacts text, history text, metadata text, protocol_version varchar(255),
  CONSTRAINT tasks_pkey PRIMARY KEY (tenant, owner, id))`);
await pool.query('CREATE INDEX tasks_scope_updated_idx ON tasks (tenant, owner, status_last_updated, id)');
await pool.query('CREATE INDEX tasks_scope_context_updated_idx ON tasks (tenant, owner, context_id, status_last_updated, id)');

await serveSdk({
  name: 'SDK Echo Agent on Postgres (bench baseline)',
  description: 'Echoes the user text; @a2a-js/sdk server with DatabaseTaskStore',
  store: new DatabaseTaskStore(new Kysely({ dialect: new PostgresDialect({ pool }) })),
  onClose: () => pool.end(),
});
