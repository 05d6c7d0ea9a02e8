-- The projections that grow with the log are partitioned as run_events is (migration
-- 20261127110000_run_events_partitioned, docs/architecture.md "The logs partitions"): `artifacts`
-- and `push_deliveries` become PARTITION BY RANGE (run_id), with the same periods, the same bounds
-- and the same names per table (`artifacts_p<YYYYMMDD>`, `push_deliveries_p<YYYYMMDD>`), and a DEFAULT
-- partition `<table>_legacy` with the same CHECK window as `run_events_legacy`. A period is created
-- for every partitioned table at once (function run_period_add_partitions) and retention detaches and
-- drops the period of every table at once, so an expired period leaves with no row-by-row DELETE.
--
-- `messages` stays unpartitioned: its unique key (org_id, agent_id, sent_by, message_id) makes a
-- messageId unique per sender across the runs of an agent, and a partitioned table cannot have a
-- unique key without its partition key run_id (docs/architecture.md "The logs partitions" says why
-- that key must stay global).
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).

-- 1. The tables partitioned by run period, in the order their partitions are created, detached and
-- dropped (the order every writer locks them in: the append statement names run_events first).
CREATE FUNCTION run_partitioned_tables() RETURNS text[] AS E'
  SELECT ARRAY[''run_events'', ''artifacts'', ''push_deliveries'']
' LANGUAGE sql IMMUTABLE;

-- 2. The one way periods are made: the partition `<table>_<p_period>` of every partitioned table for
-- run ids [p_from, p_to) where it does not exist yet (idempotent), with the DELETE guard on the
-- run_events one (the UPDATE guard is inherited). True when it created any. It replaces
-- run_events_add_partition (which made the run_events one only).
CREATE FUNCTION run_period_add_partitions(p_period text, p_from uuid, p_to uuid) RETURNS boolean AS E'
DECLARE
  t text\073
  created boolean := false\073
BEGIN
  IF p_period !~ ''^p[0-9]{8}$'' THEN
    RAISE EXCEPTION ''a period is named p<YYYYMMDD>, not %'', p_period\073
  END IF\073
  FOREACH t IN ARRAY run_partitioned_tables() LOOP
    CONTINUE WHEN to_regclass(t || ''_'' || p_period) IS NOT NULL\073
    EXECUTE format(''CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)'', t || ''_'' || p_period, t, p_from, p_to)\073
    IF t = ''run_events'' THEN
      EXECUTE format(''CREATE TRIGGER run_events_delete_guard BEFORE DELETE ON %I FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete_guard()'', t || ''_'' || p_period)\073
    END IF\073
    created := true\073
  END LOOP\073
  RETURN created\073
END'
 LANGUAGE plpgsql;

DROP FUNCTION run_events_add_partition(text, uuid, uuid);

-- 3. The old tables step aside. Their keys and indexes keep their names until they are dropped
-- (step 7), before the new tables take those names (step 8). The id sequence of push_deliveries is
-- detached from its old table first, or dropping that table would drop it.
ALTER TABLE "artifacts" RENAME TO "artifacts_unpartitioned";
ALTER TABLE "push_deliveries" RENAME TO "push_deliveries_unpartitioned";
ALTER SEQUENCE "push_deliveries_id_seq" OWNED BY NONE;

-- 4. The partitioned tables: same columns in the same order (RESTORE_SQL populates artifacts by row type).
CREATE TABLE "artifacts" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "artifact_id" TEXT NOT NULL,
    "name" TEXT,
    "description" TEXT,
    "parts" JSONB NOT NULL,
    "metadata" JSONB,
    "extensions" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "complete" BOOLEAN NOT NULL DEFAULT false,
    "sequence" INTEGER NOT NULL,
    "updated_sequence" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY RANGE ("run_id");

