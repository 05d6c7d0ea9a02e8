import { Inject, Injectable } from '@nestjs/common';
import { AppError, isDependencyUnavailable } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { JOB_INLINE_INPUT_MAX_BYTES, type BlockedReason, type RunEvent, type RunExecuteJob, type RunKind, type RunStatus, type SequencedOutputEnvelope } from '#libs/contracts';
import { DatabaseService, PG_UNIQUE_VIOLATION, sqlState } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { injectTrace } from '#libs/telemetry';
import { GroupCommit } from './group-commit.js';
import { duplicateMessage } from './run-errors.js';
import { RUN_PARTITIONED_TABLES, createEventPartitions } from './run-event-partitions.repository.js';
import { planPartitions } from './run-event-periods.js';

/** A run row as the append path returns it (the state after the append). */
export interface RunRecord {
  id: string;
  orgId: string;
  agentId: string;
  revisionId: string;
  threadId: string;
  /** `execution` (a runtime executes it) or `reply` (answered directly when its message arrived, recorded complete). */
  kind: RunKind;
  status: RunStatus;
  blockedReason: BlockedReason | null;
  lastSequence: number;
  originMessageId: string;
  metadata: Record<string, unknown> | null;
  createdAt: Date;
  updatedAt: Date;
  statusAt: Date;
  /** Open InteractionRequests (blocking or not). */
  openInteractions: number;
  /** Bumped by every interaction event: the optimistic guard of commands that close them. */
  interactionVersion: number;
  /** The principal that created the run (`key:<api key id>`), null when anonymous. */
  createdBy: string | null;
}

/** The run and the envelopes one append committed (and the dispatch it recorded, if asked). */
export interface AppendResult {
  run: RunRecord;
  envelopes: SequencedOutputEnvelope[];
  dispatch: (RecordedDispatch & { job: RunExecuteJob }) | null;
  /** Parent runs that got a `run.link_updated` in the same statement (their new last sequence). */
  parents: Array<{ runId: string; lastSequence: number }>;
  /** Dispatches of awaiting parents whose child settled with this append. */
  parentDispatches: Array<RecordedDispatch & { job: RunExecuteJob }>;
}

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

/** A run as `create` returns it: the row, and the dispatch recorded with it (when one was asked). */
export interface CreatedRun {
  run: RunRecord;
  dispatch: RecordedDispatch | null;
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
  status?: RunStatus;
  blockedReason?: BlockedReason | null;
}

/**
 * The organization check of a run looked up by id, the org id being parameter `$<param>`. Written so that no index
 * can serve it: the lookup then always goes through the index on the run's id (`runs_id_idx`; the
 * primary key is (org_id, id)). Under Citus the router planner needs a plain `org_id = $n` (served
 * by the primary key), see docs/deploy.md "Past one PostgreSQL". Plain `org_id = $2` let
 * a generic plan cached while `runs` was nearly empty (a fresh database, a new pool connection)
 * pick an org-leading index and scan every run of the organization on each call — measured: the
 * append 0.94 -> 0.34 ms and SendMessage +55% req/s on `npm run bench`.
 */
export function orgMatches(param: number): string {
  return `(org_id = $${param}) IS TRUE`;
}

/**
 * A point read of one run's rows in a partitioned table (run_events, messages, artifacts) joins
 * this instead of naming the run id itself: `FROM ${RUN_FENCE_SQL} JOIN run_events e ON e.org_id =
 * r.org_id AND e.run_id = r.id`, $1 the run id, $2 the org id. With `e.run_id = $1`, a custom plan
 * prunes the partitions when it is made and so can look cheaper than the generic plan (which
 * prunes when it runs) every time: PostgreSQL then plans the statement anew on every call — the
 * read of a run's newest event of a type did, 0.19 ms of planning per proxied task in `npm run
 * bench` (a2a runtime: saved state, extensions). Behind the OFFSET 0 fence the run id reaches the
 * partitioned table only as the outer row's value, so both plans prune at run time, cost the same,
 * and the generic one is kept (test/run-view-plan.test.ts). Columns: `id`, `org_id`.
 */
