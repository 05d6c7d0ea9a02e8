import type { BlockedReason, RunEvent, RunExecuteJob, RunKind, RunStatus } from '#libs/contracts';
import { JOB_INLINE_INPUT_MAX_BYTES } from '#libs/contracts';
import { AGENT_SENDER, RUN_COLUMNS, storedBytes } from './run-record.js';

/*
 * The statements of the append path (docs/architecture.md, invariant 1): the group-committed
 * creation (CREATE_BATCH_SQL) and append (appendSql, one prepared statement per combination of
 * parts), their inputs, and the rows they return. EventLogRepository is their one caller.
 */

export interface NewRun {
  id: string;
  orgId: string;
  agentId: string;
  revisionId: string;
  threadId: string;
  originMessageId: string;
  metadata?: Record<string, unknown> | null;
  /** The principal creating it (`key:<api key id>`); null or absent: anonymous. */
  createdBy?: string | null;
  /** Absent: `execution`. A `reply` run is created with its whole log (see RecordReplyHandler). */
  kind?: RunKind;
}

/** The outbox row a command recorded: its id and the trigger sequence of its job. */
export interface RecordedDispatch {
  id: string;
  triggerSequence: number;
}

/** A run to create with its first events and, optionally, the dispatch (outbox row) it needs. */
export interface NewRunWithEvents {
  run: NewRun;
  events: RunEvent[];
  /** Recorded in run_dispatches in the same statement, keyed by the user message's sequence. */
  dispatch?: RunExecuteJob;
}

/**
 * Guarded state change for `append`: the run must currently be in one of `from` (and, when
 * `blocked` is given, be blocked / not blocked). `status` / `blockedReason` are the new values;
 * undefined leaves a column as it is.
 */
export interface AppendGuard {
  from: readonly RunStatus[];
  blocked?: boolean;
  /** The run's thread must be this one. */
  threadId?: string;
  /** This InteractionRequest of the run must still be open. */
  openInteractionId?: string;
  /** The run must belong to this agent. */
  agentId?: string;
  /** The run's interaction version must be this (no interaction opened or closed since it was read). */
  interactionVersion?: number;
  /** The run must have exactly this many open interactions. */
  openInteractions?: number;
  /** The run's last sequence must be this (nothing at all was appended since it was read). */
  lastSequence?: number;
  /**
   * The fencing token of the execution appending (docs/architecture.md "The fence"): the run's
   * `execution_epoch` must still be this one — a newer execution has not taken the run over.
   */
  epoch?: number;
  /**
   * Take the run's executions over (`run.execution_resumed`): its `execution_epoch` grows by one and
   * its lease is cleared, in this statement, so every write of an older execution is refused.
   */
  takeOver?: boolean;
  /**
   * The organization's storage quota in bytes (a runtime's writes; absent: not checked): the append
   * is refused — nothing of it written, its row `overQuota` — when the organization's stored bytes
   * (the sum of `org_storage` in the statement's snapshot) plus what it adds would pass this.
   * Appends that add no bytes are never refused.
   */
  quotaBytes?: number;
  status?: RunStatus;
  blockedReason?: BlockedReason | null;
}

/**
 * The message projection of the events a statement inserted (CTE `ev`, joined to its runs `r`), as
 * two CTEs, `msg` and `msg_key`: one `messages` row per event carrying a message, and for each user
 * message its `message_keys` row. A user message's sender is the item's (`r.in_sent_by`: the
 * caller, given on append; NULL on create) or else the run's owner (`r.created_by`), '' when
 * anonymous; the agent's own are AGENT_SENDER. One text, used by both create and append
 * (invariant 1: one append path).
 *
 * The keys (docs/architecture.md "The log's partitions"): `messages` is partitioned by run period,
 * so its unique key (org_id, run_id, sent_by, message_id) holds a messageId once per sender within
 * a run; that is the only key the agent's messages have. A user message's key across the agent's runs is
 * `message_keys`' primary key (org_id, agent_id, sent_by, message_id), one unpartitioned index:
 * the same message again on another run (or the same one) fails this statement with a unique
 * violation, check and insert in one statement as before. One narrow row per user message.
 */
