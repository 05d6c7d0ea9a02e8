#!/usr/bin/env node
// Times the conversion of unpartitioned `artifacts` and `push_deliveries` into partitioned ones
// (migration 20261127130000_projections_partitioned) on a populated database, for docs/deploy.md.
// The sibling of measure-run-events-conversion.mjs. Creates (drops first) the database named in
// DATABASE_URL (default aaas_convbench), applies every migration before the conversion (so run_events
// is partitioned already), fills CONVERSION_ROWS rows in each table (default 1,000,000) over runs of
// 10 artifacts and 10 deliveries each (one push config per run), half the runs with v7 ids of this
// month (its period partition) and half with v4 ids outside the legacy window (the DEFAULT
// partition), ~200-byte artifact parts, VACUUM ANALYZEs, then runs the conversion and prints the
// time per million rows (both tables together).
// Usage: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/aaas_convbench node scripts/measure-projections-conversion.mjs
import { databaseBefore, timeMigration } from './conversion-db.mjs';

const MIGRATION = '20261127130000_projections_partitioned';
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_convbench';
const rowsPerTable = Number(process.env.CONVERSION_ROWS ?? 1_000_000);
const PER_RUN = 10;

const db = await databaseBefore(url, MIGRATION);

const runs = Math.ceil(rowsPerTable / PER_RUN);
const t = Date.now();
// even g: a v7 id of a millisecond of this month (its partition exists); odd g: a v4 id with a leading f (legacy)
await db.query(
  `INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, status, origin_message_id, last_sequence)
   SELECT CASE WHEN g % 2 = 0
               THEN (lpad(to_hex((extract(epoch FROM date_trunc('month', now())) * 1000)::bigint + g), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid
               ELSE ('f' || substr(gen_random_uuid()::text, 2))::uuid END,
          '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000003',
          'thread-' || g, 'completed', 'm-' || g, 0
     FROM generate_series(1, $1) g`,
  [runs],
);
await db.query(
  `INSERT INTO artifacts (id, org_id, run_id, artifact_id, name, parts, complete, sequence, updated_sequence)
   SELECT gen_random_uuid(), r.org_id, r.id, 'a' || s, 'out', jsonb_build_array(jsonb_build_object('text', repeat('x', 180))), true, s, s
     FROM runs r CROSS JOIN generate_series(1, $1) s`,
  [PER_RUN],
);
await db.query(
  `INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, webhook_secret)
   SELECT gen_random_uuid(), org_id, id, agent_id, 'c1', '1.0', 'https://example.com/hook', 'x' FROM runs`,
);
await db.query(
  `INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, latency_ms)
   SELECT c.id, c.org_id, c.run_id, s, 'msg_' || s, 200, 3 FROM push_configs c CROSS JOIN generate_series(1, $1) s`,
  [PER_RUN],
);
for (const table of ['runs', 'artifacts', 'push_configs', 'push_deliveries']) await db.query(`VACUUM ANALYZE ${table}`);
const [{ a, d }] = (await db.query(`SELECT pg_size_pretty(pg_total_relation_size('artifacts')) AS a, pg_size_pretty(pg_total_relation_size('push_deliveries')) AS d`)).rows;
console.log(`filled ${runs} runs, ${runs * PER_RUN} artifacts (${a}) and ${runs * PER_RUN} push deliveries (${d}) in ${((Date.now() - t) / 1000).toFixed(1)} s`);

const secs = await timeMigration(db, MIGRATION);
const [{ n }] = (await db.query('SELECT (SELECT count(*) FROM artifacts) + (SELECT count(*) FROM push_deliveries) AS n')).rows;
const where = (await db.query(`SELECT tableoid::regclass::text AS p, count(*)::int AS n FROM artifacts GROUP BY 1 ORDER BY 1`)).rows.map((r) => `${r.p} ${r.n}`).join(', ');
console.log(`conversion: ${n} rows (artifacts: ${where}) in ${secs.toFixed(1)} s = ${((secs * 1_000_000) / Number(n)).toFixed(1)} s per million rows`);
await db.end();
