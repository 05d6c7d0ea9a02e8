import type { BlockedReason, CanonicalMessage, Part, RunKind, RunStatus } from '#libs/contracts';
import type { DatabaseService } from '#libs/db';
import { orgMatches, RUN_COLUMNS, type RunRecord } from '../run-record.js';

/*
 * The read side's shared part: the shapes its readers return and the statements more than one
 * reader runs (a run with its open interactions, read models, interactions, links). Each reader is
 * named for its caller (run-views: the protocol faces; execution-reads: the worker; sweeper-reads:
 * the sweepers; command-reads: the write side) and holds the statements only it needs. Every
 * statement is scoped by organization, except the sweeper's (platform-wide by design). Nothing
 * here writes: writes go through EventLogRepository.
 */

/** A run with what its readers need beside the row: its open interactions. */
export interface RunState extends RunRecord {
  /** The open blocking InteractionRequest (the one behind `blockedReason`), if any. */
  openInteractionId: string | null;
  /** Every open InteractionRequest (blocking or not); `get` reads them, lists leave this empty. */
  openInteractionIds?: string[];
  /** The fencing token of its executions (`runs.execution_epoch`, docs/architecture.md "The fence"); `get` reads it. */
  executionEpoch?: number;
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

/** Options of a run's read model (RunViews.view / .views, ExecutionReads.view). */
export interface RunViewOptions {
  /** Most recent messages to return; undefined = whole history, 0 = none. */
  historyLength?: number;
  /** Default true; false leaves `artifacts` empty without reading them. */
  includeArtifacts?: boolean;
  /**
   * Default false (the primary). True: a lag-tolerant read (a page of a list) that the read replica
   * may serve (DatabaseService.readQuery: the caller's own writes are still seen).
   */
  lagTolerant?: boolean;
}

/**
 * The events that set a run's (status, blockedReason), as a SQL predicate over `e`: the SQL twin
 * of run-state.ts's isStatusEvent (the two must agree; libs/push keeps a copy for its delivery).
 */
export const STATUS_EVENT_SQL = `(e.type IN ('run.status_changed', 'interaction.requested')
  OR (e.type IN ('interaction.responded', 'interaction.expired') AND COALESCE((e.payload->>'blocking')::boolean, true)))`;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Run ids are UUIDs; anything else cannot name a run (and must not reach a uuid cast). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

export function toRunState(raw: Record<string, unknown>): RunState {
  return raw as unknown as RunState;
}

export function cleanMessage(row: { messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; referenceTaskIds?: string[] }): CanonicalMessage {
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
    artifacts: (row.artifacts ?? []).map(cleanArtifact),
  };
}

/** An artifact as the read model shows it: absent (not SQL null) name, description and metadata; no empty extensions. */
export function cleanArtifact(a: StoredArtifact): StoredArtifact {
  return {
    ...a,
    name: a.name ?? undefined,
    description: a.description ?? undefined,
    metadata: a.metadata ?? undefined,
    extensions: a.extensions?.length ? a.extensions : undefined,
  };
}


/** The run (org-scoped) with its open interactions, or null (another org's run, or not a UUID, is null too). */
export async function selectRun(db: DatabaseService, orgId: string, runId: string): Promise<RunState | null> {
  if (!isUuid(runId)) return null;
  const rows = await db.query<Record<string, unknown>>(
    `SELECT ${RUN_COLUMNS},
            (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.org_id = runs.org_id AND ir.status = 'open' AND ir.blocking
              ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId",
            ARRAY(SELECT ir.id::text FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.org_id = runs.org_id AND ir.status = 'open'
              ORDER BY ir.sequence) AS "openInteractionIds",
            execution_epoch AS "executionEpoch"
       FROM runs WHERE id = $1 AND ${orgMatches(2)}`,
    [runId, orgId],
    'runs.get',
  );
  return rows[0] ? toRunState(rows[0]) : null;
}

/**
 * The read-model statement: the run(s) and their projections aggregated in SQL. `one`: the form
 * for a single run (`id = $1`) — its generic plan estimates one run, as a custom plan does, so the
 * plan cache keeps it (the array form's generic plan estimates ten runs, so PostgreSQL planned it
 * anew on every call: 0.48 ms of planning against 0.11 ms of execution per blocking SendMessage).
 */