const MESSAGE_PROJECTION_SQL = `msg AS (
  INSERT INTO messages (id, org_id, agent_id, run_id, message_id, sent_by, role, parts, metadata, extensions, reference_task_ids, sequence, created_at)
  SELECT gen_random_uuid(), r.org_id, r.agent_id, r.id, ev.payload->'message'->>'messageId',
         CASE WHEN ev.payload->'message'->>'role' = 'user' THEN COALESCE(r.in_sent_by, r.created_by, '') ELSE '${AGENT_SENDER}' END,
         ev.payload->'message'->>'role', ev.payload->'message'->'parts', ev.payload->'message'->'metadata',
         ARRAY(SELECT jsonb_array_elements_text(COALESCE(ev.payload->'message'->'extensions', '[]'::jsonb))),
         ARRAY(SELECT jsonb_array_elements_text(COALESCE(ev.payload->'message'->'referenceTaskIds', '[]'::jsonb))),
         ev.sequence, ev.created_at
  FROM ev JOIN r ON r.id = ev.run_id WHERE ev.payload ? 'message'
  RETURNING id, org_id, agent_id, run_id, sent_by, message_id
), msg_key AS (
  INSERT INTO message_keys (org_id, agent_id, sent_by, message_id, run_id, message_row_id)
  SELECT org_id, agent_id, sent_by, message_id, run_id, id FROM msg WHERE sent_by <> '${AGENT_SENDER}'
  RETURNING 1
)`;

/*
 * Group-committed creation: one statement creates every run of a batch (rows in $1 as a JSON
 * array), each with its events (sequences 1..n), the message projection and its outbox row.
 * A run's row starts in the status its events leave it in (`status`: submitted, or completed for
 * a direct reply, whose log ends with its run.status_changed), `ended_at` set when terminal.
 * A run whose (org, agent, owner, originMessageId) exists is skipped (ON CONFLICT DO NOTHING on
 * the unique index runs_org_id_agent_id_owner_origin_message_id_key, owner = COALESCE(created_by,
 * '')) and absent from the result: that is how a retried SendMessage of the same caller is
 * recognised; another caller's same messageId is another key, so it creates its own run.
 */
export const CREATE_BATCH_SQL = `
WITH input AS (
  SELECT (x->>'id')::uuid AS id, (x->>'orgId')::uuid AS org_id, (x->>'agentId')::uuid AS agent_id,
         (x->>'revisionId')::uuid AS revision_id, x->>'threadId' AS thread_id,
         x->>'originMessageId' AS origin_message_id, NULLIF(x->'metadata', 'null'::jsonb) AS metadata,
         x->>'createdBy' AS created_by, COALESCE((x->>'storedBytes')::bigint, 0) AS stored_bytes,
         COALESCE(x->>'status', 'submitted')::run_status AS status, COALESCE(x->>'kind', 'execution') AS kind,
         x->'events' AS events, NULLIF(x->'dispatch', 'null'::jsonb) AS dispatch
  FROM jsonb_array_elements($1::jsonb) AS t(x)
), r AS (
  INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, kind, status, blocked_reason, last_sequence,
                    origin_message_id, metadata, created_by, stored_bytes, created_at, updated_at, status_at, ended_at)
  SELECT id, org_id, agent_id, revision_id, thread_id, kind, status, NULL, jsonb_array_length(events),
         origin_message_id, metadata, created_by, stored_bytes, now(), now(), now(),
         CASE WHEN status IN ('completed', 'failed', 'canceled', 'rejected') THEN now() END
  FROM input
  ON CONFLICT (org_id, agent_id, (COALESCE(created_by, '')), origin_message_id) DO NOTHING
  -- in_sent_by: a creation's user message is its owner's (the message projection's sender)
  RETURNING *, NULL::text AS in_sent_by
), ev AS (
  INSERT INTO run_events (run_id, sequence, org_id, type, payload, created_at)
  SELECT r.id, e.ord::int, r.org_id, e.item->>'type', e.item->'payload', r.updated_at
  FROM r JOIN input i ON i.id = r.id CROSS JOIN LATERAL jsonb_array_elements(i.events) WITH ORDINALITY AS e(item, ord)
  RETURNING run_id, sequence, type, payload, created_at
), ${MESSAGE_PROJECTION_SQL}, outbox AS (
  INSERT INTO run_dispatches (org_id, run_id, trigger_sequence, job)
  SELECT r.org_id, r.id, ev.sequence, i.dispatch
  FROM ev JOIN r ON r.id = ev.run_id JOIN input i ON i.id = r.id
  WHERE i.dispatch IS NOT NULL AND ev.type = 'message.added' AND ev.payload->'message'->>'role' = 'user'
  RETURNING id, run_id, trigger_sequence
)
SELECT c.*, o.id AS "dispatchId", o.trigger_sequence AS "triggerSequence"
FROM (SELECT ${RUN_COLUMNS} FROM r) c LEFT JOIN outbox o ON o.run_id = c.id`;

/** Most appends one statement takes (group commit). */
export const APPEND_BATCH_MAX = 64;

