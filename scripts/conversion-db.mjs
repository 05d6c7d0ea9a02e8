// Shared by the conversion timing scripts (measure-run-events-conversion.mjs,
// measure-projections-conversion.mjs): a database as it was just before a migration, populated by
// the caller, then that migration timed on it.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

/**
 * (Re)create the database named in `url` (dropped first), apply every migration before `migration`
 * and insert one organization, agent and revision (ids ...0001, ...0002, ...0003). Resolves to a
 * connected client.
 */
export async function databaseBefore(url, migration) {
  const dbName = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^[A-Za-z0-9_]+$/.test(dbName)) throw new Error(`unsupported database name: ${dbName}`);
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${dbName}"`);
  await admin.end();

  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const dirs = readdirSync('prisma/migrations', { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  for (const d of dirs.filter((d) => d < migration)) await db.query(readFileSync(`prisma/migrations/${d}/migration.sql`, 'utf8'));
  await db.query(`
    INSERT INTO organizations (id, slug, name) VALUES ('00000000-0000-4000-8000-000000000001', 'bench', 'bench');
    INSERT INTO agents (id, org_id, slug, name, description, updated_at) VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'a', 'a', 'a', now());
    INSERT INTO agent_revisions (id, org_id, agent_id, number, protocol_profiles, runtime) VALUES ('00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', 1, '{}', '{}');`);
  return db;
}

/** Apply `migration` on `db`; resolves to the seconds it took. */
export async function timeMigration(db, migration) {
  const t = Date.now();
  await db.query(readFileSync(`prisma/migrations/${migration}/migration.sql`, 'utf8'));
  return (Date.now() - t) / 1000;
}
