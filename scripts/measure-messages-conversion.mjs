#!/usr/bin/env node
// Times the conversion of the unpartitioned `messages` into a partitioned one, with its user
// messages' keys moved to `message_keys` (migration 20261127140000_messages_partitioned), on a
// populated database, for docs/deploy.md. The sibling of measure-projections-conversion.mjs. Creates
// (drops first) the database named in DATABASE_URL (default aaas_convbench), applies every migration
// before the conversion (so run_events, artifacts and push_deliveries are partitioned already), fills
// CONVERSION_ROWS messages (default 1,000,000) over runs of 10 messages each (2 user messages of a
// keyed caller, 8 of the agent), half the runs with v7 ids of this month (its period partition) and
// half with v4 ids outside the legacy window (the DEFAULT partition), ~200-byte parts, VACUUM
// ANALYZEs, then runs the conversion and prints the time per million messages.
// Usage: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/aaas_convbench node scripts/measure-messages-conversion.mjs
import { databaseBefore, timeMigration } from './conversion-db.mjs';

const MIGRATION = '20261127140000_messages_partitioned';
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_convbench';
const rows = Number(process.env.CONVERSION_ROWS ?? 1_000_000);
const PER_RUN = 10;
const USER_PER_RUN = 2;

const db = await databaseBefore(url, MIGRATION);

const runs = Math.ceil(rows / PER_RUN);
const t = Date.now();
// even g: a v7 id of a millisecond of this month (its partition exists); odd g: a v4 id with a leading f (legacy)
await db.query(
  `INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, status, origin_message_id, last_sequence, created_by)
   SELECT CASE WHEN g % 2 = 0
               THEN (lpad(to_hex((extract(epoch FROM date_trunc('month', now())) * 1000)::bigint + g), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid
               ELSE ('f' || substr(gen_random_uuid()::text, 2))::uuid END,
          '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000003',
          'thread-' || g, 'completed', 'm-' || g || '-1', $2, 'key:k1'
     FROM generate_series(1, $1) g`,
  [runs, PER_RUN],
);
// message s of a run: the first USER_PER_RUN the caller's (sent_by its key), the rest the agent's
await db.query(
  `INSERT INTO messages (id, org_id, agent_id, run_id, message_id, sent_by, role, parts, sequence)
   SELECT gen_random_uuid(), r.org_id, r.agent_id, r.id, r.thread_id || '-' || s,
          CASE WHEN s <= $2 THEN 'key:k1' ELSE 'agent' END, CASE WHEN s <= $2 THEN 'user' ELSE 'agent' END,
          jsonb_build_array(jsonb_build_object('text', repeat('x', 180))), s
     FROM runs r CROSS JOIN generate_series(1, $1) s`,
  [PER_RUN, USER_PER_RUN],
);
for (const table of ['runs', 'messages']) await db.query(`VACUUM ANALYZE ${table}`);
const [{ m }] = (await db.query(`SELECT pg_size_pretty(pg_total_relation_size('messages')) AS m`)).rows;
console.log(`filled ${runs} runs and ${runs * PER_RUN} messages (${m}, ${runs * USER_PER_RUN} of them user messages) in ${((Date.now() - t) / 1000).toFixed(1)} s`);

const secs = await timeMigration(db, MIGRATION);
const [{ n, k }] = (await db.query('SELECT (SELECT count(*) FROM messages) AS n, (SELECT count(*) FROM message_keys) AS k')).rows;
const where = (await db.query(`SELECT tableoid::regclass::text AS p, count(*)::int AS n FROM messages GROUP BY 1 ORDER BY 1`)).rows.map((r) => `${r.p} ${r.n}`).join(', ');
console.log(`conversion: ${n} messages (${where}), ${k} message keys, in ${secs.toFixed(1)} s = ${((secs * 1_000_000) / Number(n)).toFixed(1)} s per million messages`);
await db.end();