/*
 * The append path, group-committed: one statement appends to every run of a batch ($1: a JSON
 * array, one element per append — see AppendInput), each with its own guard, events, dispatch
 * and sender; a single append is a batch of one. Per item: the guarded state change of its run
 * (`r`, one row when the guard holds, none otherwise) allocates the sequences
 * last_sequence-n+1 .. last_sequence of its events, and the projections are derived from exactly
 * those events. Everything is one statement, so one round trip and one transaction: either every
 * item's state change, events and projections commit, or none does.
 *
 * A batch never holds two appends to one run (EventLogRepository serializes them): of two changes
 * to one row in one statement PostgreSQL applies only the first. For the same reason:
 * - children of one parent changing status together: the parent gets one `run.link_updated` per
 *   child, the sequences allocated once for all of them (`lg`, `lpl`);
 * - an item whose run is the parent of another item's status-changing run is `held`: nothing of
 *   it is written here and the repository appends it alone right after.
 * Runs are locked in the order of $1 (sorted by run id), so concurrent batches do not deadlock.
 *
 * The statement holds only the parts its batch needs (`AppendParts`, one prepared statement per
 * combination): each optional part costs its executor set-up and its tables' locks even when it
 * writes nothing, a third of PostgreSQL's CPU for an append of one agent message (650 → 430 µs
 * per statement, measured). A part left out is one that writes nothing for that batch, so every
 * combination records exactly what the whole statement records.
 */

/**
 * The optional parts of the append statement, each needed only by some batches:
 * - `links`: an item changes its run's status or overlay (its parents hear of it: `run.link_updated`,
 *   an awaiting parent's dispatch; an item that is another's parent is `held`);
 * - `artifacts`: `artifact.updated` events (the `artifacts` projection);
 * - `interactions`: `interaction.*` events (the `interaction_requests` projection);
 * - `linked`: `run.linked` events (the `run_links` projection);
 * - `dispatch`: an item carries a dispatch (its outbox row);
 * - `quota`: an item adds bytes under a storage quota (`quotaBytes`: a runtime's write to a run of
 *   an organization with a quota). Each such item reads its organization's stored bytes, the sum of
 *   `org_storage` in the statement's snapshot (`todo.org_stored`: the folded row and the deltas
 *   since, a few index entries), and is refused by the guard of `r` when that sum plus its own bytes
 *   would pass its quota: nothing of it is written, like any refused guard, and its row says
 *   `overQuota`. The statement sees what committed before it, so appends in flight together (other
 *   items of the batch, other statements) may pass the quota by what they add: one batch each.
 *   No CTE of its own: without it `org_stored` is NULL and the guard is left out.
 */
export interface AppendParts {
  links: boolean;
  artifacts: boolean;
  interactions: boolean;
  linked: boolean;
  dispatch: boolean;
  quota: boolean;
}

