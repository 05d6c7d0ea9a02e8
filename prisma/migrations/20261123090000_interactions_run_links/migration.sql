-- InteractionRequest as a full object: blocking or not (a non-blocking one sets no blocked_reason),
-- an expiry and the outcome the runtime declared for it. Status: open, resolved, rejected,
-- expired or canceled. The whole request and response stay in request / response for audit.
ALTER TABLE "interaction_requests" ADD COLUMN "blocking" BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE "interaction_requests" ADD COLUMN "expires_at" TIMESTAMPTZ(3);
ALTER TABLE "interaction_requests" ALTER COLUMN "blocked_reason" DROP NOT NULL;
CREATE INDEX "interaction_requests_open_expiry_idx" ON "interaction_requests"("expires_at") WHERE "status" = 'open' AND "expires_at" IS NOT NULL;

-- RunLink: whether the parent awaits the child (the child's settlement dispatches the parent)
-- and the parent's sequence of its run.linked event. Child lookups (status mirrored to the
-- parent on every change of the child) need the child index.
ALTER TABLE "run_links" ADD COLUMN "awaiting" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "run_links" ADD COLUMN "sequence" INTEGER NOT NULL DEFAULT 0;
CREATE INDEX "run_links_child_run_id_idx" ON "run_links"("child_run_id");

-- Messages keep their referenceTaskIds (a delegation notice names its child task there), so
-- history reads tell the same story as the log.
ALTER TABLE "messages" ADD COLUMN "reference_task_ids" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[];

-- Guards for the interaction overlay that live on the run row (a concurrent append re-checks
-- them under the row lock, which a subquery on interaction_requests would not see):
-- how many interactions are open, and a version bumped by every interaction event.
ALTER TABLE "runs" ADD COLUMN "open_interactions" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "runs" ADD COLUMN "interaction_version" INTEGER NOT NULL DEFAULT 0;