export const RUN_FENCE_SQL = `(SELECT id, org_id FROM runs WHERE id = $1 AND ${orgMatches(2)} OFFSET 0) r`;

/**
 * `messages.sent_by` of the agent's own messages: no caller id takes this value (callers are
 * `key:…`, `jwt:…`, or '' when anonymous), so a caller's messageId never collides with the agent's.
 */
export const AGENT_SENDER = 'agent';

const RUN_COLUMNS = `id, org_id AS "orgId", agent_id AS "agentId", revision_id AS "revisionId",
  thread_id AS "threadId", kind, status, blocked_reason AS "blockedReason", last_sequence AS "lastSequence",
  origin_message_id AS "originMessageId", metadata, created_at AS "createdAt",
  updated_at AS "updatedAt", status_at AS "statusAt", open_interactions AS "openInteractions",
  interaction_version AS "interactionVersion", created_by AS "createdBy"`;

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
const CREATE_BATCH_SQL = `
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
const APPEND_BATCH_MAX = 64;

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
 * - `dispatch`: an item carries a dispatch (its outbox row).
 */
export interface AppendParts {
  links: boolean;
  artifacts: boolean;
  interactions: boolean;
  linked: boolean;
  dispatch: boolean;
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
         (x->>'storedBytes')::bigint AS stored_bytes, (x->>'statusChange')::boolean AS status_change, x->>'sentBy' AS sent_by
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
                                                    WHERE ir.id = i.open_interaction_id AND ir.run_id = i.id AND ir.status = 'open')) AS interaction_open
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
    stored_bytes = runs.stored_bytes + i.stored_bytes
  FROM todo i
  WHERE runs.id = i.id AND NOT i.held AND i.interaction_open AND (runs.org_id = i.org_id) IS TRUE
    AND runs.status = ANY(i.from_statuses)
    AND (i.blocked IS NULL OR (runs.blocked_reason IS NOT NULL) = i.blocked)
    AND (i.thread_id IS NULL OR runs.thread_id = i.thread_id)
    AND (i.agent_id IS NULL OR runs.agent_id = i.agent_id)
    AND (i.interaction_version IS NULL OR runs.interaction_version = i.interaction_version)
    AND (i.open_interactions IS NULL OR runs.open_interactions = i.open_interactions)
    AND (i.last_sequence IS NULL OR runs.last_sequence = i.last_sequence)
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
};

/**
 * The append statement with the parts `p` (all parts: APPEND_SQL). Without `links`, no item is
 * held (nothing else's status changes) and no parent is named in the result.
 */
export function appendSql(p: AppendParts): string {
  const left = new Set<string>();
  for (const part of Object.keys(APPEND_PART_CTES) as Array<keyof AppendParts>) if (!p[part]) for (const n of APPEND_PART_CTES[part]) left.add(n);
  const ctes = APPEND_CTES.filter(([n]) => !left.has(n)).map(([, sql]) => sql.replace('@held', p.links ? 'EXISTS (SELECT 1 FROM links WHERE links.parent_run_id = i.id)' : 'false'));
  return `
WITH ${ctes.join(', ')}
SELECT i.ord, i.held, rj.run, ${p.dispatch ? 'oj.dispatch' : 'NULL::json AS dispatch'}, ${p.links ? 'pj.parents' : 'NULL::json AS parents'},
       ${p.links ? 'dj.dispatches' : 'NULL::json'} AS "parentDispatches", COALESCE(evj.events, '[]'::json) AS events
FROM todo i LEFT JOIN rj ON rj.id = i.id LEFT JOIN evj ON evj.run_id = i.id${p.dispatch ? ' LEFT JOIN oj ON oj.run_id = i.id' : ''}${
    p.links ? ' LEFT JOIN pj ON pj.child_id = i.id LEFT JOIN dj ON dj.child_id = i.id' : ''
  }