/** The CTEs of the append statement in their order; those of an optional part are named in APPEND_PART_CTES. */
const APPEND_CTES: ReadonlyArray<readonly [name: string, sql: string]> = [
  ['input', `input AS MATERIALIZED (
  SELECT t.ord::int AS ord, (x->>'runId')::uuid AS id, (x->>'orgId')::uuid AS org_id,
         jsonb_array_length(x->'events') AS n, x->'events' AS events, NULLIF(x->'dispatch', 'null'::jsonb) AS dispatch,
         (x->>'status')::run_status AS new_status, (x->>'setBlocked')::boolean AS set_blocked, x->>'blockedReason' AS new_blocked,
         ARRAY(SELECT jsonb_array_elements_text(x->'from'))::run_status[] AS from_statuses, (x->>'blocked')::boolean AS blocked,
         x->>'threadId' AS thread_id, (x->>'openInteractionId')::uuid AS open_interaction_id, (x->>'agentId')::uuid AS agent_id,
         (x->>'interactionVersion')::int AS interaction_version, (x->>'openInteractions')::int AS open_interactions,
         (x->>'lastSequence')::int AS last_sequence, (x->>'openDelta')::int AS open_delta, (x->>'versionDelta')::int AS version_delta,
         (x->>'epoch')::int AS epoch, (x->>'takeOver')::boolean AS take_over,
         (x->>'storedBytes')::bigint AS stored_bytes, (x->>'statusChange')::boolean AS status_change, x->>'sentBy' AS sent_by,
         (x->>'quotaBytes')::bigint AS quota_bytes
  FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(x, ord)
  -- always true (a batch has at most APPEND_BATCH_MAX items), and it makes the planner expect one
  -- item (0.005 of jsonb_array_elements' 100 rows), as for a single-run append: the cached plan then
  -- reaches runs and run_links by their indexes even when it was made while the tables were empty
  WHERE t.ord BETWEEN 1 AND ${APPEND_BATCH_MAX}
)`],
  ['links', `links AS MATERIALIZED (
  -- the links of the runs whose status (or overlay) changes: their parents hear about it
  SELECT l.id AS link_id, l.parent_run_id, l.child_run_id, l.kind, l.awaiting
  FROM input i JOIN run_links l ON l.child_run_id = i.id
  WHERE i.status_change
)`],
  ['todo', `todo AS MATERIALIZED (
  SELECT i.*, @held AS held,
         (i.open_interaction_id IS NULL OR EXISTS (SELECT 1 FROM interaction_requests ir
                                                    WHERE ir.id = i.open_interaction_id AND ir.run_id = i.id AND ir.status = 'open')) AS interaction_open,
         @org_stored AS org_stored
  FROM input i
)`],
  ['r', `r AS (
  UPDATE runs SET
    last_sequence = runs.last_sequence + i.n,
    status = COALESCE(i.new_status, runs.status),
    blocked_reason = CASE WHEN i.set_blocked THEN i.new_blocked ELSE runs.blocked_reason END,
    updated_at = now(),
    status_at = CASE WHEN i.new_status IS NOT NULL OR i.set_blocked THEN now() ELSE runs.status_at END,
    ended_at = CASE WHEN i.new_status IN ('completed', 'failed', 'canceled', 'rejected') THEN now() ELSE runs.ended_at END,
    open_interactions = runs.open_interactions + i.open_delta,
    interaction_version = runs.interaction_version + i.version_delta,
    stored_bytes = runs.stored_bytes + i.stored_bytes,
    -- a takeover: the fencing token grows and the superseded execution's lease goes with it
    execution_epoch = runs.execution_epoch + CASE WHEN i.take_over THEN 1 ELSE 0 END,
    lease_owner = CASE WHEN i.take_over THEN NULL ELSE runs.lease_owner END,
    lease_trigger = CASE WHEN i.take_over THEN NULL ELSE runs.lease_trigger END,
    lease_expires_at = CASE WHEN i.take_over THEN NULL ELSE runs.lease_expires_at END
  FROM todo i
  WHERE runs.id = i.id AND NOT i.held AND i.interaction_open AND (runs.org_id = i.org_id) IS TRUE
    AND runs.status = ANY(i.from_statuses)
    AND (i.blocked IS NULL OR (runs.blocked_reason IS NOT NULL) = i.blocked)
    AND (i.thread_id IS NULL OR runs.thread_id = i.thread_id)
    AND (i.agent_id IS NULL OR runs.agent_id = i.agent_id)
    AND (i.interaction_version IS NULL OR runs.interaction_version = i.interaction_version)
    AND (i.open_interactions IS NULL OR runs.open_interactions = i.open_interactions)
    AND (i.last_sequence IS NULL OR runs.last_sequence = i.last_sequence)
    AND (i.epoch IS NULL OR runs.execution_epoch = i.epoch)@quota_guard
  RETURNING runs.*, i.n AS in_n, i.events AS in_events, i.dispatch AS in_dispatch, i.sent_by AS in_sent_by
)`],
  ['ev', `ev AS (
  INSERT INTO run_events (run_id, sequence, org_id, type, payload, created_at)
  SELECT r.id, r.last_sequence - r.in_n + e.ord::int, r.org_id, e.item->>'type', e.item->'payload', r.updated_at
  FROM r CROSS JOIN LATERAL jsonb_array_elements(r.in_events) WITH ORDINALITY AS e(item, ord)
  RETURNING run_id, sequence, type, payload, created_at
)`],
  ['msg', MESSAGE_PROJECTION_SQL],
  ['art_agg', `art_agg AS MATERIALIZED (
  -- the artifact chunks of this statement folded per (run, artifact), in sequence order, as
  -- appending them one by one would: the parts from the last chunk that does not append (reset_seq)
  -- on, else all of them after the stored parts; name, description and metadata the last ones
  -- given; complete the last chunk's lastChunk; extensions (kept from the first write) the first's
  SELECT r.org_id, ev.run_id, ev.payload->>'artifactId' AS artifact_id,
         min(ev.sequence) AS first_seq, max(ev.sequence) AS last_seq,
         max(ev.sequence) FILTER (WHERE NOT COALESCE((ev.payload->>'append')::boolean, false)) AS reset_seq,
         (array_agg(ev.payload->>'name' ORDER BY ev.sequence DESC) FILTER (WHERE ev.payload->>'name' IS NOT NULL))[1] AS name,
         (array_agg(ev.payload->>'description' ORDER BY ev.sequence DESC) FILTER (WHERE ev.payload->>'description' IS NOT NULL))[1] AS description,
         (array_agg(ev.payload->'metadata' ORDER BY ev.sequence DESC) FILTER (WHERE ev.payload->'metadata' IS NOT NULL))[1] AS metadata,
         (array_agg(COALESCE((ev.payload->>'lastChunk')::boolean, false) ORDER BY ev.sequence DESC))[1] AS complete,
         (array_agg(ev.payload->'extensions' ORDER BY ev.sequence))[1] AS extensions,
         min(ev.created_at) AS created_at
  FROM ev JOIN r ON r.id = ev.run_id WHERE ev.type = 'artifact.updated'
  GROUP BY r.org_id, ev.run_id, ev.payload->>'artifactId'
)`],
  ['art_new', `art_new AS (
  -- one row per (run, artifact): (run_id, artifact_id) is hit once per statement
  INSERT INTO artifacts AS a (id, org_id, run_id, artifact_id, name, description, parts, metadata, extensions, complete, sequence, updated_sequence, created_at)
  SELECT gen_random_uuid(), g.org_id, g.run_id, g.artifact_id, g.name, g.description,
         (SELECT COALESCE(jsonb_agg(x.part ORDER BY e.sequence, x.n), '[]'::jsonb)
            FROM ev e CROSS JOIN LATERAL jsonb_array_elements(e.payload->'parts') WITH ORDINALITY AS x(part, n)
           WHERE e.type = 'artifact.updated' AND e.run_id = g.run_id AND e.payload->>'artifactId' = g.artifact_id
             AND e.sequence >= COALESCE(g.reset_seq, 0)),
         g.metadata,
         ARRAY(SELECT jsonb_array_elements_text(COALESCE(g.extensions, '[]'::jsonb))),
         g.complete, g.first_seq, g.last_seq, g.created_at
  FROM art_agg g
  ON CONFLICT (org_id, run_id, artifact_id) DO UPDATE SET
    parts = CASE WHEN (SELECT g.reset_seq IS NULL FROM art_agg g WHERE g.run_id = a.run_id AND g.artifact_id = a.artifact_id)
                 THEN a.parts || EXCLUDED.parts ELSE EXCLUDED.parts END,
    name = COALESCE(EXCLUDED.name, a.name),
    description = COALESCE(EXCLUDED.description, a.description),
    metadata = COALESCE(EXCLUDED.metadata, a.metadata),
    complete = EXCLUDED.complete,
    updated_sequence = EXCLUDED.updated_sequence
  RETURNING 1
)`],
  ['ir_new', `ir_new AS (
  INSERT INTO interaction_requests (id, org_id, run_id, kind, blocked_reason, blocking, expires_at, status, request, sequence, created_at)
  SELECT (ev.payload->>'interactionId')::uuid, r.org_id, r.id, ev.payload->>'kind', ev.payload->>'blockedReason',
         COALESCE((ev.payload->>'blocking')::boolean, true), (ev.payload->>'expiresAt')::timestamptz,
         'open', ev.payload, ev.sequence, ev.created_at
  FROM ev JOIN r ON r.id = ev.run_id WHERE ev.type = 'interaction.requested'
  RETURNING 1
)`],
  ['ir_close', `ir_close AS MATERIALIZED (
  -- closing events first (a separate CTE, so each closes its row by primary key)
  SELECT (ev.payload->>'interactionId')::uuid AS iid, ev.run_id, ev.type, ev.payload, ev.created_at
  FROM ev WHERE ev.type IN ('interaction.responded', 'interaction.expired', 'interaction.canceled')
)`],
  ['ir_done', `ir_done AS (
  UPDATE interaction_requests ir
  SET status = CASE c.type WHEN 'interaction.responded' THEN
                 CASE WHEN c.payload->>'decision' = 'rejected' THEN 'rejected' ELSE 'resolved' END
               WHEN 'interaction.expired' THEN 'expired' ELSE 'canceled' END,
      response = c.payload || jsonb_build_object('type', c.type, 'at', c.created_at), resolved_at = c.created_at
  FROM ir_close c
  -- by run (an InitPlan's array, usually empty; index (run_id, status)): never a scan of them all
  WHERE ir.run_id = ANY(ARRAY(SELECT run_id FROM ir_close)) AND ir.id = c.iid AND ir.run_id = c.run_id AND ir.status = 'open'
  RETURNING 1
)`],
  ['link_new', `link_new AS (
  INSERT INTO run_links (id, org_id, parent_run_id, child_run_id, kind, awaiting, sequence, created_at)
  SELECT (ev.payload->>'linkId')::uuid, r.org_id, r.id, (ev.payload->>'childRunId')::uuid, ev.payload->>'kind',
         COALESCE((ev.payload->>'awaiting')::boolean, false), ev.sequence, ev.created_at
  FROM ev JOIN r ON r.id = ev.run_id WHERE ev.type = 'run.linked'
  RETURNING 1
)`],
  ['outbox', `outbox AS (
  INSERT INTO run_dispatches (org_id, run_id, trigger_sequence, job)
  SELECT r.org_id, r.id, ev.sequence,
         r.in_dispatch
           || CASE WHEN ev.payload ? 'message' THEN jsonb_build_object('inputMessageId', ev.payload->'message'->>'messageId') ELSE '{}'::jsonb END
           || CASE WHEN ev.type LIKE 'interaction.%' THEN jsonb_build_object('interactionId', ev.payload->>'interactionId') ELSE '{}'::jsonb END
           || CASE WHEN ev.payload ? 'message' AND octet_length((ev.payload->'message')::text) <= ${JOB_INLINE_INPUT_MAX_BYTES}
                   THEN jsonb_build_object('context', jsonb_build_object('threadId', r.thread_id, 'agentId', r.agent_id,
                          'revisionId', r.revision_id, 'input', ev.payload->'message'))
                   ELSE '{}'::jsonb END
  FROM ev JOIN r ON r.id = ev.run_id
  WHERE r.in_dispatch IS NOT NULL AND r.blocked_reason IS NULL
    AND (ev.payload->'message'->>'role' = 'user' OR ev.type IN ('interaction.expired', 'run.execution_resumed'))
  RETURNING id, run_id, trigger_sequence, job
)`],
  ['lk', `lk AS MATERIALIZED (
  -- a status change of a linked child is recorded on its parent (run.link_updated), in this
  -- statement: the parent's log tells the child's story in step with the child's own log
  SELECT links.link_id, links.parent_run_id, links.kind, links.awaiting, r.id AS child_id, r.org_id,
         r.status AS child_status, r.blocked_reason AS child_blocked,
         row_number() OVER (PARTITION BY links.parent_run_id ORDER BY r.id, links.link_id)::int AS k
  FROM r JOIN links ON links.child_run_id = r.id
)`],
  ['lg', `lg AS (
  SELECT parent_run_id, org_id, count(*)::int AS n FROM lk GROUP BY parent_run_id, org_id
)`],
  ['lp', `lp AS (
  -- the parents by id (an InitPlan's array, usually empty): a plan cached while the planner
  -- thought the active runs were few scanned runs_active_idx whole for every append (2,957
  -- active runs, 1.9 of the statement's 2.3 ms, with an empty lg) instead of looking lg's up
  UPDATE runs p SET last_sequence = p.last_sequence + lg.n, updated_at = now()
  FROM lg
  WHERE p.id = ANY(ARRAY(SELECT parent_run_id FROM lg)) AND p.id = lg.parent_run_id
    AND (p.org_id = lg.org_id) IS TRUE AND p.status IN ('submitted', 'working')
  RETURNING p.id, p.org_id, p.last_sequence, lg.n
)`],
  ['lpl', `lpl AS MATERIALIZED (
  SELECT lp.id, lp.org_id, lp.last_sequence - lp.n + lk.k AS sequence, lk.link_id, lk.kind, lk.awaiting, lk.child_id,
         lk.child_status, lk.child_blocked
  FROM lp JOIN lk ON lk.parent_run_id = lp.id
)`],
  ['lev', `lev AS (
  INSERT INTO run_events (run_id, sequence, org_id, type, payload, created_at)
  SELECT lpl.id, lpl.sequence, lpl.org_id, 'run.link_updated',
         jsonb_build_object('linkId', lpl.link_id, 'childRunId', lpl.child_id, 'kind', lpl.kind,
                            'status', lpl.child_status, 'blockedReason', lpl.child_blocked), now()
  FROM lpl
  RETURNING run_id
)`],
  ['ldisp', `ldisp AS (
  -- a child the parent awaits settled: the parent's runtime continues (outbox, same statement)
  INSERT INTO run_dispatches (org_id, run_id, trigger_sequence, job)
  SELECT lpl.org_id, lpl.id, lpl.sequence,
         jsonb_build_object('orgId', lpl.org_id, 'runId', lpl.id, 'trigger', 'link_settled', 'linkId', lpl.link_id, 'childRunId', lpl.child_id)
  FROM lpl WHERE lpl.awaiting AND lpl.child_status IN ('completed', 'failed', 'canceled', 'rejected')
  RETURNING id, trigger_sequence, job
)`],
  ['rj', `rj AS MATERIALIZED (
  -- rj .. dj materialized: each row is built once. Planned for one item (the estimate of input),
  -- the joins below are nested loops, and an inlined rj rebuilt row_to_json for every pair of
  -- items, quadratic in the batch: 64 items took 15.4 ms instead of 4.4, 32 took 5.3 instead of 2.8
  SELECT x.id, row_to_json(x) AS run FROM (SELECT ${RUN_COLUMNS} FROM r) x
)`],
  ['evj', `evj AS MATERIALIZED (
  SELECT run_id, json_agg(json_build_object('sequence', sequence, 'type', type, 'payload', payload, 'createdAt', created_at) ORDER BY sequence) AS events
  FROM ev GROUP BY run_id
)`],
  ['oj', `oj AS MATERIALIZED (
  SELECT DISTINCT ON (run_id) run_id, json_build_object('id', id::text, 'triggerSequence', trigger_sequence, 'job', job) AS dispatch
  FROM outbox ORDER BY run_id, trigger_sequence
)`],
  ['pj', `pj AS MATERIALIZED (
  SELECT child_id, json_agg(json_build_object('runId', id, 'lastSequence', sequence) ORDER BY sequence) AS parents FROM lpl GROUP BY child_id
)`],
  ['dj', `dj AS MATERIALIZED (
  SELECT (job->>'childRunId')::uuid AS child_id, json_agg(json_build_object('id', id::text, 'triggerSequence', trigger_sequence, 'job', job)) AS dispatches
  FROM ldisp GROUP BY 1
)`],
];

