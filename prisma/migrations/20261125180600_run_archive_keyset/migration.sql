-- Run archives page an organization's runs by (created_at, id): the keyset of GET /v1/run-archive
CREATE INDEX "runs_org_id_created_at_id_idx" ON "runs"("org_id", "created_at", "id");
