-- Idempotency per caller. A retried SendMessage is recognised by (org, agent, owner, messageId)
-- and a retried follow-up by (org, agent, sender, messageId): another caller reusing the same
-- messageId gets its own task / its own message, never the first caller's.
--   runs.created_by      the owner (`key:<api key id>`, `jwt:<iss>|<sub>`, NULL = anonymous),
--                        NULL dedupes too through COALESCE(created_by, '') in the index.
--   messages.sent_by     who sent the message: a user message's caller ('' = anonymous), or
--                        'agent' for the agent's own messages (no caller id can be 'agent').
--
-- Fast on a populated table: the ADD COLUMN has a constant default, a catalog-only change (no
-- table rewrite, no backfill UPDATE), each index build reads its table once (reads go on, writes
-- wait for the build). To build them without holding writes on a very large table, create them
-- beforehand with CREATE UNIQUE INDEX CONCURRENTLY under the same names: IF NOT EXISTS skips them.
-- Rows written before this migration keep sent_by = '' (their sender was not recorded): a
-- follow-up retried across the deploy by a keyed caller is recorded once more, at most.
ALTER TABLE "messages" ADD COLUMN "sent_by" TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX IF NOT EXISTS "runs_org_id_agent_id_owner_origin_message_id_key"
  ON "runs" ("org_id", "agent_id", (COALESCE("created_by", '')), "origin_message_id");
DROP INDEX IF EXISTS "runs_org_id_agent_id_origin_message_id_key";

CREATE UNIQUE INDEX IF NOT EXISTS "messages_org_id_agent_id_sent_by_message_id_key"
  ON "messages" ("org_id", "agent_id", "sent_by", "message_id");
DROP INDEX IF EXISTS "messages_org_id_agent_id_message_id_key";
