-- runs.stored_bytes can never be negative (issue 43, row 5): a run archive import used to write the
-- archive's own stored_bytes, and a forged -9e15 cancelled the organization's storage quota
-- (org_storage sums the runs' stored_bytes). Imports now derive the column from the log, and this
-- constraint is the database's own guard against any writer.
--
-- runs is not partitioned (only the log tables are), so this is one table. A row left negative by
-- an import before this release is set to 0 first (the org_storage_grew trigger records the delta,
-- so the organization's total stays the sum of its runs). The constraint is added NOT VALID (no scan
-- under the ACCESS EXCLUSIVE lock) and validated afterwards (a scan that takes SHARE UPDATE
-- EXCLUSIVE only: writes go on meanwhile).
UPDATE "runs" SET "stored_bytes" = 0 WHERE "stored_bytes" < 0;
ALTER TABLE "runs" ADD CONSTRAINT "runs_stored_bytes_check" CHECK ("stored_bytes" >= 0) NOT VALID;
ALTER TABLE "runs" VALIDATE CONSTRAINT "runs_stored_bytes_check";