/** The CTEs each optional part adds. */
const APPEND_PART_CTES: Record<keyof AppendParts, readonly string[]> = {
  links: ['links', 'lk', 'lg', 'lp', 'lpl', 'lev', 'ldisp', 'pj', 'dj'],
  artifacts: ['art_agg', 'art_new'],
  interactions: ['ir_new', 'ir_close', 'ir_done'],
  linked: ['link_new'],
  dispatch: ['outbox', 'oj'],
  quota: [],
};

/** The storage quota's read (todo) and guard (r) when the `quota` part is on. */
const ORG_STORED_SQL = `CASE WHEN i.quota_bytes IS NOT NULL AND i.stored_bytes > 0
           THEN (SELECT COALESCE(sum(s.bytes), 0) FROM org_storage s WHERE s.org_id = i.org_id) END`;
const QUOTA_GUARD_SQL = `
    AND (i.org_stored IS NULL OR i.org_stored + i.stored_bytes <= i.quota_bytes)`;
const OVER_QUOTA_SQL = `COALESCE(i.org_stored + i.stored_bytes > i.quota_bytes, false)`;

/**
 * The append statement with the parts `p` (all parts: APPEND_SQL). Without `links`, no item is
 * held (nothing else's status changes) and no parent is named in the result.
 */
