-- The principal that created a run (A2A task ownership): `key:<api key id>`, or NULL for an
-- anonymous caller of an agent without authentication. A2A reads show a task only to its owner
-- unless the caller holds `admin` or `a2a:all-tasks`.
ALTER TABLE "runs" ADD COLUMN "created_by" TEXT;
