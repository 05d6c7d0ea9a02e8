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

// Nothing pending: skip the Prisma CLI (its schema engine takes seconds to start)
if (!reset && exists.rowCount > 0) {
  const { readdirSync } = await import('node:fs');
  const shipped = readdirSync(new URL('../prisma/migrations/', import.meta.url), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  const db = new pg.Client({ connectionString: url });
  try {
    await db.connect();
    const applied = await db.query('SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL');
    const done = new Set(applied.rows.map((r) => r.migration_name));
    if (shipped.every((m) => done.has(m))) {
      await db.end();
      process.exit(0);
    }
  } catch {
    // no migrations table yet: let Prisma apply everything
  }
  await db.end().catch(() => undefined);
}

try {
  runPrisma(['migrate', 'deploy'], { quiet: !process.env.MIGRATE_VERBOSE, env: { DATABASE_URL: url } });
} catch (e) {
  process.exit(e.status ?? 1);
}