export function appendSql(p: AppendParts): string {
  const left = new Set<string>();
  for (const part of Object.keys(APPEND_PART_CTES) as Array<keyof AppendParts>) if (!p[part]) for (const n of APPEND_PART_CTES[part]) left.add(n);
  const ctes = APPEND_CTES.filter(([n]) => !left.has(n)).map(([, sql]) =>
    sql
      .replace('@held', p.links ? 'EXISTS (SELECT 1 FROM links WHERE links.parent_run_id = i.id)' : 'false')
      .replace('@org_stored', p.quota ? ORG_STORED_SQL : 'NULL::bigint')
      .replace('@quota_guard', p.quota ? QUOTA_GUARD_SQL : ''),
  );
  return `
WITH ${ctes.join(', ')}
SELECT i.ord, i.held, rj.run, ${p.dispatch ? 'oj.dispatch' : 'NULL::json AS dispatch'}, ${p.links ? 'pj.parents' : 'NULL::json AS parents'},
       ${p.links ? 'dj.dispatches' : 'NULL::json'} AS "parentDispatches", COALESCE(evj.events, '[]'::json) AS events,
       ${p.quota ? OVER_QUOTA_SQL : 'false'} AS "overQuota", i.org_stored AS "orgStored"
FROM todo i LEFT JOIN rj ON rj.id = i.id LEFT JOIN evj ON evj.run_id = i.id${p.dispatch ? ' LEFT JOIN oj ON oj.run_id = i.id' : ''}${
    p.links ? ' LEFT JOIN pj ON pj.child_id = i.id LEFT JOIN dj ON dj.child_id = i.id' : ''
  }
ORDER BY i.ord`;
}

