import { Injectable } from '@nestjs/common';
import type { ArtifactChunk, BlockedReason, CanonicalMessage, Part, RunStatus } from '#libs/contracts';
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
  /** Only runs whose status changed strictly after this time. */
  statusAfter?: Date;
  /** Keyset cursor: runs strictly older than (statusAt, id). */
  before?: { statusAt: Date; id: string };
  limit: number;
}

const STATUS_EVENT_TYPES = ['run.status_changed', 'interaction.requested', 'interaction.resolved'];

function toRunState(raw: Record<string, unknown>): RunState {
  return raw as unknown as RunState;
}

function cleanMessage(row: { messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[] }): CanonicalMessage {
  const m: CanonicalMessage = { messageId: row.messageId, role: row.role as CanonicalMessage['role'], parts: row.parts };
  if (row.metadata) m.metadata = row.metadata as Record<string, unknown>;
  if (row.extensions?.length) m.extensions = row.extensions;
  return m;
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
   * The read model of a run. `historyLength`: undefined = whole history, 0 = none.
   * One round trip (the projections are aggregated in SQL).
   */
  async view(orgId: string, runId: string, opts: { historyLength?: number; includeArtifacts?: boolean } = {}): Promise<RunView | null> {
    if (!isUuid(runId)) return null;
    const rows = await this.db.query<{ run: Record<string, unknown>; statusMessage: CanonicalMessage | null; history: unknown[] | null; artifacts: StoredArtifact[] | null }>(
      `WITH r AS (
         SELECT ${RUN_COLUMNS},
                (SELECT ir.id FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.status = 'open'
                  ORDER BY ir.sequence DESC LIMIT 1) AS "openInteractionId"
           FROM runs WHERE id = $1 AND org_id = $2
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
       FROM r`,
      [runId, orgId, opts.historyLength ?? null, opts.includeArtifacts ?? true, STATUS_EVENT_TYPES],
    );
    const row = rows[0];
    if (!row) return null;
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

  /** Runs newest status first, keyset-paginated on (status_at, id). Returns `limit + 1` rows at most. */
  async list(orgId: string, f: RunListFilter): Promise<RunState[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT ${RUN_COLUMNS}, NULL AS "openInteractionId" FROM runs
        WHERE org_id = $1
          AND ($2::uuid IS NULL OR agent_id = $2)
          AND ($3::text IS NULL OR thread_id = $3)
          AND ($4::run_status[] IS NULL OR status = ANY($4))
          AND ($5::timestamptz IS NULL OR status_at > $5)
          AND ($6::timestamptz IS NULL OR (status_at, id) < ($6, $7::uuid))
        ORDER BY status_at DESC, id DESC
        LIMIT $8`,
      [orgId, f.agentId ?? null, f.threadId ?? null, f.status ?? null, f.statusAfter ?? null, f.before?.statusAt ?? null, f.before?.id ?? null, f.limit + 1],
    );
    return rows.map(toRunState);
  }

  async count(orgId: string, f: Omit<RunListFilter, 'before' | 'limit'>): Promise<number> {
    const rows = await this.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM runs
        WHERE org_id = $1 AND ($2::uuid IS NULL OR agent_id = $2) AND ($3::text IS NULL OR thread_id = $3)
          AND ($4::run_status[] IS NULL OR status = ANY($4)) AND ($5::timestamptz IS NULL OR status_at > $5)`,
      [orgId, f.agentId ?? null, f.threadId ?? null, f.status ?? null, f.statusAfter ?? null],
    );
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Active, unblocked runs whose row has not changed since `olderThan` (sweeper candidates).
   * Across orgs by design: the sweeper is a platform process, and it acts per run with its org.
   */
  async staleCandidates(olderThan: Date, limit = 100): Promise<Array<{ id: string; orgId: string; lastSequence: number; status: RunStatus; blockedReason: BlockedReason | null }>> {
    return this.db.query(
      `SELECT id, org_id AS "orgId", last_sequence AS "lastSequence", status, blocked_reason AS "blockedReason"
         FROM runs WHERE status IN ('submitted', 'working') AND blocked_reason IS NULL AND updated_at < $1
        ORDER BY updated_at LIMIT $2`,
      [olderThan, limit],
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

  /** The runtime config of a revision (immutable once published, so callers may cache it by id). */
  async revisionRuntime(orgId: string, revisionId: string): Promise<unknown | null> {
    const rows = await this.db.query<{ runtime: unknown }>(
      `SELECT runtime FROM agent_revisions WHERE id = $1 AND org_id = $2`,
      [revisionId, orgId],
    );
    return rows[0]?.runtime ?? null;
  }

  async message(orgId: string, runId: string, messageId: string): Promise<{ message: CanonicalMessage; sequence: number } | null> {
    const rows = await this.db.query<{ messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; sequence: number }>(
      `SELECT message_id AS "messageId", role, parts, metadata, extensions, sequence FROM messages
        WHERE run_id = $1 AND org_id = $2 AND message_id = $3`,
      [runId, orgId, messageId],
    );
    const row = rows[0];
    return row ? { message: cleanMessage(row), sequence: row.sequence } : null;
  }
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Run ids are UUIDs; anything else cannot name a run (and must not reach a uuid cast). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

export type { ArtifactChunk };
