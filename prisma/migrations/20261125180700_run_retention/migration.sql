-- Retention policies: per organization (agent_id NULL) and per agent (an override). retention_days
-- NULL keeps forever. A run's policy is its agent's row when there is one, else its organization's.
CREATE TABLE "retention_policies" (
    "org_id" UUID NOT NULL,
    "agent_id" UUID,
    "retention_days" INTEGER,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "retention_policies_days_check" CHECK ("retention_days" IS NULL OR "retention_days" >= 1)
);
CREATE UNIQUE INDEX "retention_policies_org_id_agent_id_key" ON "retention_policies"("org_id", COALESCE("agent_id", '00000000-0000-0000-0000-000000000000'::uuid));
ALTER TABLE "retention_policies" ADD CONSTRAINT "retention_policies_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "retention_policies" ADD CONSTRAINT "retention_policies_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Hand-written: the log stays append-only. UPDATE is refused always (row trigger, as before). DELETE
-- was not guarded: now it is refused too, unless the transaction is the retention path, which sets
-- aaas.retention to on with set_config(..., true) (transaction-local) before it removes expired runs.
-- One statement-level check per DELETE statement, so removing a run's log costs no per-row call.
CREATE FUNCTION run_events_delete_guard() RETURNS trigger AS E'
BEGIN
  IF current_setting(''aaas.retention'', true) = ''on'' THEN
    RETURN NULL\073
  END IF\073
  RAISE EXCEPTION ''run_events is append-only (rows leave only through the retention path)'' USING ERRCODE = ''check_violation''\073
END'
 LANGUAGE plpgsql;

CREATE TRIGGER run_events_delete_guard
  BEFORE DELETE ON run_events
  FOR EACH STATEMENT EXECUTE FUNCTION run_events_delete_guard();
