-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "revision_status" AS ENUM ('draft', 'published', 'retired');

-- CreateEnum
CREATE TYPE "run_status" AS ENUM ('submitted', 'working', 'completed', 'failed', 'canceled', 'rejected');

-- CreateTable
CREATE TABLE "organizations" (
    "id" UUID NOT NULL,
    "slug" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "organizations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "secret_hash" TEXT NOT NULL,
    "scopes" TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agents" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "slug" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL,
    "provider" JSONB,
    "documentation_url" TEXT,
    "icon_url" TEXT,
    "is_default" BOOLEAN NOT NULL DEFAULT false,
    "active_revision_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "agents_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_revisions" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "number" INTEGER NOT NULL,
    "status" "revision_status" NOT NULL DEFAULT 'draft',
    "protocol_profiles" JSONB NOT NULL,
    "runtime" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),
    "retired_at" TIMESTAMPTZ(3),

    CONSTRAINT "agent_revisions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "protocol_bindings" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "protocol" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "transports" TEXT[],
    "path" TEXT NOT NULL,
    "security" JSONB NOT NULL,
    "extensions" JSONB NOT NULL DEFAULT '[]',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "protocol_bindings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "runs" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "revision_id" UUID NOT NULL,
    "thread_id" TEXT NOT NULL,
    "status" "run_status" NOT NULL,
    "blocked_reason" TEXT,
    "last_sequence" INTEGER NOT NULL DEFAULT 0,
    "origin_message_id" TEXT NOT NULL,
    "metadata" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "status_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMPTZ(3),

    CONSTRAINT "runs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "run_events" (
    "run_id" UUID NOT NULL,
    "sequence" INTEGER NOT NULL,
    "org_id" UUID NOT NULL,
    "type" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "run_events_pkey" PRIMARY KEY ("run_id","sequence")
);

-- CreateTable
CREATE TABLE "messages" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "message_id" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "parts" JSONB NOT NULL,
    "metadata" JSONB,
    "extensions" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "sequence" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "artifacts" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "artifact_id" TEXT NOT NULL,
    "name" TEXT,
    "description" TEXT,
    "parts" JSONB NOT NULL,
    "metadata" JSONB,
    "extensions" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "complete" BOOLEAN NOT NULL DEFAULT false,
    "sequence" INTEGER NOT NULL,
    "updated_sequence" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "artifacts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "interaction_requests" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "blocked_reason" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'open',
    "request" JSONB NOT NULL,
    "response" JSONB,
    "sequence" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "resolved_at" TIMESTAMPTZ(3),

    CONSTRAINT "interaction_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "run_links" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "parent_run_id" UUID NOT NULL,
    "child_run_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "run_links_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "idempotency_records" (
    "org_id" UUID NOT NULL,
    "key" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "status_code" INTEGER NOT NULL,
    "response" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "idempotency_records_pkey" PRIMARY KEY ("org_id","key")
);

-- CreateIndex
CREATE UNIQUE INDEX "organizations_slug_key" ON "organizations"("slug");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_prefix_key" ON "api_keys"("prefix");

-- CreateIndex
CREATE INDEX "api_keys_org_id_idx" ON "api_keys"("org_id");

-- CreateIndex
CREATE UNIQUE INDEX "agents_active_revision_id_key" ON "agents"("active_revision_id");

-- CreateIndex
CREATE UNIQUE INDEX "agents_org_id_slug_key" ON "agents"("org_id", "slug");

-- CreateIndex
CREATE UNIQUE INDEX "agents_org_id_id_key" ON "agents"("org_id", "id");

-- CreateIndex
CREATE INDEX "agent_revisions_org_id_agent_id_idx" ON "agent_revisions"("org_id", "agent_id");

-- CreateIndex
CREATE UNIQUE INDEX "agent_revisions_agent_id_number_key" ON "agent_revisions"("agent_id", "number");

-- CreateIndex
CREATE INDEX "protocol_bindings_org_id_idx" ON "protocol_bindings"("org_id");

-- CreateIndex
CREATE UNIQUE INDEX "protocol_bindings_agent_id_protocol_key" ON "protocol_bindings"("agent_id", "protocol");

-- CreateIndex
CREATE UNIQUE INDEX "protocol_bindings_path_key" ON "protocol_bindings"("path");

