#!/usr/bin/env node
// Times the conversion of an unpartitioned run_events into the partitioned one (migration
// 20261127110000_run_events_partitioned) on a populated database, for docs/deploy.md.
// Creates (drops first) the database named in DATABASE_URL (default aaas_convbench), applies every
// migration before the conversion, fills CONVERSION_EVENTS events (default 1,000,000) over runs of
// 10 events each with v4 run ids (as an upgraded database has them; payloads ~200 bytes), VACUUM
// ANALYZEs, then runs the conversion migration and prints the time per million events.
// Usage: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/aaas_convbench node scripts/measure-run-events-conversion.mjs
import { databaseBefore, timeMigration } from './conversion-db.mjs';

const MIGRATION = '20261127110000_run_events_partitioned';
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_convbench';
const events = Number(process.env.CONVERSION_EVENTS ?? 1_000_000);
const PER_RUN = 10;

const db = await databaseBefore(url, MIGRATION);

const runs = Math.ceil(events / PER_RUN);
const t = Date.now();
await db.query(
  `INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, status, origin_message_id, last_sequence)
   SELECT gen_random_uuid(), '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000003',
          'thread-' || g, 'completed', 'm-' || g, $2
     FROM generate_series(1, $1) g`,
  [runs, PER_RUN],
);
await db.query(
  `INSERT INTO run_events (run_id, sequence, org_id, type, payload, created_at)
   SELECT r.id, s, r.org_id, 'message.added',
          jsonb_build_object('message', jsonb_build_object('messageId', r.id::text || '-' || s, 'role', 'agent', 'parts', jsonb_build_array(jsonb_build_object('text', repeat('x', 120))))),
          now()
     FROM runs r CROSS JOIN generate_series(1, $1) s`,
  [PER_RUN],
);
await db.query('VACUUM ANALYZE runs');
await db.query('VACUUM ANALYZE run_events');
const [{ size }] = (await db.query(`SELECT pg_size_pretty(pg_total_relation_size('run_events')) AS size`)).rows;
console.log(`filled ${runs} runs, ${runs * PER_RUN} events (run_events ${size}) in ${((Date.now() - t) / 1000).toFixed(1)} s`);

const secs = await timeMigration(db, MIGRATION);
const [{ n }] = (await db.query('SELECT count(*)::int AS n FROM run_events')).rows;
console.log(`conversion: ${n} events in ${secs.toFixed(1)} s = ${((secs * 1_000_000) / n).toFixed(1)} s per million events`);
await db.end();