ORDER BY i.ord`;
}

/** The whole append statement (every part). */
export const APPEND_SQL = appendSql({ links: true, artifacts: true, interactions: true, linked: true, dispatch: true });

/** The parts a batch of appends needs (see AppendParts). */
export function appendParts(batch: readonly AppendInput[]): AppendParts {
  const p: AppendParts = { links: false, artifacts: false, interactions: false, linked: false, dispatch: false };
  for (const item of batch) {
    if (item.statusChange) p.links = true;
    if (item.dispatch) p.dispatch = true;
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
function appendStatement(batch: readonly AppendInput[]): { name: string; text: string } {
  const p = appendParts(batch);
  const parts = (Object.keys(p) as Array<keyof AppendParts>).filter((k) => p[k]);
  const name = ['runs.append', ...parts].join('+');
  let statement = appendStatements.get(name);
  if (!statement) appendStatements.set(name, (statement = { name, text: appendSql(p) }));
  return statement;
}


interface AppendRow {
  ord: number;
  /** The item was not written: its run is the parent of another item's run (append it alone). */
  held: boolean;
  run: Record<string, unknown> | null;
  events: RawEvent[];
  dispatch: (RecordedDispatch & { job: RunExecuteJob }) | null;
  parents: Array<{ runId: string; lastSequence: number }> | null;
  parentDispatches: Array<RecordedDispatch & { job: RunExecuteJob }> | null;
}

interface RawEvent {
  sequence: number;
  type: RunEvent['type'];
  payload: unknown;
  createdAt: string;
}

function toRecord(raw: Record<string, unknown>): RunRecord {
  return {
    ...(raw as unknown as RunRecord),
    createdAt: new Date(raw.createdAt as string),
    updatedAt: new Date(raw.updatedAt as string),
    statusAt: new Date(raw.statusAt as string),
  };
}

type Query = DatabaseService['query'];

/** SQLSTATE of a deadlock PostgreSQL broke by aborting this statement (nothing of it committed). */
/**
 * The bulk-load path of run archives (docs/architecture.md "Archives"): the second and last writer
 * of `run_events`, used only by `restore` into an organization that has no runs. It writes rows
 * exactly as an archive recorded them (the log with its sequences, the projections the append path
 * had derived, the run row with its `last_sequence`), so nothing is re-derived and the restored
 * runs read back identically. Links are restored where both runs are (in this batch or earlier).
 * The key table of user messages (`message_keys`) is filled from the restored messages, so a
 * restored user messageId is refused on another run as it was before the export.
 * Inputs: $1 runs, $2 run_events, $3 messages, $4 artifacts, $5 interaction_requests, $6 run_links
 * (jsonb arrays of rows with snake_case columns), $7 the organization.
 */
const RESTORE_SQL = `
WITH r AS (
  INSERT INTO runs SELECT * FROM jsonb_populate_recordset(NULL::runs, $1::jsonb) RETURNING id
), e AS (
  INSERT INTO run_events SELECT * FROM jsonb_populate_recordset(NULL::run_events, $2::jsonb) RETURNING 1
), m AS (
  INSERT INTO messages SELECT * FROM jsonb_populate_recordset(NULL::messages, $3::jsonb)
  RETURNING id, org_id, agent_id, run_id, sent_by, message_id
), mk AS (
  -- the user messages' keys, as the append path writes them (message_keys is derived, not archived)
  INSERT INTO message_keys (org_id, agent_id, sent_by, message_id, run_id, message_row_id)
  SELECT org_id, agent_id, sent_by, message_id, run_id, id FROM m WHERE sent_by <> '${AGENT_SENDER}'
  RETURNING 1
), a AS (
  INSERT INTO artifacts SELECT * FROM jsonb_populate_recordset(NULL::artifacts, $4::jsonb) RETURNING 1
), i AS (
  INSERT INTO interaction_requests SELECT * FROM jsonb_populate_recordset(NULL::interaction_requests, $5::jsonb) RETURNING 1
), l AS (
  INSERT INTO run_links
  SELECT x.* FROM jsonb_populate_recordset(NULL::run_links, $6::jsonb) x
   WHERE (x.parent_run_id IN (SELECT id FROM r) OR EXISTS (SELECT 1 FROM runs p WHERE p.id = x.parent_run_id AND p.org_id = $7))
     AND (x.child_run_id IN (SELECT id FROM r) OR EXISTS (SELECT 1 FROM runs c WHERE c.id = x.child_run_id AND c.org_id = $7))
  RETURNING 1
)
SELECT (SELECT count(*) FROM r)::int AS runs, (SELECT count(*) FROM e)::int AS events, (SELECT count(*) FROM l)::int AS links`;

/** One statement's worth of archived rows for `restore` (snake_case columns, org, agent and revision ids set). */
export interface RestoreBatch {
  runs: Record<string, unknown>[];
  events: Record<string, unknown>[];
  messages: Record<string, unknown>[];
  artifacts: Record<string, unknown>[];
  interactions: Record<string, unknown>[];
  links: Record<string, unknown>[];
}

/** What `restore` wrote. */
export interface RestoreResult {
  runs: number;
  events: number;
  linksSkipped: number;
}

const PG_DEADLOCK = '40P01';

/**
 * An insert into a partitioned table (RUN_PARTITIONED_TABLES: `run_events`, `messages`,
 * `artifacts`, `push_deliveries`) found no partition for its run id inside the window the DEFAULT
 * partition refuses (its CHECK `<table>_legacy_outside_periods`, migrations
 * 20261127110000_run_events_partitioned, 20261127130000_projections_partitioned and
 * 20261127140000_messages_partitioned): the current period does not exist yet.
 */
function missingPartition(e: unknown): boolean {
  const constraint = (e as { constraint?: unknown }).constraint;
  return sqlState(e) === '23514' && typeof constraint === 'string' && RUN_PARTITIONED_TABLES.some((t) => constraint === `${t}_legacy_outside_periods`);
}


/**
 * The event log: the one append path for every run event (invariant 1 in docs/architecture.md),
 * and the reads every projection is built from.
 *
 * Sequences are allocated by incrementing `runs.last_sequence` inside the same statement that
 * inserts the events, so the run row lock orders concurrent appends to one run and the log stays
 * gapless (1..last_sequence) with no duplicates — no `max(seq)+1`, no global sequence.
 *
 * Creations are group-committed: creations that arrive while earlier ones are in flight are
 * written together by one statement (one round trip, one commit), each still its own run with
 * its own log. Database errors leave as AppErrors (`run.duplicate_message`), never SQLSTATEs.
 */
@Injectable()
export class EventLogRepository {
  private readonly creates: GroupCommit<NewRunWithEvents, CreatedRun | null>;
  private readonly appends: GroupCommit<AppendInput, AppendResult | null>;

  constructor(
    private readonly db: DatabaseService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {
    this.creates = new GroupCommit((batch) => this.createBatch(batch), {
      maxInFlight: Math.min(config.DATABASE_GROUP_COMMIT_IN_FLIGHT, config.DATABASE_POOL_MAX),
      maxBatch: 64,
    });
    // one batch holds at most one append per run, and a run's appends go out one after another
    this.appends = new GroupCommit((batch) => this.appendBatch(batch), {
      maxInFlight: Math.min(config.DATABASE_GROUP_COMMIT_IN_FLIGHT, config.DATABASE_POOL_MAX),
      maxBatch: APPEND_BATCH_MAX,
      key: (item) => item.runId,
    });
  }

  /**
   * Create a run with its first events (sequence 1..n) and its dispatch, in one statement shared
   * with the creations running concurrently (group commit). Resolves to the created run and the
   * outbox row of its dispatch, or null
   * when a run with the same (org, agent, createdBy, originMessageId) exists (a retried
   * SendMessage of the same caller: it reads that run). Errors: `run.duplicate_message` when a
   * user message's id in `events` is already recorded for the agent and the same sender (on
   * another run), or two messages of `events` have the same sender and id.
   */
  create(item: NewRunWithEvents): Promise<CreatedRun | null> {
    return this.creates.submit(item);
  }

  private async createBatch(batch: readonly NewRunWithEvents[]): Promise<Array<PromiseSettledResult<CreatedRun | null>>> {
    try {
      return (await this.insertRuns(batch)).map((value) => ({ status: 'fulfilled', value }));
    } catch (e) {
      if (batch.length === 1 || !(e instanceof AppError)) throw e;
      // one of them reuses a recorded messageId: create them one by one so only that one fails
      return Promise.allSettled(batch.map((item) => this.insertRuns([item]).then((r) => r[0]!)));
    }
  }

  /**
   * `fn` creating the runs `runIds`, and once more after creating their periods (the partitions of
   * every partitioned table) when it failed for want of one (partition maintenance fell behind: the DEFAULT
   * partition refuses new run ids, see missingPartition). Rare by design; it keeps a late
   * maintenance from failing creations. A run id's period is read from its UUIDv7 time.
   */
  private async partitioned<T>(runIds: readonly string[], fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (!missingPartition(e)) throw e;
      const times = new Set(runIds.map((id) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16)));
      const interval = this.config.RUN_EVENTS_PARTITION_INTERVAL;
      const created = await createEventPartitions(this.db, (existing) => [...times].flatMap((ms) => planPartitions(existing, ms, interval, 1)), true);
      if (created?.length) this.metrics.runEventPartitionsCreated.inc(created.length);
      return fn();
    }
  }

  private async insertRuns(batch: readonly NewRunWithEvents[]): Promise<Array<CreatedRun | null>> {
    const input = batch.map(createInput);
    let rows: Record<string, unknown>[];
    const t0 = process.hrtime.bigint();
    try {
      rows = await this.partitioned(batch.map((b) => b.run.id), () => this.db.query<Record<string, unknown>>(CREATE_BATCH_SQL, [JSON.stringify(input)], 'runs.create_batch'));
      this.metrics.appendDuration.observe({ kind: 'create' }, Metrics.since(t0));
    } catch (e) {
      if (sqlState(e) === PG_UNIQUE_VIOLATION) throw duplicateMessage(e);
      throw e;
    }
    const byId = new Map<string, CreatedRun>();
    for (const { dispatchId, triggerSequence, ...row } of rows) {
      byId.set(row.id as string, {
        run: toRecord(row),
        dispatch: dispatchId != null ? { id: String(dispatchId), triggerSequence: Number(triggerSequence) } : null,
      });
    }
    if (rows.length > 0) this.metrics.runStatus.inc({ status: 'submitted' }, rows.length);
    for (const item of batch) if (byId.has(item.run.id)) this.count(item.events);
    return batch.map((item) => byId.get(item.run.id) ?? null);
  }

  /**
   * Append `events` to a run and apply the guarded state change, in one statement; with
   * `dispatch`, the outbox row for the user message among `events` too (its `inputMessageId` and
   * inline `context` are filled in from the run row and the message).
   * Group-committed: appends to other runs arriving while earlier ones are in flight share the
   * statement (each keeps its own guard and result); appends to one run go out one after another.
   * Returns null when the run does not exist in the org or the guard does not hold (the caller
   * reads the run to say which). Any number of `artifact.updated` per call (the projection folds them in order).
   * `sentBy`: who sends the user messages among `events` (`key:<api key id>`, `jwt:<iss>|<sub>`,
   * null = anonymous); absent: the run's owner. A user messageId is unique per (org, agent,
   * sender) across the agent's runs; the agent's own messageIds are unique within the run.
   * Errors: `run.duplicate_message` when a message id in `events` is already recorded for its
   * sender (a user message: on any run of the agent; an agent message: on this run).
   */
  append(
    orgId: string,
    runId: string,
    guard: AppendGuard,
    events: RunEvent[],
    dispatch?: Pick<RunExecuteJob, 'orgId' | 'runId' | 'trigger'> & Partial<RunExecuteJob>,
    sentBy?: string | null,
  ): Promise<AppendResult | null> {
    if (events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    return this.appends.submit(appendInput(orgId, runId, guard, events, dispatch && injectTrace(dispatch), sentBy));
  }

  /**
   * One group-commit batch of appends (distinct runs): one statement. When it fails for another
   * reason than an unreachable database (a duplicate messageId, a deadlock, a bad item), the items
   * are appended alone so only the bad one fails (a deadlock victim is sent again); a `held` item
   * is appended alone after it. An unreachable database fails every item (RuntimeOperations.apply
   * retries each by its expected sequence).
   */
  private async appendBatch(batch: readonly AppendInput[]): Promise<Array<PromiseSettledResult<AppendResult | null>>> {
    // runs locked in id order: concurrent batches (this process's, other processes') do not deadlock
    const order = batch.map((_, i) => i).sort((a, b) => (batch[a]!.runId < batch[b]!.runId ? -1 : 1));
    let sorted: AppendRow[];
    try {
      sorted = await this.appendRows(order.map((i) => batch[i]!));
    } catch (e) {
      if (isDependencyUnavailable(e) || (batch.length === 1 && sqlState(e) !== PG_DEADLOCK)) throw e;
      return Promise.allSettled(batch.map((item) => this.appendAlone(item)));
    }
    const rows: AppendRow[] = [];
    order.forEach((i, k) => (rows[i] = sorted[k]!));
    return Promise.allSettled(batch.map((item, i) => (rows[i]!.held ? this.appendAlone(item) : Promise.resolve(this.appended(item, rows[i]!)))));
  }

  /**
   * One item in its own statement. A deadlock (a batch locks several runs, then their parents, so
   * two statements can wait on each other; PostgreSQL aborts one) rolled it back: it is sent again.
   */
  private async appendAlone(item: AppendInput): Promise<AppendResult | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return this.appended(item, (await this.appendRows([item]))[0]!);
      } catch (e) {
        if (sqlState(e) !== PG_DEADLOCK || attempt >= 3) throw e;
      }
    }
  }

  /** The append statement for `batch`; a unique violation of a batch of one is `run.duplicate_message`. */
  private async appendRows(batch: readonly AppendInput[], q: Query = this.db.query.bind(this.db)): Promise<AppendRow[]> {
    const t0 = process.hrtime.bigint();
    try {
      const statement = appendStatement(batch);
      const rows = await q<AppendRow>(statement.text, [JSON.stringify(batch)], statement.name);
      this.metrics.appendDuration.observe({ kind: 'append' }, Metrics.since(t0));
      if (rows.length !== batch.length) throw new Error(`append: ${rows.length} rows for ${batch.length} items`);
      return rows;
    } catch (e) {
      if (batch.length === 1 && sqlState(e) === PG_UNIQUE_VIOLATION) throw duplicateMessage(e);
      throw e;
    }
  }

  /** An item's result from its row (null: its guard did not hold), its events counted. */
  private appended(item: AppendInput, row: AppendRow): AppendResult | null {
    const result = this.result(row);
    if (result) this.count(item.events);
    return result;
  }

  /**
   * Delegation (RunLink): create the child run (its first events and dispatch) and append the
   * parent's `run.linked` event, in ONE transaction — a link exists exactly when its child does.
   * The child's (createdBy, originMessageId) makes it idempotent: when such a run exists, nothing
   * is written and `{ child: null }` is returned (the caller reads the existing link).
   * Null when the parent's guard does not hold (nothing is written).
   */
  async createLinked(
    child: NewRunWithEvents,
    parent: { orgId: string; runId: string; guard: AppendGuard; events: RunEvent[] },
  ): Promise<{ child: CreatedRun | null; parent: AppendResult | null } | null> {
    type Outcome = { child: CreatedRun | null; parent: AppendResult | null } | null;
    const rollback = new Error('rollback');
    try {
      return await this.partitioned([child.run.id], () => this.db.transaction<Outcome>(async (q) => {
        const input = [createInput(child)];
        const rows = await q<Record<string, unknown>>(CREATE_BATCH_SQL, [JSON.stringify(input)]);
        if (rows.length === 0) return { child: null, parent: null };
        const { dispatchId, triggerSequence, ...row } = rows[0]!;
        const created: CreatedRun = {
          run: toRecord(row),
          dispatch: dispatchId != null ? { id: String(dispatchId), triggerSequence: Number(triggerSequence) } : null,
        };
        const appended = this.result((await this.appendRows([appendInput(parent.orgId, parent.runId, parent.guard, parent.events)], q))[0]);
        if (!appended) throw rollback;
        this.count(child.events);
        this.count(parent.events);
        this.metrics.runStatus.inc({ status: 'submitted' });
        return { child: created, parent: appended };
      }));
    } catch (e) {
      if (e === rollback) return null;
      if (sqlState(e) === PG_UNIQUE_VIOLATION) throw duplicateMessage(e);
      throw e;
    }
  }

  private count(events: readonly RunEvent[]): void {
    for (const e of events) {
      this.metrics.eventsAppended.inc({ type: e.type });
      if (e.type === 'run.status_changed') this.metrics.runStatus.inc({ status: e.payload.status });
    }
  }

  /**
   * Restore archived runs into `orgId`, all or nothing: ONE transaction that holds the
   * organization's import lock (a transaction-level advisory lock), refuses unless the organization
   * has no runs (409 `archive.org_not_empty`), then writes each batch with one statement
   * (RESTORE_SQL: the documented bulk-load path, not an append). A run id that exists already (in
   * any organization of this database) is 409 `archive.conflict`. Batches are pulled one at a time,
   * so a streamed archive is never held in memory; the transaction is bounded by
   * DATABASE_STATEMENT_TIMEOUT_MS of idleness between batches (a stalled upload rolls back).
   */
  async restore(orgId: string, batches: AsyncIterable<RestoreBatch>): Promise<RestoreResult> {
    try {
      return await this.db.transaction(async (q) => {
        await q(`SELECT pg_advisory_xact_lock(hashtextextended('aaas.run-archive.restore:' || $1, 0))`, [orgId]);
        const [taken] = await q<{ taken: boolean }>(`SELECT EXISTS (SELECT 1 FROM runs WHERE org_id = $1) AS taken`, [orgId]);
        if (taken!.taken) throw new AppError('archive.org_not_empty', 'an archive imports only into an organization that has no runs');
        const total: RestoreResult = { runs: 0, events: 0, linksSkipped: 0 };
        for await (const b of batches) {
          // run ids stay unique across the deployment (wake-ups, streams and caches key by run id
          // alone), though the keys lead with org_id now: an id another organization holds is refused
          const ids = b.runs.map((r) => (r as { id?: unknown }).id).filter((id): id is string => typeof id === 'string');
          const [held] = await q<{ held: boolean }>(`SELECT EXISTS (SELECT 1 FROM runs WHERE id = ANY($1::uuid[])) AS held`, [ids]);
          if (held!.held) throw new AppError('archive.conflict', 'a run of the archive exists already in this deployment');
          const [row] = await q<{ runs: number; events: number; links: number }>(
            RESTORE_SQL,
            [JSON.stringify(b.runs), JSON.stringify(b.events), JSON.stringify(b.messages), JSON.stringify(b.artifacts), JSON.stringify(b.interactions), JSON.stringify(b.links), orgId],
            'runs.restore',
          );
          total.runs += row!.runs;
          total.events += row!.events;
          total.linksSkipped += b.links.length - row!.links;
        }
        return total;
      });
    } catch (e) {
      const state = sqlState(e);
      if (state === PG_UNIQUE_VIOLATION) throw new AppError('archive.conflict', 'a run (or message id) of the archive exists already in this deployment', { cause: e });
      // data exceptions (22…) and other integrity violations (23…): rows PostgreSQL refused
      if (state?.startsWith('22') || state?.startsWith('23')) throw new AppError('archive.invalid', 'the archive holds a row this database refuses', { cause: e });
      throw e;
    }
  }

  /**
   * Events of a run with sequence > `afterSequence`, in order, at most `limit`.
   * Scoped by org: another org's run reads as empty.
   */
  async readAfter(orgId: string, runId: string, afterSequence: number, limit = 1000): Promise<SequencedOutputEnvelope[]> {
    const rows = await this.db.query<{ sequence: number; type: RunEvent['type']; payload: unknown; createdAt: Date; threadId: string }>(
      `SELECT e.sequence, e.type, e.payload, e.created_at AS "createdAt", r.thread_id AS "threadId"
         FROM run_events e JOIN runs r ON r.id = e.run_id AND r.org_id = e.org_id
        WHERE e.run_id = $1 AND e.org_id = $2 AND e.sequence > $3
        ORDER BY e.sequence LIMIT $4`,
      [runId, orgId, afterSequence, limit],
      'runs.read_after',
    );
    return rows.map((row) => ({
      runId,
      threadId: row.threadId,
      sequence: row.sequence,
      occurredAt: row.createdAt.toISOString(),
      event: { type: row.type, payload: row.payload } as RunEvent,
    }));
  }

  private result(row: AppendRow | undefined): AppendResult | null {
    if (!row?.run) return null;
    const run = toRecord(row.run);
    return {
      run,
      dispatch: row.dispatch,
      parents: row.parents ?? [],
      parentDispatches: row.parentDispatches ?? [],
      envelopes: row.events.map((e) => ({
        runId: run.id,
        threadId: run.threadId,
        sequence: e.sequence,
        occurredAt: new Date(e.createdAt).toISOString(),
        event: { type: e.type, payload: e.payload } as RunEvent,
      })),
    };
  }
}

/**
 * One element of the creation statement's input ($1): the run, the status its first events leave
 * it in (the newest `run.status_changed` among them; none: submitted), its events and dispatch.
 */
function createInput({ run, events, dispatch }: NewRunWithEvents) {
  const status = events.findLast((e) => e.type === 'run.status_changed')?.payload as { status: RunStatus } | undefined;
  return { ...run, metadata: run.metadata ?? null, status: status?.status ?? 'submitted', storedBytes: storedBytes(events), events, dispatch: dispatch ?? null };
}

const CLOSING = new Set<string>(['interaction.responded', 'interaction.expired', 'interaction.canceled']);

/**
 * One element of the append statement's input ($1): the run, its guard, the change and what it
 * carries. Deltas: open interactions (requested minus closed) and the interaction version (one
 * per interaction event).
 */
interface AppendInput {
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
  openDelta: number;
  versionDelta: number;
  /** The change is one a parent hears about (status or overlay). */
  statusChange: boolean;
  /** The sender of user messages: '' = anonymous, null = not given (the run's owner). */
  sentBy: string | null;
  storedBytes: number;
  events: RunEvent[];
  dispatch: Partial<RunExecuteJob> | null;
}

function appendInput(orgId: string, runId: string, guard: AppendGuard, events: RunEvent[], dispatch?: Partial<RunExecuteJob>, sentBy?: string | null): AppendInput {
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
    openDelta: events.filter((e) => e.type === 'interaction.requested').length - events.filter((e) => CLOSING.has(e.type)).length,
    versionDelta: events.filter((e) => e.type.startsWith('interaction.')).length,
    statusChange: guard.status !== undefined || guard.blockedReason !== undefined,
    sentBy: sentBy === undefined ? null : (sentBy ?? ''),
    storedBytes: storedBytes(events),
    events,
    dispatch: dispatch ?? null,
  };
}

/**
 * Bytes `events` add to a run's storage (runs.stored_bytes, the unit of storage quotas): the
 * UTF-8 JSON of each message they carry and of each artifact chunk's parts. The same measure
 * StorageQuotas admits a caller's message with (`messageBytes`).
 */
export function storedBytes(events: readonly RunEvent[]): number {
  let n = 0;
  for (const e of events) {
    const p = e.payload as { message?: unknown; parts?: unknown };
    if (p.message !== undefined) n += Buffer.byteLength(JSON.stringify(p.message));
    if (e.type === 'artifact.updated' && p.parts !== undefined) n += Buffer.byteLength(JSON.stringify(p.parts));
  }
  return n;
}

export { RUN_COLUMNS };