CREATE TABLE "push_deliveries" (
    "id" BIGINT NOT NULL DEFAULT nextval('push_deliveries_id_seq'),
    "config_id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "sequence" INTEGER NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "status_code" INTEGER,
    "error" TEXT,
    "latency_ms" INTEGER NOT NULL,
    "attempted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY RANGE ("run_id");
ALTER SEQUENCE "push_deliveries_id_seq" OWNED BY "push_deliveries"."id";

-- 5. Their partitions: the DEFAULT ones with the legacy window of run_events_legacy (the same
-- constraint, so the same bounds whenever this migration runs), then one per existing run_events
-- period partition (same name suffix, same bounds). run_period_bounds (dropped at the end) reads the
-- periods from the catalog.
CREATE FUNCTION run_period_bounds() RETURNS TABLE (period text, lo uuid, hi uuid) AS E'
  SELECT substr(c.relname, length(''run_events_'') + 1),
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), ''FROM \\(''''([0-9a-f-]{36})''''\\)''))[1]::uuid,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), ''TO \\(''''([0-9a-f-]{36})''''\\)''))[1]::uuid
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = ''run_events''::regclass AND c.relname ~ ''^run_events_p[0-9]{8}$''
' LANGUAGE sql STABLE;

CREATE TABLE "artifacts_legacy" PARTITION OF "artifacts" DEFAULT;
CREATE TABLE "push_deliveries_legacy" PARTITION OF "push_deliveries" DEFAULT;

DO E'
DECLARE
  window_check text := (SELECT pg_get_constraintdef(oid) FROM pg_constraint
                         WHERE conname = ''run_events_legacy_outside_periods'' AND conrelid = ''run_events_legacy''::regclass)\073
BEGIN
  EXECUTE format(''ALTER TABLE artifacts_legacy ADD CONSTRAINT artifacts_legacy_outside_periods %s'', window_check)\073
  EXECUTE format(''ALTER TABLE push_deliveries_legacy ADD CONSTRAINT push_deliveries_legacy_outside_periods %s'', window_check)\073
  PERFORM run_period_add_partitions(b.period, b.lo, b.hi) FROM run_period_bounds() b\073
END';

-- 6. Runs in the legacy window that no period covers (a period retention dropped whose runs it had
-- not yet removed when it stopped) may still have artifacts or deliveries: their rows would be
-- refused by the legacy window. Each such run gets a period made for it: the free range of its UTC
-- month around it (trimmed to the partitions that exist, as the service trims a plan).
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
    WITH b AS MATERIALIZED (SELECT * FROM run_period_bounds())
    SELECT x.run_id INTO rid FROM (
             SELECT run_id FROM artifacts_unpartitioned WHERE run_id >= e0 AND run_id < e1
             UNION ALL SELECT run_id FROM push_deliveries_unpartitioned WHERE run_id >= e0 AND run_id < e1) x
     WHERE NOT EXISTS (SELECT 1 FROM b WHERE x.run_id >= b.lo AND x.run_id < b.hi)
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

-- 7. Move the rows (each to the partition its run id routes to, ids kept), then drop the old tables.
INSERT INTO "artifacts" ("id", "org_id", "run_id", "artifact_id", "name", "description", "parts", "metadata", "extensions", "complete", "sequence", "updated_sequence", "created_at")
SELECT "id", "org_id", "run_id", "artifact_id", "name", "description", "parts", "metadata", "extensions", "complete", "sequence", "updated_sequence", "created_at" FROM "artifacts_unpartitioned";
INSERT INTO "push_deliveries" ("id", "config_id", "org_id", "run_id", "sequence", "webhook_id", "status_code", "error", "latency_ms", "attempted_at")
SELECT "id", "config_id", "org_id", "run_id", "sequence", "webhook_id", "status_code", "error", "latency_ms", "attempted_at" FROM "push_deliveries_unpartitioned";
DROP TABLE "artifacts_unpartitioned";
DROP TABLE "push_deliveries_unpartitioned";

-- 8. Keys. Every key leads with org_id (the distribution column) and holds the partition key run_id.
-- artifacts: the append paths ON CONFLICT (org_id, run_id, artifact_id) finds its unique index.
-- push_deliveries: a delivery names its config (org_id, config_id), and the history of a config
-- pages by (config_id, id DESC), one index range per partition.
ALTER TABLE "artifacts" ADD CONSTRAINT "artifacts_pkey" PRIMARY KEY ("org_id", "run_id", "id");
CREATE UNIQUE INDEX "artifacts_org_id_run_id_artifact_id_key" ON "artifacts"("org_id", "run_id", "artifact_id");
ALTER TABLE "artifacts" ADD CONSTRAINT "artifacts_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE "push_deliveries" ADD CONSTRAINT "push_deliveries_pkey" PRIMARY KEY ("org_id", "run_id", "id");
CREATE INDEX "push_deliveries_config_id_id_idx" ON "push_deliveries"("config_id", "id" DESC);
ALTER TABLE "push_deliveries" ADD CONSTRAINT "push_deliveries_org_id_config_id_fkey" FOREIGN KEY ("org_id", "config_id") REFERENCES "push_configs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
