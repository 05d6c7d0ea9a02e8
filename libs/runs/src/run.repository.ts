import { Injectable } from '@nestjs/common';
import type { BlockedReason, CanonicalMessage, Part, RunKind, RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { orgMatches, RUN_COLUMNS, type RunRecord } from './event-log.repository.js';

/** A run with what its readers need beside the row: its open interactions. */
export interface RunState extends RunRecord {
  /** The open blocking InteractionRequest (the one behind `blockedReason`), if any. */
  openInteractionId: string | null;
  /** Every open InteractionRequest (blocking or not); `get` reads them, lists leave this empty. */
  openInteractionIds?: string[];
}

/** An InteractionRequest as its readers see it (the admin API, runtimes, adapters). */
export interface InteractionRecord {
  id: string;
  runId: string;
  kind: 'input' | 'auth' | 'confirmation';
  blocking: boolean;
  blockedReason: BlockedReason | null;
  /** open | resolved | rejected | expired | canceled */
  status: string;
  /** The `interaction.requested` payload (prompt, options, expiry, origin, state). */
  request: Record<string, unknown>;
  /** The closing event's payload with its `type` and `at`, once closed. */
  response: Record<string, unknown> | null;
  expiresAt: string | null;
  sequence: number;
  createdAt: string;
  closedAt: string | null;
}

/** A RunLink seen from either end, with the other run's current status. */
export interface RunLinkRecord {
  id: string;
  kind: 'delegation' | 'subtask' | 'handoff';
  parentRunId: string;
  childRunId: string;
  awaiting: boolean;
  /** The parent's sequence of its `run.linked` event. */
  sequence: number;
  createdAt: string;
  /** The other end: its agent and status now. */
  other: { runId: string; agentId: string; status: RunStatus; blockedReason: BlockedReason | null };
}

export interface StoredArtifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: Part[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
  complete: boolean;
}

/** Read model of one run: the run, its status message, history and artifacts (projections). */
export interface RunView {
  run: RunState;
  /** Message attached to the newest status event (A2A TaskStatus.message), if any. */
  statusMessage: CanonicalMessage | null;
  /** Oldest first; the last `historyLength` when limited. */
  history: CanonicalMessage[];
  artifacts: StoredArtifact[];
}

export interface RunListFilter {
  agentId?: string;
  threadId?: string;
  /** Only runs of this kind (e.g. `execution`: the protocol faces that list tasks); absent: any. */
  kind?: RunKind;
  status?: RunStatus[];
  /**
   * The interaction overlay: `'none'` = not blocked on the caller (`blocked_reason IS NULL`);
   * a list = blocked for one of these reasons. Absent = either.
   */
  blocked?: 'none' | BlockedReason[];
  /** Only runs whose status changed strictly after this time. */
  statusAfter?: Date;
  /** Only runs whose status changed at or after this time (A2A ListTasks `statusTimestampAfter`). */
  statusFrom?: Date;
  /** Only runs created by this principal (null: by anonymous callers); absent: anyone's. */
  createdBy?: string | null;
  /** Keyset cursor: runs strictly older than (statusAt, id). */
  before?: { statusAt: Date; id: string };
  limit: number;
}

/**
 * The filter of RunRepository.list / .count as SQL over `runs`, parameters from `$1` (org).
 * Statements using it stay unnamed (planned per call with the actual values): a generic plan
 * of its `$n IS NULL OR ...` terms could not pick the index the given filters need.
 */
const LIST_WHERE = `org_id = $1
          AND ($2::uuid IS NULL OR agent_id = $2)
          AND ($3::text IS NULL OR thread_id = $3)
          AND ($4::run_status[] IS NULL OR status = ANY($4))
          AND ($5::timestamptz IS NULL OR status_at > $5)
          AND ($6::timestamptz IS NULL OR status_at >= $6)
          AND (NOT $7::boolean OR blocked_reason IS NULL)
          AND ($8::text[] IS NULL OR blocked_reason = ANY($8))
          AND (NOT $9::boolean OR created_by IS NOT DISTINCT FROM $10::text)
          AND ($11::text IS NULL OR kind = $11)`;

function listParams(orgId: string, f: Omit<RunListFilter, 'before' | 'limit'>): unknown[] {
  return [
    orgId,
    f.agentId ?? null,
    f.threadId ?? null,
    f.status ?? null,
    f.statusAfter ?? null,
    f.statusFrom ?? null,
    f.blocked === 'none',
    Array.isArray(f.blocked) ? f.blocked : null,
    f.createdBy !== undefined,
    f.createdBy ?? null,
    f.kind ?? null,
  ];
}

/** Options of RunRepository.view / .views. */
export interface RunViewOptions {
  /** Most recent messages to return; undefined = whole history, 0 = none. */
  historyLength?: number;
  /** Default true; false leaves `artifacts` empty without reading them. */
  includeArtifacts?: boolean;
}

/**
 * The events that set a run's (status, blockedReason), as a SQL predicate over `e`: status
 * changes, interaction requests (the runtime's guard makes the run working), and the answer or
 * expiry of a blocking interaction (which lifts the overlay). A non-blocking interaction's answer
 * or expiry, cancellations (a status change follows) and link events leave the state alone.
 */
const STATUS_EVENT_SQL = `(e.type IN ('run.status_changed', 'interaction.requested')
  OR (e.type IN ('interaction.responded', 'interaction.expired') AND COALESCE((e.payload->>'blocking')::boolean, true)))`;

/** True when `e` is one of the events STATUS_EVENT_SQL selects. */
export function isStatusEvent(e: { type: string; payload: object }): boolean {
  if (e.type === 'run.status_changed' || e.type === 'interaction.requested') return true;
  if (e.type === 'interaction.responded' || e.type === 'interaction.expired') return (e.payload as { blocking?: boolean }).blocking !== false;
  return false;
}

/** The state a status-affecting event (see isStatusEvent) leaves the run in (no event: just created). */
export function foldState(e: { type: string; payload: object } | undefined): { status: RunStatus; blockedReason: BlockedReason | null } {
  if (!e) return { status: 'submitted', blockedReason: null };
  const p = e.payload as { status?: RunStatus; blockedReason?: BlockedReason | null };
  switch (e.type) {
    case 'run.status_changed':
      return { status: p.status!, blockedReason: p.blockedReason ?? null };
    case 'interaction.requested':
      return { status: 'working', blockedReason: p.blockedReason ?? null };
    default:
      return { status: 'working', blockedReason: null };
  }
}

function toRunState(raw: Record<string, unknown>): RunState {
  return raw as unknown as RunState;
}

function cleanMessage(row: { messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; referenceTaskIds?: string[] }): CanonicalMessage {
  const m: CanonicalMessage = { messageId: row.messageId, role: row.role as CanonicalMessage['role'], parts: row.parts };
  if (row.metadata) m.metadata = row.metadata as Record<string, unknown>;
  if (row.extensions?.length) m.extensions = row.extensions;
  if (row.referenceTaskIds?.length) m.referenceTaskIds = row.referenceTaskIds;
  return m;
}

/** A row of the `views` query: the run as JSON and its projections, aggregated in SQL. */
interface ViewRow {
  run: Record<string, unknown>;
  statusMessage: CanonicalMessage | null;
  history: unknown[] | null;
  artifacts: StoredArtifact[] | null;
}

function toRunView(row: ViewRow): RunView {
  return {
    run: toRunState(row.run),
    statusMessage: row.statusMessage,
    history: (row.history ?? []).map((h) => cleanMessage(h as Parameters<typeof cleanMessage>[0])),
    artifacts: (row.artifacts ?? []).map((a) => ({
      ...a,
      name: a.name ?? undefined,
      description: a.description ?? undefined,
      metadata: a.metadata ?? undefined,
      extensions: a.extensions?.length ? a.extensions : undefined,
    })),
  };
}

/**
 * Read queries over the run tables and their projections. Every query is scoped by org.
 * Never writes: writes go through EventLogRepository.
 */
@Injectable()
export class RunRepository {
  constructor(private readonly db: DatabaseService) {}

  async get(orgId: string, runId: string): Promise<RunState | null> {
    if (!isUuid(runId)) return null;
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT ${RUN_COLUMNS},
              (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open' AND ir.blocking
                ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId",
              ARRAY(SELECT ir.id::text FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open'
                ORDER BY ir.sequence) AS "openInteractionIds"
         FROM runs WHERE id = $1 AND ${orgMatches(2)}`,
      [runId, orgId],
      'runs.get',
    );
    return rows[0] ? toRunState(rows[0]) : null;
  }

  /**
   * The run `createdBy` (null: an anonymous caller) created with the message `messageId` (the
   * idempotency key of SendMessage, per caller). Served by the unique index on
   * (org_id, agent_id, COALESCE(created_by, ''), origin_message_id).
   */
  async findByOriginMessage(orgId: string, agentId: string, createdBy: string | null, messageId: string): Promise<RunState | null> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT id FROM runs WHERE org_id = $1 AND agent_id = $2 AND COALESCE(created_by, '') = $3 AND origin_message_id = $4`,
      [orgId, agentId, createdBy ?? '', messageId],
    );
    return rows[0] ? this.get(orgId, rows[0].id) : null;
  }

  /**
   * The run a user message with `messageId` sent by `sentBy` (null: anonymous) belongs to, if it
   * was recorded (a messageId is unique per sender). Served by the unique index on
   * (org_id, agent_id, sent_by, message_id).
   */
  async findMessageRun(orgId: string, agentId: string, sentBy: string | null, messageId: string): Promise<string | null> {
    const rows = await this.db.query<{ runId: string }>(
      `SELECT run_id AS "runId" FROM messages WHERE org_id = $1 AND agent_id = $2 AND sent_by = $3 AND message_id = $4`,
      [orgId, agentId, sentBy ?? '', messageId],
    );
    return rows[0]?.runId ?? null;
  }

  /**
   * The read model of a run. `historyLength`: undefined = whole history, 0 = none;
   * `includeArtifacts` defaults to true. One round trip (the projections are aggregated in SQL).
   */
  async view(orgId: string, runId: string, opts: RunViewOptions = {}): Promise<RunView | null> {
    return (await this.views(orgId, [runId], opts))[0] ?? null;
  }


  /**
   * Runs newest status first, keyset-paginated on (status_at, id). Returns `limit + 1` rows at
   * most (the extra row says another page exists). `openInteractionId` is not read (null).
   */
  async list(orgId: string, f: RunListFilter): Promise<RunState[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT ${RUN_COLUMNS}, NULL AS "openInteractionId" FROM runs
        WHERE ${LIST_WHERE}
          AND ($12::timestamptz IS NULL OR (status_at, id) < ($12, $13::uuid))
        ORDER BY status_at DESC, id DESC
        LIMIT $14`,
      [...listParams(orgId, f), f.before?.statusAt ?? null, f.before?.id ?? null, f.limit + 1],
    );
    return rows.map(toRunState);
  }

  /**
   * Full-text search (PostgreSQL `simple` configuration, every word must match) over the messages
   * of one agent's runs, newest status first, keyset-paginated like `list` (`limit + 1` rows at
   * most). `createdBy` given: only that principal's runs (null: anonymous callers'); `kind` given:
   * only runs of that kind.
   */
  async search(orgId: string, agentId: string, f: { query: string; createdBy?: string | null; kind?: RunKind; before?: { statusAt: Date; id: string }; limit: number }): Promise<RunState[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT ${RUN_COLUMNS}, NULL AS "openInteractionId" FROM runs
        WHERE org_id = $1 AND agent_id = $2
          AND (NOT $3::boolean OR created_by IS NOT DISTINCT FROM $4::text)
          AND EXISTS (SELECT 1 FROM messages m WHERE m.run_id = runs.id
                       AND to_tsvector('simple', m.parts::text) @@ plainto_tsquery('simple', $5))
          AND ($6::timestamptz IS NULL OR (status_at, id) < ($6, $7::uuid))
          AND ($9::text IS NULL OR kind = $9)
        ORDER BY status_at DESC, id DESC
        LIMIT $8`,
      [orgId, agentId, f.createdBy !== undefined, f.createdBy ?? null, f.query, f.before?.statusAt ?? null, f.before?.id ?? null, f.limit + 1, f.kind ?? null],
    );
    return rows.map(toRunState);
  }

  /** How many runs match the filter of `list` (ignoring its cursor and limit). */
  async count(orgId: string, f: Omit<RunListFilter, 'before' | 'limit'>): Promise<number> {
    const rows = await this.db.query<{ n: string }>(`SELECT count(*) AS n FROM runs WHERE ${LIST_WHERE}`, listParams(orgId, f));
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * The read models of several runs in one round trip (e.g. a page of `list`), in the order of
   * `runIds`; ids that are not runs of `orgId` are left out. Options as for `view`, per run.
   */
  async views(orgId: string, runIds: readonly string[], opts: RunViewOptions = {}): Promise<RunView[]> {
    const ids = runIds.filter(isUuid);
    if (ids.length === 0) return [];
    const rows = await this.db.query<ViewRow>(
      `WITH r AS (
         SELECT ${RUN_COLUMNS},
                (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open' AND ir.blocking
                  ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId"
           FROM runs WHERE id = ANY($1::uuid[]) AND ${orgMatches(2)}
       )
       SELECT row_to_json(r) AS run,
         (SELECT CASE WHEN e.type = 'interaction.responded' THEN NULL ELSE e.payload->'message' END FROM run_events e
           WHERE e.org_id = r."orgId" AND e.run_id = r.id AND ${STATUS_EVENT_SQL} ORDER BY e.sequence DESC LIMIT 1) AS "statusMessage",
         (SELECT json_agg(h ORDER BY h.sequence) FROM (
            SELECT m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.reference_task_ids AS "referenceTaskIds", m.sequence
              FROM messages m WHERE m.run_id = r.id
             ORDER BY m.sequence DESC LIMIT $3) h) AS history,
         CASE WHEN $4::boolean THEN (SELECT json_agg(json_build_object(
              'artifactId', a.artifact_id, 'name', a.name, 'description', a.description, 'parts', a.parts,
              'metadata', a.metadata, 'extensions', a.extensions, 'complete', a.complete) ORDER BY a.sequence)
            FROM artifacts a WHERE a.run_id = r.id) END AS artifacts
       FROM r
       ORDER BY array_position($1::uuid[], r.id)`,
      [ids, orgId, opts.historyLength ?? null, opts.includeArtifacts ?? true],
      'runs.views',
    );
    return rows.map(toRunView);
  }

  /**
   * Active, unblocked runs whose row has not changed since `olderThan` or whose execution lease
   * expired, and whose dispatch is not still waiting in the outbox (sweeper candidates).
   * Across orgs by design: the sweeper is a platform process, and it acts per run with its org.
   */
  async staleCandidates(
    olderThan: Date,
    limit = 100,
    after?: { updatedAt: Date; id: string },
  ): Promise<Array<{ id: string; orgId: string; lastSequence: number; status: RunStatus; blockedReason: BlockedReason | null; stale: boolean; leaseTrigger: number | null; leaseExpired: boolean; leaseLive: boolean; updatedAt: Date }>> {
    return this.db.query(
      `SELECT id, org_id AS "orgId", last_sequence AS "lastSequence", status, blocked_reason AS "blockedReason", updated_at AS "updatedAt",
              updated_at < $1 AS stale, lease_trigger AS "leaseTrigger",
              COALESCE(lease_expires_at < now(), false) AS "leaseExpired",
              COALESCE(lease_expires_at >= now(), false) AS "leaseLive"
         FROM runs WHERE status IN ('submitted', 'working') AND blocked_reason IS NULL
          AND (updated_at < $1 OR lease_expires_at < now())
          AND NOT EXISTS (SELECT 1 FROM run_dispatches d WHERE d.run_id = runs.id)
          -- waiting on purpose: for the answer to an open interaction, or for a child it awaits
          AND NOT EXISTS (SELECT 1 FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open')
          AND NOT EXISTS (SELECT 1 FROM run_links l JOIN runs c ON c.id = l.child_run_id
                           WHERE l.parent_run_id = runs.id AND l.awaiting AND c.status IN ('submitted', 'working'))
          AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3, $4::uuid))
        ORDER BY updated_at, id LIMIT $2`,
      [olderThan, limit, after?.updatedAt ?? null, after?.id ?? null],
    );
  }

  /**
   * Sequence of the event that triggered the run's current execution: its newest user message
   * (a new input or an answer), expiry that continues it, settlement of a child it awaits, or the
   * resumption of a lost execution.
   * Null when none (a run that never had input).
   */
  async lastTrigger(orgId: string, runId: string): Promise<number | null> {
    const rows = await this.db.query<{ seq: number | null }>(
      `SELECT max(e.sequence) AS seq FROM run_events e
        WHERE e.run_id = $1 AND e.org_id = $2 AND (
              (e.type IN ('message.added', 'interaction.responded') AND e.payload->'message'->>'role' = 'user')
           OR (e.type = 'interaction.expired' AND e.payload->>'outcome' = 'continue')
           OR e.type = 'run.execution_resumed'
           OR (e.type = 'run.link_updated' AND e.payload->>'status' IN ('completed', 'failed', 'canceled', 'rejected')
               AND EXISTS (SELECT 1 FROM run_links l WHERE l.id = (e.payload->>'linkId')::uuid AND l.awaiting)))`,
      [runId, orgId],
    );
    return rows[0]?.seq ?? null;
  }

  /**
   * The event that triggered the execution a resumption (`run.execution_resumed` at `before`)
   * replaces: the newest trigger event (as `lastTrigger` counts them, resumptions aside) before
   * `before`. `first`: it is the run's first user message (the run's creation). Null when none.
   */
  async triggerBefore(orgId: string, runId: string, before: number): Promise<{ sequence: number; type: string; payload: Record<string, unknown>; first: boolean } | null> {
    const rows = await this.db.query<{ sequence: number; type: string; payload: Record<string, unknown>; first: boolean }>(
      `SELECT e.sequence, e.type, e.payload,
              NOT EXISTS (SELECT 1 FROM run_events p WHERE p.org_id = e.org_id AND p.run_id = e.run_id AND p.sequence < e.sequence
                            AND p.type IN ('message.added', 'interaction.responded') AND p.payload->'message'->>'role' = 'user') AS first
         FROM run_events e
        WHERE e.run_id = $1 AND e.org_id = $2 AND e.sequence < $3 AND (
              (e.type IN ('message.added', 'interaction.responded') AND e.payload->'message'->>'role' = 'user')
           OR (e.type = 'interaction.expired' AND e.payload->>'outcome' = 'continue')
           OR (e.type = 'run.link_updated' AND e.payload->>'status' IN ('completed', 'failed', 'canceled', 'rejected')
               AND EXISTS (SELECT 1 FROM run_links l WHERE l.id = (e.payload->>'linkId')::uuid AND l.awaiting)))
        ORDER BY e.sequence DESC LIMIT 1`,
      [runId, orgId, before],
      'runs.trigger_before',
    );
    return rows[0] ?? null;
  }

  /** The operation ids (`opId`) the run's events carry, oldest first (RuntimeOp.opId). */
  async operationIds(orgId: string, runId: string): Promise<string[]> {
    const rows = await this.db.query<{ op_id: string }>(
      `SELECT payload->>'opId' AS op_id FROM run_events WHERE run_id = $1 AND org_id = $2 AND payload ? 'opId' ORDER BY sequence`,
      [runId, orgId],
      'runs.operation_ids',
    );
    return rows.map((r) => r.op_id);
  }

  /**
   * The newest event of `type` in a run's log (its payload and sequence) and how many there are;
   * null payload when none. One round trip, scoped by organization.
   */
  async latestOfType(orgId: string, runId: string, type: string): Promise<{ payload: unknown; sequence: number; count: number } | null> {
    const rows = await this.db.query<{ payload: unknown; sequence: number; count: number }>(
      `SELECT (array_agg(payload ORDER BY sequence DESC))[1] AS payload, max(sequence) AS sequence, count(*)::int AS count
         FROM run_events WHERE run_id = $1 AND org_id = $2 AND type = $3 HAVING count(*) > 0`,
      [runId, orgId, type],
      'runs.latest_of_type',
    );
    return rows[0] ?? null;
  }

  /** How many times a run was resumed: in all, and after a lost execution (not handed on). */
  async resumptions(orgId: string, runId: string): Promise<{ total: number; lost: number }> {
    const rows = await this.db.query<{ total: number; lost: number }>(
      `SELECT count(*)::int AS total, (count(*) FILTER (WHERE (payload->>'handedOn') IS DISTINCT FROM 'true'))::int AS lost
         FROM run_events WHERE run_id = $1 AND org_id = $2 AND type = 'run.execution_resumed'`,
      [runId, orgId],
      'runs.resumptions',
    );
    return rows[0] ?? { total: 0, lost: 0 };
  }

  /**
   * The run's (status, blockedReason) as of `sequence`: folded from the newest status-affecting
   * event at or before it (see isStatusEvent).
   * Used to project a resumed stream from a cursor without replaying the whole log.
   */
  async stateAt(orgId: string, runId: string, sequence: number): Promise<{ status: RunStatus; blockedReason: BlockedReason | null }> {
    const rows = await this.db.query<{ type: string; payload: { status?: RunStatus; blockedReason?: BlockedReason | null } }>(
      `SELECT e.type, e.payload FROM run_events e
        WHERE e.run_id = $1 AND e.org_id = $2 AND e.sequence <= $3 AND ${STATUS_EVENT_SQL}
        ORDER BY e.sequence DESC LIMIT 1`,
      [runId, orgId, sequence],
    );
    return foldState(rows[0]);
  }

  /**
   * What an execution needs, in one round trip: the run (status, revision, thread) and the
   * message that triggered it (`messageId` null: the run's newest user message). Null when the
   * run is not in the org.
   */
  async executionInput(orgId: string, runId: string, messageId: string | null): Promise<{ run: RunRecord; message: CanonicalMessage | null } | null> {
    const rows = await this.db.query<Record<string, unknown> & { message: Parameters<typeof cleanMessage>[0] | null }>(
      `SELECT ${RUN_COLUMNS},
              (SELECT json_build_object('messageId', m.message_id, 'role', m.role, 'parts', m.parts, 'metadata', m.metadata, 'extensions', m.extensions, 'referenceTaskIds', m.reference_task_ids)
                 FROM messages m WHERE m.run_id = runs.id AND ($3::text IS NULL AND m.role = 'user' OR m.message_id = $3)
                ORDER BY m.sequence DESC LIMIT 1) AS message
         FROM runs WHERE id = $1 AND ${orgMatches(2)}`,
      [runId, orgId, messageId],
      'runs.execution_input',
    );
    const row = rows[0];
    if (!row) return null;
    const { message, ...run } = row;
    return { run: run as unknown as RunRecord, message: message ? cleanMessage(message) : null };
  }

  /**
   * The messages of a thread (A2A contextId) of one agent, oldest first across its runs (by commit
   * time, then sequence): the conversation so far. At most `limit`, the newest ones.
   */
  async threadHistory(orgId: string, agentId: string, threadId: string, limit: number): Promise<Array<CanonicalMessage & { runId: string; sequence: number }>> {
    const rows = await this.db.query<{ runId: string; messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; sequence: number }>(
      `SELECT * FROM (
         SELECT m.run_id AS "runId", m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.reference_task_ids AS "referenceTaskIds", m.sequence, m.created_at
           FROM runs r JOIN messages m ON m.run_id = r.id
          WHERE r.org_id = $1 AND r.agent_id = $2 AND r.thread_id = $3
          ORDER BY m.created_at DESC, m.sequence DESC LIMIT $4) h
        ORDER BY h.created_at, h.sequence`,
      [orgId, agentId, threadId, limit],
      'runs.thread_history',
    );
    return rows.map((row) => ({ ...cleanMessage(row), runId: row.runId, sequence: row.sequence }));
  }

  /** A run's InteractionRequests, oldest first (all of them: open and closed, for audit). */
  async interactions(orgId: string, runId: string, interactionId?: string): Promise<InteractionRecord[]> {
    if (!isUuid(runId) || (interactionId !== undefined && !isUuid(interactionId))) return [];
    return this.db.query<InteractionRecord>(
      `SELECT id, run_id AS "runId", kind, blocking, blocked_reason AS "blockedReason", status, request, response,
              to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "expiresAt", sequence,
              to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
              to_char(resolved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "closedAt"
         FROM interaction_requests WHERE org_id = $1 AND run_id = $2 AND ($3::uuid IS NULL OR id = $3::uuid)
        ORDER BY sequence`,
      [orgId, runId, interactionId ?? null],
    );
  }

  /**
   * The organization's InteractionRequests across runs, newest first (by creation, then id), at
   * most `limit`; only those of `runId` / with `status` when given. An id that is not a UUID matches
   * nothing.
   */
  async listInteractions(orgId: string, f: { runId?: string; status?: string; limit: number }): Promise<InteractionRecord[]> {
    if (f.runId !== undefined && !isUuid(f.runId)) return [];
    return this.db.query<InteractionRecord>(
      `SELECT id, run_id AS "runId", kind, blocking, blocked_reason AS "blockedReason", status, request, response,
              to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "expiresAt", sequence,
              to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
              to_char(resolved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "closedAt"
         FROM interaction_requests
        WHERE org_id = $1 AND ($2::uuid IS NULL OR run_id = $2::uuid) AND ($3::text IS NULL OR status = $3::text)
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [orgId, f.runId ?? null, f.status ?? null, f.limit],
    );
  }

  /** Open interactions whose `expiresAt` passed, across orgs (sweeper candidates), oldest first. */
  async expiredInteractions(limit: number): Promise<Array<{ id: string; orgId: string; runId: string }>> {
    return this.db.query(
      `SELECT id, org_id AS "orgId", run_id AS "runId" FROM interaction_requests
        WHERE status = 'open' AND expires_at IS NOT NULL AND expires_at <= now()
        ORDER BY expires_at LIMIT $1`,
      [limit],
    );
  }

  /** RunLinks of a run in both directions: where it is the parent (children) and the child (parents). */
  async links(orgId: string, runId: string): Promise<{ children: RunLinkRecord[]; parents: RunLinkRecord[] }> {
    if (!isUuid(runId)) return { children: [], parents: [] };
    const rows = await this.db.query<RunLinkRecord & { direction: 'child' | 'parent' }>(
      `SELECT CASE WHEN l.parent_run_id = $2 THEN 'child' ELSE 'parent' END AS direction,
              l.id, l.kind, l.parent_run_id AS "parentRunId", l.child_run_id AS "childRunId", l.awaiting, l.sequence,
              to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
              json_build_object('runId', o.id, 'agentId', o.agent_id, 'status', o.status, 'blockedReason', o.blocked_reason) AS other
         FROM run_links l
         JOIN runs o ON o.id = CASE WHEN l.parent_run_id = $2 THEN l.child_run_id ELSE l.parent_run_id END
        WHERE l.org_id = $1 AND (l.parent_run_id = $2 OR l.child_run_id = $2)
        ORDER BY l.created_at, l.id`,
      [orgId, runId],
    );
    const pick = (d: string) => rows.filter((r) => r.direction === d).map(({ direction: _d, ...r }) => r);
    return { children: pick('child'), parents: pick('parent') };
  }

  /** Active children of runs that ended (their parent was canceled or failed), across orgs (sweeper). */
  async orphanedChildren(limit: number): Promise<Array<{ orgId: string; runId: string; parentRunId: string; parentStatus: RunStatus }>> {
    return this.db.query(
      `SELECT c.org_id AS "orgId", c.id AS "runId", p.id AS "parentRunId", p.status AS "parentStatus"
         FROM run_links l JOIN runs c ON c.id = l.child_run_id JOIN runs p ON p.id = l.parent_run_id
        WHERE c.status IN ('submitted', 'working') AND p.status IN ('canceled', 'failed')
        LIMIT $1`,
      [limit],
    );
  }

  /** Depth of a run in its RunLink tree (0: not anyone's child), counted up to `max + 1`. */
  async linkDepth(runId: string, max: number): Promise<number> {
    const rows = await this.db.query<{ d: number | null }>(
      `WITH RECURSIVE up(run_id, d) AS (
         SELECT parent_run_id, 1 FROM run_links WHERE child_run_id = $1
         UNION ALL
         SELECT l.parent_run_id, up.d + 1 FROM run_links l JOIN up ON l.child_run_id = up.run_id WHERE up.d <= $2
       ) SELECT max(d) AS d FROM up`,
      [runId, max],
    );
    return rows[0]?.d ?? 0;
  }

  /** The published agent of `slug` in the org: its id and active revision (null: none). */
  async publishedAgent(orgId: string, slug: string): Promise<{ agentId: string; revisionId: string } | null> {
    const rows = await this.db.query<{ agentId: string; revisionId: string | null }>(
      `SELECT id AS "agentId", active_revision_id AS "revisionId" FROM agents WHERE org_id = $1 AND slug = $2`,
      [orgId, slug],
    );
    const row = rows[0];
    return row?.revisionId ? { agentId: row.agentId, revisionId: row.revisionId } : null;
  }

  /** The link whose child run is `childRunId`, if any. */
  async linkOfChild(orgId: string, childRunId: string): Promise<{ id: string; parentRunId: string; kind: string } | null> {
    const rows = await this.db.query<{ id: string; parentRunId: string; kind: string }>(
      `SELECT id, parent_run_id AS "parentRunId", kind FROM run_links WHERE org_id = $1 AND child_run_id = $2`,
      [orgId, childRunId],
    );
    return rows[0] ?? null;
  }

  /** The runtime config of a revision (immutable once published, so callers may cache it by id). */
  async revisionRuntime(orgId: string, revisionId: string): Promise<unknown | null> {
    const rows = await this.db.query<{ runtime: unknown }>(
      `SELECT runtime FROM agent_revisions WHERE id = $1 AND org_id = $2`,
      [revisionId, orgId],
    );
    return rows[0]?.runtime ?? null;
  }

}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Run ids are UUIDs; anything else cannot name a run (and must not reach a uuid cast). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

