-- Execution leases: an execution running longer than a quarter of EXECUTION_HEARTBEAT_MS renews
-- its lease on the run row every heartbeat (not indexed: the update stays HOT). The sweeper
-- fails a run whose lease for its current trigger expired. Bookkeeping of executions, not run
-- state: no event is written for it.
ALTER TABLE "runs" ADD COLUMN "lease_owner" TEXT;
ALTER TABLE "runs" ADD COLUMN "lease_trigger" INTEGER;
ALTER TABLE "runs" ADD COLUMN "lease_expires_at" TIMESTAMPTZ(3);
