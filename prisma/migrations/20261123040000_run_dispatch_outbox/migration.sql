-- Transactional outbox of run dispatches: the statement that creates or continues a run inserts
-- the `run.execute` job it needs here, in the same transaction. A relay in every API process moves
-- pending rows to BullMQ (job id <run_id>-<trigger_sequence>) and deletes them once enqueued.
CREATE TABLE "run_dispatches" (
    "id" BIGSERIAL NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "trigger_sequence" INTEGER NOT NULL,
    "job" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "run_dispatches_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "run_dispatches_run_id_trigger_sequence_key" ON "run_dispatches"("run_id", "trigger_sequence");

ALTER TABLE "run_dispatches" ADD CONSTRAINT "run_dispatches_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
