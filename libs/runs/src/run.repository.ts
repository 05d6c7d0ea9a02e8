import { Injectable } from '@nestjs/common';
import type { BlockedReason, CanonicalMessage, Part, RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { RUN_COLUMNS, type RunRecord } from './event-log.repository.js';

/** A run with what its readers need beside the row: the open interaction, if any. */
export interface RunState extends RunRecord {
  openInteractionId: string | null;
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
          AND ($8::text[] IS NULL OR blocked_reason = ANY($8))`;

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
  ];
}

/** Options of RunRepository.view / .views. */
export interface RunViewOptions {
  /** Most recent messages to return; undefined = whole history, 0 = none. */
  historyLength?: number;
  /** Default true; false leaves `artifacts` empty without reading them. */
  includeArtifacts?: boolean;
}

const STATUS_EVENT_TYPES = ['run.status_changed', 'interaction.requested', 'interaction.resolved'];

/** The state a status-affecting event leaves the run in (no event: just created). */
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

function cleanMessage(row: { messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[] }): CanonicalMessage {
  const m: CanonicalMessage = { messageId: row.messageId, role: row.role as CanonicalMessage['role'], parts: row.parts };
  if (row.metadata) m.metadata = row.metadata as Record<string, unknown>;
  if (row.extensions?.length) m.extensions = row.extensions;
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
              (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open'
                ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId"
         FROM runs WHERE id = $1 AND org_id = $2`,
      [runId, orgId],
      'runs.get',
    );
    return rows[0] ? toRunState(rows[0]) : null;
  }

  async findByOriginMessage(orgId: string, agentId: string, messageId: string): Promise<RunState | null> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT id FROM runs WHERE org_id = $1 AND agent_id = $2 AND origin_message_id = $3`,
      [orgId, agentId, messageId],
    );
    return rows[0] ? this.get(orgId, rows[0].id) : null;
  }

  /** The run a message (by its author's messageId) belongs to, if it was recorded. */
  async findMessageRun(orgId: string, agentId: string, messageId: string): Promise<string | null> {
    const rows = await this.db.query<{ runId: string }>(
      `SELECT run_id AS "runId" FROM messages WHERE org_id = $1 AND agent_id = $2 AND message_id = $3`,
      [orgId, agentId, messageId],
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
          AND ($9::timestamptz IS NULL OR (status_at, id) < ($9, $10::uuid))
        ORDER BY status_at DESC, id DESC
        LIMIT $11`,
      [...listParams(orgId, f), f.before?.statusAt ?? null, f.before?.id ?? null, f.limit + 1],
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
                (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open'
                  ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId"
           FROM runs WHERE org_id = $2 AND id = ANY($1::uuid[])
       )
       SELECT row_to_json(r) AS run,
         (SELECT e.payload->'message' FROM run_events e
           WHERE e.run_id = r.id AND e.type = ANY($5::text[]) ORDER BY e.sequence DESC LIMIT 1) AS "statusMessage",
         (SELECT json_agg(h ORDER BY h.sequence) FROM (
            SELECT m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.sequence
              FROM messages m WHERE m.run_id = r.id
             ORDER BY m.sequence DESC LIMIT $3) h) AS history,
         CASE WHEN $4::boolean THEN (SELECT json_agg(json_build_object(
              'artifactId', a.artifact_id, 'name', a.name, 'description', a.description, 'parts', a.parts,
              'metadata', a.metadata, 'extensions', a.extensions, 'complete', a.complete) ORDER BY a.sequence)
            FROM artifacts a WHERE a.run_id = r.id) END AS artifacts
       FROM r
       ORDER BY array_position($1::uuid[], r.id)`,
      [ids, orgId, opts.historyLength ?? null, opts.includeArtifacts ?? true, STATUS_EVENT_TYPES],
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
          AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3, $4::uuid))
        ORDER BY updated_at, id LIMIT $2`,
      [olderThan, limit, after?.updatedAt ?? null, after?.id ?? null],
    );
  }

  /** Sequence of the newest user message of a run (the trigger of its current execution). */
  async lastUserMessage(orgId: string, runId: string): Promise<{ message: CanonicalMessage; sequence: number } | null> {
    const rows = await this.db.query<{ messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; sequence: number }>(
      `SELECT message_id AS "messageId", role, parts, metadata, extensions, sequence FROM messages
        WHERE run_id = $1 AND org_id = $2 AND role = 'user' ORDER BY sequence DESC LIMIT 1`,
      [runId, orgId],
    );
    const row = rows[0];
    return row ? { message: cleanMessage(row), sequence: row.sequence } : null;
  }

  /**
   * The run's (status, blockedReason) as of `sequence`: folded from the newest status-affecting
   * event at or before it (`run.status_changed`, `interaction.requested`, `interaction.resolved`).
   * Used to project a resumed stream from a cursor without replaying the whole log.
   */
  async stateAt(orgId: string, runId: string, sequence: number): Promise<{ status: RunStatus; blockedReason: BlockedReason | null }> {
    const rows = await this.db.query<{ type: string; payload: { status?: RunStatus; blockedReason?: BlockedReason | null } }>(
      `SELECT type, payload FROM run_events
        WHERE run_id = $1 AND org_id = $2 AND sequence <= $3 AND type = ANY($4::text[])
        ORDER BY sequence DESC LIMIT 1`,
      [runId, orgId, sequence, STATUS_EVENT_TYPES],
    );
    return foldState(rows[0]);
  }

  /**
   * What an execution needs, in one round trip: the run (status, revision, thread) and the
   * message that triggered it. Null when the run is not in the org.
   */
  async executionInput(orgId: string, runId: string, messageId: string): Promise<{ run: RunRecord; message: CanonicalMessage | null } | null> {
    const rows = await this.db.query<Record<string, unknown> & { message: Parameters<typeof cleanMessage>[0] | null }>(
      `SELECT ${RUN_COLUMNS},
              (SELECT json_build_object('messageId', m.message_id, 'role', m.role, 'parts', m.parts, 'metadata', m.metadata, 'extensions', m.extensions)
                 FROM messages m WHERE m.run_id = runs.id AND m.message_id = $3) AS message
         FROM runs WHERE id = $1 AND org_id = $2`,
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
         SELECT m.run_id AS "runId", m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.sequence, m.created_at
           FROM runs r JOIN messages m ON m.run_id = r.id
          WHERE r.org_id = $1 AND r.agent_id = $2 AND r.thread_id = $3
          ORDER BY m.created_at DESC, m.sequence DESC LIMIT $4) h
        ORDER BY h.created_at, h.sequence`,
      [orgId, agentId, threadId, limit],
      'runs.thread_history',
    );
    return rows.map((row) => ({ ...cleanMessage(row), runId: row.runId, sequence: row.sequence }));
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

