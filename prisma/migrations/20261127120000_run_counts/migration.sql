-- run_counts: how many runs each (org, agent, kind, creator, status, blocked reason) has, so that
-- ListTasks’ totalSize (A2A v1.0 §3.1.4, REQUIRED) costs the same with 40 runs or 40 million
-- (docs/architecture.md "Counting runs"). It is a projection of `runs`, kept by PostgreSQL in the
-- transaction that changes them: triggers append signed deltas (+n for inserted runs, -n for
-- deleted ones, -1/+1 when a run’s status or blocked reason changes), never update a shared row (no
-- hot row between concurrent writers). A key’s count is the sum of its rows. The worker folds
-- deltas into one row per key (`folded`) every RUN_COUNTS_FOLD_MS (libs/runs run-counts.ts).
-- org_id leads (the Citus distribution column, test/schema-rules.test.ts). No foreign key: a
-- deleted organization’s runs leave -n rows that fold to nothing.
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).
CREATE TABLE "run_counts" (
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "created_by" TEXT,
    "status" "run_status" NOT NULL,
    "blocked_reason" TEXT,
    "n" BIGINT NOT NULL,
    "folded" BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX "run_counts_org_id_agent_id_idx" ON "run_counts"("org_id", "agent_id");
CREATE INDEX "run_counts_unfolded_idx" ON "run_counts"("org_id") WHERE NOT "folded";

-- Runs created (one statement may create many: group commit, archive import): one row per key and statement.
CREATE FUNCTION run_counts_inserted() RETURNS trigger AS E'
BEGIN
  INSERT INTO run_counts (org_id, agent_id, kind, created_by, status, blocked_reason, n)
    SELECT org_id, agent_id, kind, created_by, status, blocked_reason, count(*) FROM inserted GROUP BY 1, 2, 3, 4, 5, 6\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- Runs removed (retention, an agent or organization deleted): one row per key and statement.
CREATE FUNCTION run_counts_deleted() RETURNS trigger AS E'
BEGIN
  INSERT INTO run_counts (org_id, agent_id, kind, created_by, status, blocked_reason, n)
    SELECT org_id, agent_id, kind, created_by, status, blocked_reason, -count(*) FROM deleted GROUP BY 1, 2, 3, 4, 5, 6\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- A run moved from one key to another (a status change, an interaction opened or closed).
CREATE FUNCTION run_counts_moved() RETURNS trigger AS E'
BEGIN
  INSERT INTO run_counts (org_id, agent_id, kind, created_by, status, blocked_reason, n) VALUES
    (OLD.org_id, OLD.agent_id, OLD.kind, OLD.created_by, OLD.status, OLD.blocked_reason, -1),
    (NEW.org_id, NEW.agent_id, NEW.kind, NEW.created_by, NEW.status, NEW.blocked_reason, 1)\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

-- The triggers and the counts of the runs already there, under one lock on runs (no run is
-- written meanwhile, so none is counted twice or missed).
DO E'
BEGIN
  LOCK TABLE runs IN SHARE ROW EXCLUSIVE MODE\073
  CREATE TRIGGER run_counts_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION run_counts_inserted()\073
  CREATE TRIGGER run_counts_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION run_counts_deleted()\073
  CREATE TRIGGER run_counts_moved AFTER UPDATE ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.blocked_reason IS DISTINCT FROM NEW.blocked_reason
       OR OLD.agent_id IS DISTINCT FROM NEW.agent_id OR OLD.kind IS DISTINCT FROM NEW.kind
       OR OLD.created_by IS DISTINCT FROM NEW.created_by OR OLD.org_id IS DISTINCT FROM NEW.org_id)
    EXECUTE FUNCTION run_counts_moved()\073
  INSERT INTO run_counts (org_id, agent_id, kind, created_by, status, blocked_reason, n, folded)
    SELECT org_id, agent_id, kind, created_by, status, blocked_reason, count(*), true FROM runs GROUP BY 1, 2, 3, 4, 5, 6\073
END';
