-- A run's kind: how it answers its caller.
--   execution  a runtime executes it (dispatched through the outbox), its A2A view is a Task
--   reply      the runtime answered the message directly when it arrived (A2A: a Message, no Task),
--              recorded complete in one statement: run.created, the user's message.added and the
--              run.status_changed to completed carrying the agent's reply
-- Catalog-only on a populated table (a constant default, no rewrite): existing runs are executions.
ALTER TABLE "runs" ADD COLUMN "kind" TEXT NOT NULL DEFAULT 'execution';
ALTER TABLE "runs" ADD CONSTRAINT "runs_kind_check" CHECK ("kind" IN ('execution', 'reply')) NOT VALID;
ALTER TABLE "runs" VALIDATE CONSTRAINT "runs_kind_check";
