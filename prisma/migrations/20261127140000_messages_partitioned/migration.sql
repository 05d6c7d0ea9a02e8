-- `messages` is partitioned by run period as run_events, artifacts and push_deliveries are
-- (migrations 20261127110000_run_events_partitioned and 20261127130000_projections_partitioned,
-- docs/architecture.md "The logs partitions"): PARTITION BY RANGE (run_id), the same periods, the
-- same bounds, partitions `messages_p<YYYYMMDD>`, a DEFAULT partition `messages_legacy` with the
-- CHECK window of `run_events_legacy`. Retention then detaches and drops an expired period of
-- messages with the others instead of deleting its rows one by one.
--
-- A partitioned table enforces a unique key only when the key holds the partition key run_id, and
-- the old key (org_id, agent_id, sent_by, message_id) made a messageId unique per sender across
-- the runs of an agent. That key moves to a narrow table that is not partitioned, `message_keys`
-- (org_id, agent_id, sent_by, message_id) to run_id and the message row id, written by the same
-- one-statement append as the message, for user messages only (sent_by other than the agent
-- sentinel `agent`). The messages of the agent itself are unique per run only, on
-- (org_id, run_id, sent_by, message_id), which holds the partition key.
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).

-- 1. The key table. Its rows are filled after the copy (step 7), its key built after them (step 8).
CREATE TABLE "message_keys" (
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "sent_by" TEXT NOT NULL,
    "message_id" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "message_row_id" UUID NOT NULL
);

-- 2. The old table steps aside. Its keys and indexes keep their names until it is dropped (step 7),
-- before the new table takes those it keeps (step 8).
ALTER TABLE "messages" RENAME TO "messages_unpartitioned";

-- 3. The partitioned table: same columns in the same order (RESTORE_SQL populates it by row type).
CREATE TABLE "messages" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "message_id" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "parts" JSONB NOT NULL,
    "metadata" JSONB,
    "extensions" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "sequence" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "reference_task_ids" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    "sent_by" TEXT NOT NULL DEFAULT ''
) PARTITION BY RANGE ("run_id");

-- 4. The tables partitioned by run period, in the order their partitions are created, detached and
-- dropped: the order the append statement names them in (run_events, then messages, then artifacts).
CREATE OR REPLACE FUNCTION run_partitioned_tables() RETURNS text[] AS E'
  SELECT ARRAY[''run_events'', ''messages'', ''artifacts'', ''push_deliveries'']
' LANGUAGE sql IMMUTABLE;

