-- org_storage: the bytes an organization stores (the sum of its runs' stored_bytes), known cheaply
-- enough for the append statement to enforce the storage quota on what agents write
-- (docs/architecture.md "The event log and its invariants", invariant 6, and docs/deploy.md
-- "Storage quotas"). Before, the total was a sum over every run of the organization, read by each
-- process at most every 2 s, and agents' output was counted but never refused.
--
-- Like run_counts, it is a projection of `runs` kept by PostgreSQL in the transaction that changes
-- them, as signed delta rows, never an update of a shared row (no hot row between concurrent
-- writers): +sum for inserted runs (group-committed creations, archive imports), -sum for deleted
-- ones (retention, a removed agent or organization), and +delta for a run whose stored_bytes grew
-- (the append statement, or any other writer: the trigger counts every one, a release still running
-- during a rollout included). An organization's stored bytes are the sum of its rows, exact at every
-- snapshot. The worker folds them into one row per organization (libs/runs storage-fold.ts) so the
-- sum stays a few rows. org_id leads (the Citus distribution column). No foreign key: a deleted
-- organization's runs leave -n rows that fold to nothing.
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).
CREATE TABLE "org_storage" (
    "org_id" UUID NOT NULL,
    "bytes" BIGINT NOT NULL,
    "folded" BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX "org_storage_org_id_idx" ON "org_storage"("org_id") INCLUDE ("bytes");
CREATE INDEX "org_storage_unfolded_idx" ON "org_storage"("org_id") WHERE NOT "folded";

-- Runs created (one statement may create many): one row per organization and statement.
CREATE FUNCTION org_storage_runs_inserted() RETURNS trigger AS E'
BEGIN
  INSERT INTO org_storage (org_id, bytes)
    SELECT org_id, sum(stored_bytes) FROM inserted GROUP BY org_id HAVING sum(stored_bytes) <> 0\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- Runs removed: one row per organization and statement.
CREATE FUNCTION org_storage_runs_deleted() RETURNS trigger AS E'
BEGIN
  INSERT INTO org_storage (org_id, bytes)
    SELECT org_id, -sum(stored_bytes) FROM deleted GROUP BY org_id HAVING sum(stored_bytes) <> 0\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- A run's stored bytes changed (the append path adds what each append writes).
CREATE FUNCTION org_storage_run_grew() RETURNS trigger AS E'
BEGIN
  INSERT INTO org_storage (org_id, bytes) VALUES (NEW.org_id, NEW.stored_bytes - OLD.stored_bytes)\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- The triggers and the totals of the runs already there, under one lock on runs (no run is
-- written meanwhile, so no byte is counted twice or missed).
DO E'
BEGIN
  LOCK TABLE runs IN SHARE ROW EXCLUSIVE MODE\073
  CREATE TRIGGER org_storage_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION org_storage_runs_inserted()\073
  CREATE TRIGGER org_storage_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION org_storage_runs_deleted()\073
  CREATE TRIGGER org_storage_grew AFTER UPDATE OF stored_bytes ON runs FOR EACH ROW
    WHEN (OLD.stored_bytes IS DISTINCT FROM NEW.stored_bytes)
    EXECUTE FUNCTION org_storage_run_grew()\073
  INSERT INTO org_storage (org_id, bytes, folded)
    SELECT org_id, sum(stored_bytes), true FROM runs GROUP BY org_id HAVING sum(stored_bytes) <> 0\073
END';
