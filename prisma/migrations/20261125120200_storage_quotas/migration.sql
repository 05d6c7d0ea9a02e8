-- Per-organization storage quotas (bytes of messages and artifacts).
--   runs.stored_bytes                 bytes of the messages and artifact parts the run's log holds,
--                                     kept by the append path in the same statement (create / append),
--                                     not indexed, so the append stays a HOT update.
--   organizations.storage_quota_bytes the organization's quota, NULL = the deployment default
--                                     ORG_STORAGE_QUOTA_BYTES, 0 = unlimited. Set by a platform key.
-- Fast on a populated table: both columns are catalog-only changes (a constant default, no
-- rewrite, no backfill). Runs written before this migration count 0 bytes.
ALTER TABLE "organizations" ADD COLUMN "storage_quota_bytes" BIGINT;
ALTER TABLE "runs" ADD COLUMN "stored_bytes" BIGINT NOT NULL DEFAULT 0;