/** The whole append statement (every part). */
export const APPEND_SQL = appendSql({ links: true, artifacts: true, interactions: true, linked: true, dispatch: true, quota: true });

/** The parts a batch of appends needs (see AppendParts). */
export function appendParts(batch: readonly AppendInput[]): AppendParts {
  const p: AppendParts = { links: false, artifacts: false, interactions: false, linked: false, dispatch: false, quota: false };
  for (const item of batch) {
    if (item.statusChange) p.links = true;
    if (item.dispatch) p.dispatch = true;
    if (item.quotaBytes != null && item.storedBytes > 0) p.quota = true;
    for (const e of item.events) {
      if (e.type === 'artifact.updated') p.artifacts = true;
      else if (e.type === 'run.linked') p.linked = true;
      else if (e.type.startsWith('interaction.')) p.interactions = true;
    }
  }
  return p;
}

const appendStatements = new Map<string, { name: string; text: string }>();

/**
 * The prepared append statement for `batch`: named `runs.append` with the parts it holds
 * (`runs.append+links+dispatch`; `runs.append` alone holds none), so each connection prepares
 * each combination once.
 */
export function appendStatement(batch: readonly AppendInput[]): { name: string; text: string } {
  const p = appendParts(batch);
  const parts = (Object.keys(p) as Array<keyof AppendParts>).filter((k) => p[k]);
  const name = ['runs.append', ...parts].join('+');
  let statement = appendStatements.get(name);
  if (!statement) appendStatements.set(name, (statement = { name, text: appendSql(p) }));
  return statement;
}


