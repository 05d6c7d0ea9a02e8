-- Dispatches are claimed (deleted) by the worker that executes them, no longer by the relay that
-- enqueued them: a row lives while its execution is queued. relayed_at is when the relay's safety
-- net last handed the row to the queue again (NULL: only the fast path did)
ALTER TABLE "run_dispatches" ADD COLUMN "relayed_at" TIMESTAMPTZ(3);
