-- One live execution per trigger (docs/architecture.md "Execution", "The fence").
--
-- 1. The fencing token: runs.execution_epoch, an integer that only grows. An execution takes the
-- run's epoch when its dispatch is claimed, the one statement that takes an execution over (the
-- append of `run.execution_resumed`) adds one to it, and every write an execution makes (its appends,
-- its lease, failing or handing on its run) carries its epoch and is refused, in that statement,
-- when the run's is newer. Bookkeeping, not run state: no event, not archived (like the lease).
ALTER TABLE "runs" ADD COLUMN "execution_epoch" INTEGER NOT NULL DEFAULT 0;

-- 2. An operation id (a runtime's name for one of its operations, `payload.opId`) is in a run's log
-- at most once, enforced by PostgreSQL: a unique index per (org_id, run_id, opId) over the events
-- that carry one (the partitioned table's index is created on every partition, present and future,
-- it holds run_id, the partition key). An append that would record an operation a second time fails
-- with a unique violation and the append path drops the operation instead (RuntimeOperations).
-- A log that holds a duplicate already (written before this migration, by the fault this fixes)
-- would make the index impossible to build: then only the events appended from now on are indexed
-- (created_at at or after this migration), and the runs concerned are counted in a NOTICE.
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).
DO E'
DECLARE
  dup bigint\073
BEGIN
  SELECT count(DISTINCT (org_id, run_id)) INTO dup FROM (
    SELECT org_id, run_id FROM run_events WHERE payload ? ''opId''
     GROUP BY org_id, run_id, payload->>''opId'' HAVING count(*) > 1) d\073
  IF dup = 0 THEN
    CREATE UNIQUE INDEX run_events_op_id_key ON run_events (org_id, run_id, (payload->>''opId'')) WHERE payload ? ''opId''\073
  ELSE
    RAISE NOTICE ''% run(s) hold an operation id twice already: only events from now on are indexed'', dup\073
    EXECUTE format(''CREATE UNIQUE INDEX run_events_op_id_key ON run_events (org_id, run_id, (payload->>''''opId'''')) WHERE payload ? ''''opId'''' AND created_at >= %L::timestamptz'', now())\073
  END IF\073
END';
