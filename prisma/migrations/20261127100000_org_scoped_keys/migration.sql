-- Hand-written. Citus-ready keys: org_id is the distribution column of every run table, so it leads
-- every primary key and every unique key of those tables, and every foreign key between them
-- carries it ((org_id, run_id) -> runs (org_id, id)): rows of one organization are co-located and
-- every key check stays on one shard. The rules are asserted by test/schema-rules.test.ts.
-- run_events' own keys are converted by the partitioning migration, its foreign key to runs must be
-- re-pointed here only because it depends on runs_pkey, which this migration replaces.
--
-- On a populated database: replacing a primary key locks its table (ACCESS EXCLUSIVE: reads and
-- writes wait) while the new key's index is built, measured 3.5 s for 200,000 runs and 2 million
-- events (docs/deploy.md). Each ADD FOREIGN KEY is added NOT VALID (instant), then validated by a
-- scan that lets reads and writes go on. Every org_id column is already NOT NULL.

-- 1. Foreign keys that depend on the keys being replaced
ALTER TABLE "messages" DROP CONSTRAINT "messages_run_id_fkey";
ALTER TABLE "artifacts" DROP CONSTRAINT "artifacts_run_id_fkey";
ALTER TABLE "interaction_requests" DROP CONSTRAINT "interaction_requests_run_id_fkey";
ALTER TABLE "run_links" DROP CONSTRAINT "run_links_parent_run_id_fkey";
ALTER TABLE "run_links" DROP CONSTRAINT "run_links_child_run_id_fkey";
ALTER TABLE "run_dispatches" DROP CONSTRAINT "run_dispatches_run_id_fkey";
ALTER TABLE "push_configs" DROP CONSTRAINT "push_configs_run_id_fkey";
ALTER TABLE "push_deliveries" DROP CONSTRAINT "push_deliveries_config_id_fkey";
-- run_events: only its single-column foreign key (the partitioning migration may have replaced it already)
ALTER TABLE "run_events" DROP CONSTRAINT IF EXISTS "run_events_run_id_fkey";

-- 2. Primary keys: (org_id, id)
ALTER TABLE "runs" DROP CONSTRAINT "runs_pkey", ADD CONSTRAINT "runs_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "messages" DROP CONSTRAINT "messages_pkey", ADD CONSTRAINT "messages_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "artifacts" DROP CONSTRAINT "artifacts_pkey", ADD CONSTRAINT "artifacts_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "interaction_requests" DROP CONSTRAINT "interaction_requests_pkey", ADD CONSTRAINT "interaction_requests_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "run_links" DROP CONSTRAINT "run_links_pkey", ADD CONSTRAINT "run_links_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "run_dispatches" DROP CONSTRAINT "run_dispatches_pkey", ADD CONSTRAINT "run_dispatches_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "push_configs" DROP CONSTRAINT "push_configs_pkey", ADD CONSTRAINT "push_configs_pkey" PRIMARY KEY ("org_id", "id");
ALTER TABLE "push_deliveries" DROP CONSTRAINT "push_deliveries_pkey", ADD CONSTRAINT "push_deliveries_pkey" PRIMARY KEY ("org_id", "id");
-- idempotency_records: already (org_id, key)

-- 3. Unique keys: org_id first (the old ones are dropped after their replacement exists)
CREATE UNIQUE INDEX "artifacts_org_id_run_id_artifact_id_key" ON "artifacts"("org_id", "run_id", "artifact_id");
DROP INDEX "artifacts_run_id_artifact_id_key";
CREATE UNIQUE INDEX "run_links_org_id_parent_run_id_child_run_id_key" ON "run_links"("org_id", "parent_run_id", "child_run_id");
DROP INDEX "run_links_parent_run_id_child_run_id_key";
CREATE UNIQUE INDEX "run_dispatches_org_id_run_id_trigger_sequence_key" ON "run_dispatches"("org_id", "run_id", "trigger_sequence");
DROP INDEX "run_dispatches_run_id_trigger_sequence_key";
CREATE UNIQUE INDEX "push_configs_org_run_config_key" ON "push_configs"("org_id", "run_id", "config_id") WHERE "deleted_at" IS NULL;
DROP INDEX "push_configs_run_config_key";
-- runs_org_id_agent_id_owner_origin_message_id_key and messages_org_id_agent_id_sent_by_message_id_key
-- already lead with org_id

