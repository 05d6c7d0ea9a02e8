-- The log and its hot projections stop checking their run by foreign key (docs/architecture.md
-- "Removing runs"). run_events, messages, message_keys, artifacts and run_dispatches are written
-- only by statements that take their run from `runs` itself (the creation statement from the rows
-- it inserted, the append statement from the row it locked and updated, an archive restore from the
-- runs of the same batch), so the check — one SPI query and a row lock per inserted row, about ten
-- per task and a seventh of PostgreSQL's time per task — proved nothing those statements do not.
-- What the keys' ON DELETE CASCADE did is done by one statement trigger on runs: the rows of the
-- removed runs go with them, per organization, by (org_id, run_id) through each table's own index,
-- in the transaction that removed the runs. interaction_requests, run_links and push_configs (rare
-- writes) keep their keys.
--
-- Semicolons inside bodies are written \073 (the migration runner splits statements at semicolons).

-- 1. Every key from those tables to runs, whatever earlier migrations named it (a partition's
-- inherited copy goes with its parent's).
DO E'
DECLARE
  k record\073
BEGIN
  FOR k IN
    SELECT c.conrelid::regclass AS tbl, c.conname
      FROM pg_constraint c
     WHERE c.contype = ''f'' AND c.conparentid = 0 AND c.confrelid = ''runs''::regclass
       AND c.conrelid IN (''run_events''::regclass, ''messages''::regclass, ''message_keys''::regclass,
                          ''artifacts''::regclass, ''run_dispatches''::regclass)
  LOOP
    EXECUTE format(''ALTER TABLE %s DROP CONSTRAINT %I'', k.tbl, k.conname)\073
  END LOOP\073
END';

-- 2. The cascade: removed runs take their log, messages, message keys, artifacts and dispatches
-- with them. One DELETE per table and organization, `run_id = ANY(ids)` on an index that leads with
-- (org_id, run_id) (message_keys: run_id). run_events' DELETE guard still applies: only a
-- transaction that set `aaas.retention` removes runs that have a log.
CREATE FUNCTION runs_removed() RETURNS trigger AS E'
DECLARE
  o uuid\073
  ids uuid[]\073
BEGIN
  FOR o, ids IN SELECT org_id, array_agg(id) FROM removed GROUP BY org_id LOOP
    DELETE FROM run_events WHERE org_id = o AND run_id = ANY(ids)\073
    DELETE FROM messages WHERE org_id = o AND run_id = ANY(ids)\073
    DELETE FROM message_keys WHERE org_id = o AND run_id = ANY(ids)\073
    DELETE FROM artifacts WHERE org_id = o AND run_id = ANY(ids)\073
    DELETE FROM run_dispatches WHERE org_id = o AND run_id = ANY(ids)\073
  END LOOP\073
  RETURN NULL\073
END'
 LANGUAGE plpgsql;

CREATE TRIGGER runs_removed AFTER DELETE ON runs REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION runs_removed();
