#!/usr/bin/env node
// Creates the database named in DATABASE_URL when it is missing, then applies prisma/migrations
// with the Prisma CLI (WebAssembly schema engine via the pg adapter; see prisma.config.ts).
// Usage: node scripts/migrate.mjs [--reset]   (--reset drops the database first: tests only)
import { runPrisma } from './prisma.mjs';
import pg from 'pg';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas';
const reset = process.argv.includes('--reset');
const target = new URL(url);
const dbName = decodeURIComponent(target.pathname.slice(1));
if (!/^[A-Za-z0-9_]+$/.test(dbName)) throw new Error(`unsupported database name: ${dbName}`);
const admin = new URL(url);
admin.pathname = '/postgres';

const client = new pg.Client({ connectionString: admin.toString() });
try {
  await client.connect();
} catch (e) {
  console.error(`Cannot reach PostgreSQL at ${target.host} (${e.code ?? e.message}).`);
  console.error('Start it, e.g.: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start');
  console.error('or: docker compose up -d postgres');
  process.exit(2);
}
if (reset) await client.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${dbName}"`);
await client.end();

try {
  runPrisma(['migrate', 'deploy'], { quiet: !process.env.MIGRATE_VERBOSE, env: { DATABASE_URL: url } });
} catch (e) {
  process.exit(e.status ?? 1);
}