-- CreateIndex
CREATE INDEX "runs_org_id_agent_id_status_at_idx" ON "runs"("org_id", "agent_id", "status_at" DESC);

-- CreateIndex
CREATE INDEX "runs_org_id_thread_id_idx" ON "runs"("org_id", "thread_id");

-- CreateIndex
CREATE INDEX "runs_status_updated_at_idx" ON "runs"("status", "updated_at");

-- CreateIndex
CREATE UNIQUE INDEX "runs_org_id_agent_id_origin_message_id_key" ON "runs"("org_id", "agent_id", "origin_message_id");

-- CreateIndex
CREATE INDEX "messages_run_id_sequence_idx" ON "messages"("run_id", "sequence");

-- CreateIndex
CREATE UNIQUE INDEX "messages_org_id_agent_id_message_id_key" ON "messages"("org_id", "agent_id", "message_id");

-- CreateIndex
CREATE UNIQUE INDEX "artifacts_run_id_artifact_id_key" ON "artifacts"("run_id", "artifact_id");

-- CreateIndex
CREATE INDEX "interaction_requests_run_id_status_idx" ON "interaction_requests"("run_id", "status");

-- CreateIndex
CREATE INDEX "run_links_org_id_idx" ON "run_links"("org_id");

-- CreateIndex
CREATE UNIQUE INDEX "run_links_parent_run_id_child_run_id_key" ON "run_links"("parent_run_id", "child_run_id");

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agents" ADD CONSTRAINT "agents_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agents" ADD CONSTRAINT "agents_active_revision_id_fkey" FOREIGN KEY ("active_revision_id") REFERENCES "agent_revisions"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_revisions" ADD CONSTRAINT "agent_revisions_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "protocol_bindings" ADD CONSTRAINT "protocol_bindings_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "runs" ADD CONSTRAINT "runs_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "runs" ADD CONSTRAINT "runs_revision_id_fkey" FOREIGN KEY ("revision_id") REFERENCES "agent_revisions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "run_events" ADD CONSTRAINT "run_events_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "messages" ADD CONSTRAINT "messages_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "artifacts" ADD CONSTRAINT "artifacts_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "interaction_requests" ADD CONSTRAINT "interaction_requests_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "run_links" ADD CONSTRAINT "run_links_parent_run_id_fkey" FOREIGN KEY ("parent_run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "run_links" ADD CONSTRAINT "run_links_child_run_id_fkey" FOREIGN KEY ("child_run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;


-- Hand-written. Prisma's WebAssembly migration engine splits statements at every semicolon, so the
-- function bodies below spell their semicolons as octal 073 inside E-strings.
-- A published (or retired) revision is immutable. Only the lifecycle columns
-- (status: published -> retired, retired_at) may change after publication.
CREATE FUNCTION agent_revisions_immutable() RETURNS trigger AS E'
BEGIN
  IF OLD.status <> ''draft'' AND (
       NEW.protocol_profiles IS DISTINCT FROM OLD.protocol_profiles
    OR NEW.runtime IS DISTINCT FROM OLD.runtime
    OR NEW.number <> OLD.number
    OR NEW.agent_id <> OLD.agent_id
    OR NEW.org_id <> OLD.org_id
    OR NEW.published_at IS DISTINCT FROM OLD.published_at
    OR (OLD.status = ''retired'' AND NEW.status <> ''retired'')
    OR NEW.status = ''draft''
  ) THEN
    RAISE EXCEPTION ''agent revision % is % and immutable'', OLD.id, OLD.status
      USING ERRCODE = ''check_violation''\073
  END IF\073
  RETURN NEW\073
END'
 LANGUAGE plpgsql;

CREATE TRIGGER agent_revisions_immutable
  BEFORE UPDATE ON agent_revisions
  FOR EACH ROW EXECUTE FUNCTION agent_revisions_immutable();

-- Hand-written: the event log is append-only.
CREATE FUNCTION run_events_append_only() RETURNS trigger AS E'
BEGIN
  RAISE EXCEPTION ''run_events is append-only'' USING ERRCODE = ''check_violation''\073
END'
 LANGUAGE plpgsql;

CREATE TRIGGER run_events_append_only
  BEFORE UPDATE ON run_events
  FOR EACH ROW EXECUTE FUNCTION run_events_append_only();