-- 3b. Plain (not unique) indexes on id where rows are looked up by id alone: runs (orgMatches()
-- keeps org_id out of the index condition on purpose, see libs/runs event-log.repository.ts, and the
-- append path joins runs by id), and the workers' claims of dispatches and push configs by id. Citus
-- allows non-unique indexes on any column. Ids never change, so updates stay HOT.
CREATE INDEX "runs_id_idx" ON "runs"("id");
CREATE INDEX "run_dispatches_id_idx" ON "run_dispatches"("id");
CREATE INDEX "push_configs_id_idx" ON "push_configs"("id");

-- 4. Foreign keys between run tables carry org_id
ALTER TABLE "messages" ADD CONSTRAINT "messages_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "artifacts" ADD CONSTRAINT "artifacts_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "interaction_requests" ADD CONSTRAINT "interaction_requests_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "run_links" ADD CONSTRAINT "run_links_org_id_parent_run_id_fkey" FOREIGN KEY ("org_id", "parent_run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "run_links" ADD CONSTRAINT "run_links_org_id_child_run_id_fkey" FOREIGN KEY ("org_id", "child_run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "run_dispatches" ADD CONSTRAINT "run_dispatches_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "push_configs" ADD CONSTRAINT "push_configs_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
ALTER TABLE "push_deliveries" ADD CONSTRAINT "push_deliveries_org_id_config_id_fkey" FOREIGN KEY ("org_id", "config_id") REFERENCES "push_configs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID;
-- (DO bodies written as E'' strings with \073 for their semicolons: the migration runner splits statements at semicolons)
-- run_events: (org_id, run_id) -> runs, unless the partitioning migration already gave it one to runs
DO E'BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = ''run_events''::regclass AND contype = ''f'' AND confrelid = ''runs''::regclass) THEN
    ALTER TABLE "run_events" ADD CONSTRAINT "run_events_org_id_run_id_fkey" FOREIGN KEY ("org_id", "run_id") REFERENCES "runs"("org_id", "id") ON DELETE CASCADE ON UPDATE CASCADE NOT VALID\073
  END IF\073
END ';

ALTER TABLE "messages" VALIDATE CONSTRAINT "messages_org_id_run_id_fkey";
ALTER TABLE "artifacts" VALIDATE CONSTRAINT "artifacts_org_id_run_id_fkey";
ALTER TABLE "interaction_requests" VALIDATE CONSTRAINT "interaction_requests_org_id_run_id_fkey";
ALTER TABLE "run_links" VALIDATE CONSTRAINT "run_links_org_id_parent_run_id_fkey";
ALTER TABLE "run_links" VALIDATE CONSTRAINT "run_links_org_id_child_run_id_fkey";
ALTER TABLE "run_dispatches" VALIDATE CONSTRAINT "run_dispatches_org_id_run_id_fkey";
ALTER TABLE "push_configs" VALIDATE CONSTRAINT "push_configs_org_id_run_id_fkey";
ALTER TABLE "push_deliveries" VALIDATE CONSTRAINT "push_deliveries_org_id_config_id_fkey";
DO E'BEGIN
  IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = ''run_events_org_id_run_id_fkey'' AND conrelid = ''run_events''::regclass AND NOT convalidated) THEN
    ALTER TABLE "run_events" VALIDATE CONSTRAINT "run_events_org_id_run_id_fkey"\073
  END IF\073
END ';