-- 5. Its partitions: the DEFAULT one with the legacy window of run_events_legacy (the same
-- constraint, so the same bounds whenever this migration runs), then one per existing run_events
-- period partition (same name suffix, same bounds), made by run_period_add_partitions, which skips
-- the tables that have theirs already. run_period_bounds (dropped at the end) reads the periods.
CREATE FUNCTION run_period_bounds() RETURNS TABLE (period text, lo uuid, hi uuid) AS E'
  SELECT substr(c.relname, length(''run_events_'') + 1),
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), ''FROM \\(''''([0-9a-f-]{36})''''\\)''))[1]::uuid,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), ''TO \\(''''([0-9a-f-]{36})''''\\)''))[1]::uuid
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = ''run_events''::regclass AND c.relname ~ ''^run_events_p[0-9]{8}$''
' LANGUAGE sql STABLE;

CREATE TABLE "messages_legacy" PARTITION OF "messages" DEFAULT;

DO E'
DECLARE
  window_check text := (SELECT pg_get_constraintdef(oid) FROM pg_constraint
                         WHERE conname = ''run_events_legacy_outside_periods'' AND conrelid = ''run_events_legacy''::regclass)\073
BEGIN
  EXECUTE format(''ALTER TABLE messages_legacy ADD CONSTRAINT messages_legacy_outside_periods %s'', window_check)\073
  PERFORM run_period_add_partitions(b.period, b.lo, b.hi) FROM run_period_bounds() b\073
END';

-- 6. Runs in the legacy window that no period covers (a period retention dropped whose runs it had
-- not yet removed when it stopped) may still have messages: the legacy window would refuse them.
-- Each such run gets a period made for it: the free range of its UTC month around it (trimmed to
-- the partitions that exist, as the service trims a plan). The gaps between the periods inside the
-- window are few, so each pass probes each gap once through the index on (run_id, sequence) rather
-- than reading every message of the window.
DO E'
DECLARE
  w text := (SELECT pg_get_constraintdef(oid) FROM pg_constraint
              WHERE conname = ''run_events_legacy_outside_periods'' AND conrelid = ''run_events_legacy''::regclass)\073
  e0 uuid := (regexp_match(w, ''run_id < ''''([0-9a-f-]{36})''''''))[1]::uuid\073
  e1 uuid := (regexp_match(w, ''run_id >= ''''([0-9a-f-]{36})''''''))[1]::uuid\073
  rid uuid\073
  m timestamptz\073
  lo uuid\073
  hi uuid\073
BEGIN
  LOOP
    WITH b AS MATERIALIZED (SELECT * FROM run_period_bounds() rb WHERE rb.hi > e0 AND rb.lo < e1),
         g AS (SELECT greatest(e0, lag(b.hi) OVER (ORDER BY b.lo)) AS glo, b.lo AS ghi FROM b
               UNION ALL SELECT e0, e1 WHERE NOT EXISTS (SELECT 1 FROM b)
               UNION ALL SELECT greatest(e0, (SELECT b.hi FROM b ORDER BY b.hi DESC LIMIT 1)), e1 WHERE EXISTS (SELECT 1 FROM b))
    SELECT x.run_id INTO rid
      FROM g CROSS JOIN LATERAL (SELECT m.run_id FROM messages_unpartitioned m
                                  WHERE m.run_id >= coalesce(g.glo, e0) AND m.run_id < g.ghi LIMIT 1) x
     WHERE coalesce(g.glo, e0) < g.ghi
     LIMIT 1\073
    EXIT WHEN rid IS NULL\073
    m := date_trunc(''month'', to_timestamp((''x'' || substr(replace(rid::text, ''-'', ''''), 1, 12))::bit(48)::bigint / 1000.0) AT TIME ZONE ''UTC'') AT TIME ZONE ''UTC''\073
    lo := greatest(run_events_bound(m), (SELECT b.hi FROM run_period_bounds() b WHERE b.hi <= rid ORDER BY b.hi DESC LIMIT 1))\073
    hi := least(run_events_bound(m + interval ''1 month''), (SELECT b.lo FROM run_period_bounds() b WHERE b.lo > rid ORDER BY b.lo LIMIT 1))\073
    IF NOT run_period_add_partitions(''p'' || to_char(to_timestamp((''x'' || substr(replace(lo::text, ''-'', ''''), 1, 12))::bit(48)::bigint / 1000.0) AT TIME ZONE ''UTC'', ''YYYYMMDD''), lo, hi) THEN
      RAISE EXCEPTION ''no period could be made for run %'', rid\073
    END IF\073
  END LOOP\073
END';

DROP FUNCTION run_period_bounds();

-- 7. Move the rows (each to the partition its run id routes to, ids kept), fill the key table from
-- the user messages (every column of the old unique key, and where the message is), then drop the
-- old table.
INSERT INTO "messages" ("id", "org_id", "agent_id", "run_id", "message_id", "role", "parts", "metadata", "extensions", "sequence", "created_at", "reference_task_ids", "sent_by")
SELECT "id", "org_id", "agent_id", "run_id", "message_id", "role", "parts", "metadata", "extensions", "sequence", "created_at", "reference_task_ids", "sent_by" FROM "messages_unpartitioned";
INSERT INTO "message_keys" ("org_id", "agent_id", "sent_by", "message_id", "run_id", "message_row_id")
SELECT "org_id", "agent_id", "sent_by", "message_id", "run_id", "id" FROM "messages_unpartitioned" WHERE "sent_by" <> 'agent';
DROP TABLE "messages_unpartitioned";

-- 8. Keys. Every key leads with org_id (the distribution column). messages: the primary key and the
-- unique key of a message in its run hold the partition key run_id, and a runs history reads the
-- index on (run_id, sequence). message_keys: the idempotency key of user messages across the runs of
-- an agent (the append fails on it, as it failed on the old unique index), its run (the cascade from
-- runs, and retention removes the keys of a dropped period by range of run id).
ALTER TABLE "messages" ADD CONSTRAINT "messages_pkey" PRIMARY KEY ("org_id", "run_id", "id");
CREATE UNIQUE INDEX "messages_org_id_run_id_sent_by_message_id_key" ON "messages"("org_id", "run_id", "sent_by", "message_id");
CREATE INDEX "messages_run_id_sequence_idx" ON "messages"("run_id", "sequence");
ALTER TABLE "messages" ADD CONSTRAINT "messages_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "message_keys" ADD CONSTRAINT "message_keys_pkey" PRIMARY KEY ("org_id", "agent_id", "sent_by", "message_id");
CREATE INDEX "message_keys_run_id_idx" ON "message_keys"("run_id");
ALTER TABLE "message_keys" ADD CONSTRAINT "message_keys_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
