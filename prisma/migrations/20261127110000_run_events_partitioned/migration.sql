-- run_events becomes a declaratively partitioned table: PARTITION BY RANGE (run_id), one partition per
-- period (docs/architecture.md "The logs partitions"). Run ids are UUIDv7 (libs/runs/src/run-id.ts):
-- their first 48 bits are the creation time in ms, so a runs whole log lands in the partition of the
-- period its run was created in. A periods partition is `run_events_p<YYYYMMDD>` (the periods first
-- UTC day), bounds FROM the UUIDv7 of the periods first millisecond TO the next periods.
--
-- Legacy rows (v4 run ids of an upgraded database, or of an imported archive) whose id falls in no
-- periods range live in the DEFAULT partition `run_events_legacy`. Its CHECK constraint
-- `run_events_legacy_outside_periods` says it holds no id in [E0, E1) (E0: the first ms of the UTC
-- month this migration ran in, E1: E0 + 10 years): PostgreSQL then proves a new period partition in
-- that window cannot take rows from the default one and skips the scan of it (a populated default
-- would otherwise be scanned under an ACCESS EXCLUSIVE lock at each partitions creation). A v4 id
-- is random, so ~0.1 % of legacy ids fall in that window by chance: they go to the period partitions
-- of their "time", which this migration creates for them (at most the 120 months of the window).
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).

-- 1. runs must be unique on exactly (org_id, id) for the composite foreign key (org_id first: the
-- Citus-ready key). Another migration may have made it runs’ primary key already.
DO E'
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM pg_index i
     WHERE i.indrelid = ''runs''::regclass AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
       AND i.indnatts = 2
       AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a
             WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY[''id'', ''org_id'']) THEN
    ALTER TABLE runs ADD CONSTRAINT runs_org_id_id_key UNIQUE (org_id, id)\073
  END IF\073
END';

-- 2. The old table steps aside. Its keys, indexes and triggers keep their names until it is dropped
-- (step 5), before the new table takes those names (step 6), whatever earlier migrations made them.
ALTER TABLE "run_events" RENAME TO "run_events_unpartitioned";

-- 3. The partitioned table: same columns in the same order (RESTORE_SQL populates it by row type).
-- Its primary key and foreign key come after the rows are in (one index build per partition).
CREATE TABLE "run_events" (
    "run_id" UUID NOT NULL,
    "sequence" INTEGER NOT NULL,
    "org_id" UUID NOT NULL,
    "type" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY RANGE ("run_id");

-- The UPDATE guard: a row trigger on the partitioned table is cloned to every partition, present and future.
CREATE TRIGGER run_events_append_only
  BEFORE UPDATE ON run_events
  FOR EACH ROW EXECUTE FUNCTION run_events_append_only();

-- The DELETE guard is a statement trigger: those fire only on the table a statement names, so every
-- partition gets its own (a DELETE naming a partition is refused as one naming run_events is).
CREATE TRIGGER run_events_delete_guard
  BEFORE DELETE ON run_events
  FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete_guard();

-- Creates the partition `p_name` for run ids [p_from, p_to) with its DELETE guard, false when a
-- relation of that name exists already (idempotent). The one way partitions are made: this migration
-- and the services maintenance (RunEventPartitionsRepository) call it.
CREATE FUNCTION run_events_add_partition(p_name text, p_from uuid, p_to uuid) RETURNS boolean AS E'
BEGIN
  IF to_regclass(p_name) IS NOT NULL THEN
    RETURN false\073
  END IF\073
  EXECUTE format(''CREATE TABLE %I PARTITION OF run_events FOR VALUES FROM (%L) TO (%L)'', p_name, p_from, p_to)\073
  EXECUTE format(''CREATE TRIGGER run_events_delete_guard BEFORE DELETE ON %I FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete_guard()'', p_name)\073
  RETURN true\073
END'
 LANGUAGE plpgsql;

-- The UUIDv7 lower bound of a UTC time (its first 48 bits = Unix ms, the rest zero).
CREATE FUNCTION run_events_bound(t timestamptz) RETURNS uuid AS E'
  SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, ''0'') || ''00000000000000000000'')::uuid
' LANGUAGE sql IMMUTABLE;

CREATE TABLE "run_events_legacy" PARTITION OF "run_events" DEFAULT;
CREATE TRIGGER run_events_delete_guard
  BEFORE DELETE ON run_events_legacy
  FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete_guard();

-- 4. Period partitions (months here, the service keeps RUN_EVENTS_PARTITIONS_AHEAD periods of its
-- RUN_EVENTS_PARTITION_INTERVAL ahead): this month, the next two, and every month of the window that
-- holds a legacy run id, then the legacy partitions window constraint (on an empty table: instant).
DO E'
DECLARE
  e0 timestamptz := date_trunc(''month'', now() AT TIME ZONE ''UTC'') AT TIME ZONE ''UTC''\073
  e1 timestamptz := e0 + interval ''10 years''\073
  m timestamptz\073
BEGIN
  FOR m IN
    SELECT e0 + make_interval(months => k) FROM generate_series(0, 2) AS k
    UNION
    SELECT DISTINCT date_trunc(''month'', to_timestamp((''x'' || substr(replace(id::text, ''-'', ''''), 1, 12))::bit(48)::bigint / 1000.0) AT TIME ZONE ''UTC'') AT TIME ZONE ''UTC''
      FROM runs WHERE id >= run_events_bound(e0) AND id < run_events_bound(e1)
  LOOP
    PERFORM run_events_add_partition(''run_events_p'' || to_char(m AT TIME ZONE ''UTC'', ''YYYYMMDD''),
                                     run_events_bound(m), run_events_bound(m + interval ''1 month''))\073
  END LOOP\073
  EXECUTE format(''ALTER TABLE run_events_legacy ADD CONSTRAINT run_events_legacy_outside_periods CHECK (run_id < %L::uuid OR run_id >= %L::uuid)'',
                 run_events_bound(e0), run_events_bound(e1))\073
END';

-- 5. Move the rows (each to the partition its run id routes to), then drop the old table.
INSERT INTO "run_events" ("run_id", "sequence", "org_id", "type", "payload", "created_at")
SELECT "run_id", "sequence", "org_id", "type", "payload", "created_at" FROM "run_events_unpartitioned";
DROP TABLE "run_events_unpartitioned";

-- 6. Keys. The primary key leads with org_id (the distribution column), then the run (the partition
-- key) and its sequence: a runs log is one index range in one partition.
ALTER TABLE "run_events" ADD CONSTRAINT "run_events_pkey" PRIMARY KEY ("org_id", "run_id", "sequence");
ALTER TABLE "run_events" ADD CONSTRAINT "run_events_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
