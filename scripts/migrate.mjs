#!/usr/bin/env node
// Creates the database named in DATABASE_URL when it is missing, then applies prisma/migrations
// with the Prisma CLI (WebAssembly schema engine via the pg adapter; see prisma.config.ts).
// Usage: node scripts/migrate.mjs [--reset]   (--reset drops the database first: tests only)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { prismaEnv } from './prisma.mjs';
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

// The CLI's chatter (config loaded, schema path, each migration) is printed only when it fails or
// with MIGRATE_VERBOSE=1; otherwise one line says what was applied.
// Once the CLI has reported its result it is done, but the WebAssembly schema engine leaves a
// 10 s timer behind (its advisory-lock timeout), so the process would linger 10 s before exiting:
// it is stopped as soon as the result is printed (the migrations are committed by then, and the
// session's advisory lock is released with its connection).
const verbose = Boolean(process.env.MIGRATE_VERBOSE);
const done = /All migrations have been successfully applied\.|No pending migrations to apply\./;
const cli = spawn(process.execPath, ['node_modules/prisma/build/index.js', 'migrate', 'deploy'], {
  env: prismaEnv({ DATABASE_URL: url }),
  stdio: ['ignore', 'pipe', 'pipe'],
});
let out = '';
let err = '';
let succeeded = false;
cli.stdout.setEncoding('utf8').on('data', (d) => {
  out += d;
  if (verbose) process.stdout.write(d);
  if (!succeeded && done.test(out)) {
    succeeded = true;
    setTimeout(() => cli.kill('SIGTERM'), 100).unref();
  }
});
cli.stderr.setEncoding('utf8').on('data', (d) => {
  err += d;
  if (verbose) process.stderr.write(d);
});
const [code] = await once(cli, 'exit');
if (!succeeded && code !== 0) {
  if (!verbose) {
    process.stdout.write(out);
    process.stderr.write(err);
  }
  process.exit(code || 1);
}
const applied = out.split('\n').filter((l) => /─ \d+_\w+\/$/.test(l.trim())).length;
if (applied && !verbose) console.log(`[migrate] ${dbName}: applied ${applied} migration${applied === 1 ? '' : 's'}`);