function viewsSql(one: boolean): string {
  return `WITH r AS (
       SELECT ${RUN_COLUMNS},
              (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.org_id = runs.org_id AND ir.status = 'open' AND ir.blocking
                ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId"
         FROM runs WHERE ${one ? 'id = $1::uuid' : 'id = ANY($1::uuid[])'} AND ${orgMatches(2)}
     )
     SELECT row_to_json(r) AS run,
       (SELECT CASE WHEN e.type = 'interaction.responded' THEN NULL ELSE e.payload->'message' END FROM run_events e
         WHERE e.run_id = r.id AND e.org_id = $2 AND ${STATUS_EVENT_SQL} ORDER BY e.sequence DESC LIMIT 1) AS "statusMessage",
       (SELECT json_agg(h ORDER BY h.sequence) FROM (
          SELECT m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.reference_task_ids AS "referenceTaskIds", m.sequence
            FROM messages m WHERE m.run_id = r.id AND m.org_id = $2
           ORDER BY m.sequence DESC LIMIT $3) h) AS history,
       CASE WHEN $4::boolean THEN (SELECT json_agg(json_build_object(
            'artifactId', a.artifact_id, 'name', a.name, 'description', a.description, 'parts', a.parts,
            'metadata', a.metadata, 'extensions', a.extensions, 'complete', a.complete) ORDER BY a.sequence)
          FROM artifacts a WHERE a.run_id = r.id AND a.org_id = $2) END AS artifacts
     FROM r${one ? '' : '\n     ORDER BY array_position($1::uuid[], r.id)'}`;
}
/** The read model of one run: $1 run id, $2 org id, $3 historyLength (null: all), $4 includeArtifacts. */
export const RUN_VIEW_SQL = viewsSql(true);
const VIEWS_SQL = viewsSql(false);

/**
 * The read models of several runs in one round trip (the projections are aggregated in SQL), in
 * the order of `runIds`; ids that are not runs of `orgId` are left out. `historyLength`: undefined
 * = whole history, 0 = none; `includeArtifacts` defaults to true.
 */
export async function selectViews(db: DatabaseService, orgId: string, runIds: readonly string[], opts: RunViewOptions = {}): Promise<RunView[]> {
  const ids = runIds.filter(isUuid);
  if (ids.length === 0) return [];
  const one = ids.length === 1;
  const rows = await (opts.lagTolerant ? db.readQuery.bind(db) : db.query.bind(db))<ViewRow>(
    one ? RUN_VIEW_SQL : VIEWS_SQL,
    [one ? ids[0] : ids, orgId, opts.historyLength ?? null, opts.includeArtifacts ?? true],
    one ? 'runs.view' : 'runs.views',
  );
  return rows.map(toRunView);
}

/** The columns of an InteractionRecord, from `interaction_requests`. */
export const INTERACTION_COLUMNS = `id, run_id AS "runId", kind, blocking, blocked_reason AS "blockedReason", status, request, response,
            to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "expiresAt", sequence,
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
            to_char(resolved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "closedAt"`;

/** A run's InteractionRequests, oldest first (all of them: open and closed, for audit); one when `interactionId` is given. */
export async function selectInteractions(db: DatabaseService, orgId: string, runId: string, interactionId?: string): Promise<InteractionRecord[]> {
  if (!isUuid(runId) || (interactionId !== undefined && !isUuid(interactionId))) return [];
  return db.query<InteractionRecord>(
    `SELECT ${INTERACTION_COLUMNS}
       FROM interaction_requests WHERE org_id = $1 AND run_id = $2 AND ($3::uuid IS NULL OR id = $3::uuid)
      ORDER BY sequence`,
    [orgId, runId, interactionId ?? null],
  );
}

/** RunLinks of a run in both directions: where it is the parent (children) and the child (parents), each with the other run's status now. */
export async function selectLinks(db: DatabaseService, orgId: string, runId: string): Promise<{ children: RunLinkRecord[]; parents: RunLinkRecord[] }> {
  if (!isUuid(runId)) return { children: [], parents: [] };
  const rows = await db.query<RunLinkRecord & { direction: 'child' | 'parent' }>(
    `SELECT CASE WHEN l.parent_run_id = $2 THEN 'child' ELSE 'parent' END AS direction,
            l.id, l.kind, l.parent_run_id AS "parentRunId", l.child_run_id AS "childRunId", l.awaiting, l.sequence,
            to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
            json_build_object('runId', o.id, 'agentId', o.agent_id, 'status', o.status, 'blockedReason', o.blocked_reason) AS other
       FROM run_links l
       JOIN runs o ON o.org_id = l.org_id AND o.id = CASE WHEN l.parent_run_id = $2 THEN l.child_run_id ELSE l.parent_run_id END
      WHERE l.org_id = $1 AND (l.parent_run_id = $2 OR l.child_run_id = $2)
      ORDER BY l.created_at, l.id`,
    [orgId, runId],
  );
  const pick = (d: string) => rows.filter((r) => r.direction === d).map(({ direction: _d, ...r }) => r);
  return { children: pick('child'), parents: pick('parent') };
}
