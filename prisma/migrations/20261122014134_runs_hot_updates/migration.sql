-- Hand-written. Every append updates its run row (last_sequence, updated_at). With updated_at
-- indexed, each of those updates also wrote an entry into every index of runs. Index only what
-- the sweeper needs, as a partial index over active runs that names no column an append changes:
-- appends that do not change the status can then be HOT updates (no index writes), helped by
-- free space left on each page.
DROP INDEX "runs_status_updated_at_idx";

CREATE INDEX "runs_active_idx" ON "runs" ("id") WHERE "status" IN ('submitted', 'working');

ALTER TABLE "runs" SET (fillfactor = 70);
