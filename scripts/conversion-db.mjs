// Shared by the conversion timing scripts (measure-run-events-conversion.mjs,
// measure-projections-conversion.mjs) and the tests (test/run-events-partitions.test.ts; test/run-archive.test.ts drops its import database with it):
// a database as it was just before a migration, populated by the caller, then that migration timed on it.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

/** Drop the database named in `url` (forcing its connections out), if it exists. */
export async function dropDatabase(url) {
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${databaseName(url)}" WITH (FORCE)`);
  await admin.end();
}

/**
 * (Re)create the database named in `url` (dropped first), apply every migration before `migration`
 * and, unless `seed` is false, insert one organization, agent and revision (ids ...0001, ...0002,
 * ...0003). Resolves to a connected client. Also used by test/run-events-partitions.test.ts.
 */
export async function databaseBefore(url, migration, { seed = true } = {}) {
  await dropDatabase(url);
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${databaseName(url)}"`);
  await admin.end();

  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const dirs = readdirSync('prisma/migrations', { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  for (const d of dirs.filter((d) => d < migration)) await db.query(readFileSync(`prisma/migrations/${d}/migration.sql`, 'utf8'));
  if (!seed) return db;
  await db.query(`
    INSERT INTO organizations (id, slug, name) VALUES ('00000000-0000-4000-8000-000000000001', 'bench', 'bench');
    INSERT INTO agents (id, org_id, slug, name, description, updated_at) VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'a', 'a', 'a', now());
    INSERT INTO agent_revisions (id, org_id, agent_id, number, protocol_profiles, runtime) VALUES ('00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', 1, '{}', '{}');`);
  return db;
}

/** The database name of a PostgreSQL URL (letters, digits and underscores only). */
function databaseName(url) {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error(`unsupported database name: ${name}`);
  return name;
}

/** Apply `migration` on `db`; resolves to the seconds it took. */
export async function timeMigration(db, migration) {
  const t = Date.now();
  await db.query(readFileSync(`prisma/migrations/${migration}/migration.sql`, 'utf8'));
  return (Date.now() - t) / 1000;
}