export interface AppendRow {
  ord: number;
  /** The item was not written: its run is the parent of another item's run (append it alone). */
  held: boolean;
  run: Record<string, unknown> | null;
  events: RawEvent[];
  dispatch: (RecordedDispatch & { job: RunExecuteJob }) | null;
  parents: Array<{ runId: string; lastSequence: number }> | null;
  parentDispatches: Array<RecordedDispatch & { job: RunExecuteJob }> | null;
  /** The item was not written: its bytes would have taken its organization past `quotaBytes`. */
  overQuota: boolean;
  /** The organization's stored bytes the quota check read (null: not checked). */
  orgStored: string | number | null;
}

export interface RawEvent {
  sequence: number;
  type: RunEvent['type'];
  payload: unknown;
  createdAt: string;
}

/**
 * One element of the creation statement's input ($1): the run, the status its first events leave
 * it in (the newest `run.status_changed` among them; none: submitted), its events and dispatch.
 */
export function createInput({ run, events, dispatch }: NewRunWithEvents) {
  const status = events.findLast((e) => e.type === 'run.status_changed')?.payload as { status: RunStatus } | undefined;
  return { ...run, metadata: run.metadata ?? null, status: status?.status ?? 'submitted', storedBytes: storedBytes(events), events, dispatch: dispatch ?? null };
}

const CLOSING = new Set<string>(['interaction.responded', 'interaction.expired', 'interaction.canceled']);

/**
 * One element of the append statement's input ($1): the run, its guard, the change and what it
 * carries. Deltas: open interactions (requested minus closed) and the interaction version (one
 * per interaction event).
 */
export interface AppendInput {
  runId: string;
  orgId: string;
  status: RunStatus | null;
  setBlocked: boolean;
  blockedReason: BlockedReason | null;
  from: readonly RunStatus[];
  blocked: boolean | null;
  threadId: string | null;
  openInteractionId: string | null;
  agentId: string | null;
  interactionVersion: number | null;
  openInteractions: number | null;
  lastSequence: number | null;
  epoch: number | null;
  takeOver: boolean;
  openDelta: number;
  versionDelta: number;
  /** The change is one a parent hears about (status or overlay). */
  statusChange: boolean;
  /** The sender of user messages: '' = anonymous, null = not given (the run's owner). */
  sentBy: string | null;
  storedBytes: number;
  /** The organization's storage quota the item is checked against (bytes); null: not checked. */
  quotaBytes: number | null;
  events: RunEvent[];
  dispatch: Partial<RunExecuteJob> | null;
}

export function appendInput(orgId: string, runId: string, guard: AppendGuard, events: RunEvent[], dispatch?: Partial<RunExecuteJob>, sentBy?: string | null): AppendInput {
  return {
    runId,
    orgId,
    status: guard.status ?? null,
    setBlocked: guard.blockedReason !== undefined,
    blockedReason: guard.blockedReason ?? null,
    from: guard.from,
    blocked: guard.blocked ?? null,
    threadId: guard.threadId ?? null,
    openInteractionId: guard.openInteractionId ?? null,
    agentId: guard.agentId ?? null,
    interactionVersion: guard.interactionVersion ?? null,
    openInteractions: guard.openInteractions ?? null,
    lastSequence: guard.lastSequence ?? null,
    epoch: guard.epoch ?? null,
    takeOver: guard.takeOver ?? false,
    openDelta: events.filter((e) => e.type === 'interaction.requested').length - events.filter((e) => CLOSING.has(e.type)).length,
    versionDelta: events.filter((e) => e.type.startsWith('interaction.')).length,
    statusChange: guard.status !== undefined || guard.blockedReason !== undefined,
    sentBy: sentBy === undefined ? null : (sentBy ?? ''),
    storedBytes: storedBytes(events),
    quotaBytes: guard.quotaBytes ?? null,
    events,
    dispatch: dispatch ?? null,
  };
}

