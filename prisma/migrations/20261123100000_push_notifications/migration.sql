-- Push notification configs (A2A TaskPushNotificationConfig) and their delivery state. Not run
-- state: a config is a subscription to a run's event log, with its own delivery cursor (the
-- last sequence delivered). Secrets (authentication credentials, the Standard Webhooks signing
-- secret) are stored encrypted.
CREATE TABLE "push_configs" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "config_id" TEXT NOT NULL,
    "protocol_version" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "token" TEXT,
    "auth_scheme" TEXT,
    "auth_credentials" TEXT,
    "webhook_secret" TEXT NOT NULL,
    "secret_revealed" BOOLEAN NOT NULL DEFAULT false,
    "created_by" TEXT,
    "status" TEXT NOT NULL DEFAULT 'active',
    "cursor" INTEGER NOT NULL DEFAULT 0,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "first_failure_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "lease_owner" TEXT,
    "lease_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),
    CONSTRAINT "push_configs_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "push_configs_run_config_key" ON "push_configs"("run_id", "config_id") WHERE "deleted_at" IS NULL;
CREATE INDEX "push_configs_due_idx" ON "push_configs"("next_attempt_at") WHERE "deleted_at" IS NULL AND "status" = 'active';
CREATE INDEX "push_configs_org_id_idx" ON "push_configs"("org_id");
ALTER TABLE "push_configs" ADD CONSTRAINT "push_configs_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Every delivery attempt (status, latency, error), newest kept per config for the admin API.
CREATE TABLE "push_deliveries" (
    "id" BIGSERIAL NOT NULL,
    "config_id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "sequence" INTEGER NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "status_code" INTEGER,
    "error" TEXT,
    "latency_ms" INTEGER NOT NULL,
    "attempted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "push_deliveries_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "push_deliveries_config_id_id_idx" ON "push_deliveries"("config_id", "id" DESC);
ALTER TABLE "push_deliveries" ADD CONSTRAINT "push_deliveries_config_id_fkey" FOREIGN KEY ("config_id") REFERENCES "push_configs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
