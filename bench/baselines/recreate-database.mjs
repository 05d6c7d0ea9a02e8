import pg from 'pg';

/** Drop and create the database named in `databaseUrl` (bench baselines start from empty). */
export async function recreateDatabase(databaseUrl) {
  const admin = new URL(databaseUrl);
  const dbName = admin.pathname.slice(1);
  if (!/^[A-Za-z0-9_]+$/.test(dbName)) throw new Error(`unsupported database name: ${dbName}`);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await c.query(`CREATE DATABASE "${dbName}"`);
  await c.end();
}
