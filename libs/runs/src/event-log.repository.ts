import { Injectable } from '@nestjs/common';
import type { BlockedReason, RunEvent, RunStatus, SequencedOutputEnvelope } from '#libs/contracts';
import { DatabaseService } from '#libs/db';

/** A run row as the append path returns it (the state after the append). */
export interface RunRecord {
  id: string;
  orgId: string;
  agentId: string;
  revisionId: string;
  threadId: string;
  status: RunStatus;
  blockedReason: BlockedReason | null;
  lastSequence: number;
  originMessageId: string;
  metadata: Record<string, unknown> | null;
  createdAt: Date;
  updatedAt: Date;
  statusAt: Date;
}

/** The run and the envelopes one append committed. */
export interface AppendResult {
  run: RunRecord;
  envelopes: SequencedOutputEnvelope[];
}

export interface NewRun {
  id: string;
  orgId: string;
  agentId: string;
  revisionId: string;
  threadId: string;
  originMessageId: string;
  metadata?: Record<string, unknown> | null;
}

/**
 * Guarded state change for `append`: the run must currently be in one of `from` (and, when
 * `blocked` is given, be blocked / not blocked). `status` / `blockedReason` are the new values;
 * undefined leaves a column as it is.
 */
export interface AppendGuard {
  from: readonly RunStatus[];
  blocked?: boolean;
  status?: RunStatus;
  blockedReason?: BlockedReason | null;
}

const RUN_COLUMNS = `id, org_id AS "orgId", agent_id AS "agentId", revision_id AS "revisionId",
  thread_id AS "threadId", status, blocked_reason AS "blockedReason", last_sequence AS "lastSequence",
  origin_message_id AS "originMessageId", metadata, created_at AS "createdAt",
  updated_at AS "updatedAt", status_at AS "statusAt"`;

/*
 * The tail shared by create and append: given CTE `r` (the run row after the change, with its new
 * last_sequence) and $events (a JSON array of {type, payload}), insert the events with sequences
 * last_sequence-n+1 .. last_sequence, then derive the projections from exactly those events.
 * Everything is one statement, so one round trip and one transaction: either the state change,
 * its events and their projections all commit, or none does.
 */
const TAIL = `
, ev AS (
  INSERT INTO run_events (run_id, sequence, org_id, type, payload, created_at)
  SELECT r.id, r.last_sequence - $EVN::int + e.ord::int, r.org_id, e.item->>'type', e.item->'payload', r.updated_at
  FROM r CROSS JOIN LATERAL jsonb_array_elements($EVJ::jsonb) WITH ORDINALITY AS e(item, ord)
  RETURNING run_id, sequence, type, payload, created_at
), msg AS (
  INSERT INTO messages (id, org_id, agent_id, run_id, message_id, role, parts, metadata, extensions, sequence, created_at)
  SELECT gen_random_uuid(), r.org_id, r.agent_id, r.id, ev.payload->'message'->>'messageId',
         ev.payload->'message'->>'role', ev.payload->'message'->'parts', ev.payload->'message'->'metadata',
         ARRAY(SELECT jsonb_array_elements_text(COALESCE(ev.payload->'message'->'extensions', '[]'::jsonb))),
         ev.sequence, ev.created_at
  FROM ev, r WHERE ev.payload ? 'message'
  RETURNING 1
), art_new AS (
  INSERT INTO artifacts AS a (id, org_id, run_id, artifact_id, name, description, parts, metadata, extensions, complete, sequence, updated_sequence, created_at)
  SELECT gen_random_uuid(), r.org_id, r.id, ev.payload->>'artifactId', ev.payload->>'name', ev.payload->>'description',
         ev.payload->'parts', ev.payload->'metadata',
         ARRAY(SELECT jsonb_array_elements_text(COALESCE(ev.payload->'extensions', '[]'::jsonb))),
         COALESCE((ev.payload->>'lastChunk')::boolean, false), ev.sequence, ev.sequence, ev.created_at
  FROM ev, r WHERE ev.type = 'artifact.updated'
  ON CONFLICT (run_id, artifact_id) DO UPDATE SET
    parts = CASE WHEN (SELECT (e2.payload->>'append')::boolean FROM ev e2 WHERE e2.type = 'artifact.updated' LIMIT 1)
                 THEN a.parts || EXCLUDED.parts ELSE EXCLUDED.parts END,
    name = COALESCE(EXCLUDED.name, a.name),
    description = COALESCE(EXCLUDED.description, a.description),
    metadata = COALESCE(EXCLUDED.metadata, a.metadata),
    complete = EXCLUDED.complete,
    updated_sequence = EXCLUDED.updated_sequence
  RETURNING 1
), ir_new AS (
  INSERT INTO interaction_requests (id, org_id, run_id, kind, blocked_reason, status, request, sequence, created_at)
  SELECT (ev.payload->>'interactionId')::uuid, r.org_id, r.id, ev.payload->>'kind', ev.payload->>'blockedReason',
         'open', ev.payload, ev.sequence, ev.created_at
  FROM ev, r WHERE ev.type = 'interaction.requested'
  RETURNING 1
), ir_done AS (
  UPDATE interaction_requests ir
  SET status = CASE WHEN ev.payload->>'resolution' = 'answered' THEN 'resolved' ELSE 'canceled' END,
      response = ev.payload, resolved_at = ev.created_at
  FROM ev WHERE ev.type = 'interaction.resolved' AND ir.id = (ev.payload->>'interactionId')::uuid AND ir.run_id = ev.run_id
  RETURNING 1
)
SELECT (SELECT row_to_json(x) FROM (SELECT ${RUN_COLUMNS} FROM r) x) AS run,
       (SELECT COALESCE(json_agg(json_build_object('sequence', ev.sequence, 'type', ev.type, 'payload', ev.payload, 'createdAt', ev.created_at) ORDER BY ev.sequence), '[]'::json) FROM ev) AS events`;

function tail(evnParam: number, evjParam: number): string {
  return TAIL.replaceAll('$EVN', `$${evnParam}`).replaceAll('$EVJ', `$${evjParam}`);
}

const CREATE_SQL = `
WITH r AS (
  INSERT INTO runs (id, org_id, agent_id, revision_id, thread_id, status, blocked_reason, last_sequence,
                    origin_message_id, metadata, created_at, updated_at, status_at)
  VALUES ($1, $2, $3, $4, $5, 'submitted', NULL, $6, $7, $8::jsonb, now(), now(), now())
  ON CONFLICT (org_id, agent_id, origin_message_id) DO NOTHING
  RETURNING *
)${tail(6, 9)}`;

const APPEND_SQL = `
WITH r AS (
  UPDATE runs SET
    last_sequence = last_sequence + $3,
    status = COALESCE($4::run_status, status),
    blocked_reason = CASE WHEN $5::boolean THEN $6::text ELSE blocked_reason END,
    updated_at = now(),
    status_at = CASE WHEN $4::run_status IS NOT NULL OR $5::boolean THEN now() ELSE status_at END,
    ended_at = CASE WHEN $4::run_status IN ('completed', 'failed', 'canceled', 'rejected') THEN now() ELSE ended_at END
  WHERE id = $1 AND org_id = $2 AND status = ANY($7::run_status[])
    AND ($8::boolean IS NULL OR (blocked_reason IS NOT NULL) = $8::boolean)
  RETURNING *
)${tail(3, 9)}`;

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

/**
 * The event log: the one append path for every run event (invariant 1 in docs/architecture.md),
 * and the reads every projection is built from.
 *
 * Sequences are allocated by incrementing `runs.last_sequence` inside the same statement that
 * inserts the events, so the run row lock orders concurrent appends to one run and the log stays
 * gapless (1..last_sequence) with no duplicates — no `max(seq)+1`, no global sequence.
 */
@Injectable()
export class EventLogRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Create a run with its first events (sequence 1..n) in one round trip.
   * Returns null when a run with the same (org, agent, originMessageId) exists: the caller then
   * reads that run (a retried SendMessage has exactly one effect).
   * Errors: pg unique violation (23505) when a message id in `events` is already recorded.
   */
  async create(run: NewRun, events: RunEvent[]): Promise<AppendResult | null> {
    const rows = await this.db.query<{ run: Record<string, unknown> | null; events: RawEvent[] }>(CREATE_SQL, [
      run.id,
      run.orgId,
      run.agentId,
      run.revisionId,
      run.threadId,
      events.length,
      run.originMessageId,
      run.metadata ? JSON.stringify(run.metadata) : null,
      JSON.stringify(events),
    ], 'runs.create');
    return this.result(rows[0]);
  }

  /**
   * Append `events` to a run and apply the guarded state change, in one statement.
   * Returns null when the run does not exist in the org or the guard does not hold (the caller
   * reads the run to say which). At most one `artifact.updated` per call.
   */
  async append(orgId: string, runId: string, guard: AppendGuard, events: RunEvent[]): Promise<AppendResult | null> {
    if (events.length === 0) throw new Error('append needs at least one event');
    if (events.filter((e) => e.type === 'artifact.updated').length > 1) {
      throw new Error('append takes at most one artifact.updated event');
    }
    const rows = await this.db.query<{ run: Record<string, unknown> | null; events: RawEvent[] }>(APPEND_SQL, [
      runId,
      orgId,
      events.length,
      guard.status ?? null,
      guard.blockedReason !== undefined,
      guard.blockedReason ?? null,
      guard.from,
      guard.blocked ?? null,
      JSON.stringify(events),
    ], 'runs.append');
    return this.result(rows[0]);
  }

  /**
   * Events of a run with sequence > `afterSequence`, in order, at most `limit`.
   * Scoped by org: another org's run reads as empty.
   */
  async readAfter(orgId: string, runId: string, afterSequence: number, limit = 1000): Promise<SequencedOutputEnvelope[]> {
    const rows = await this.db.query<{ sequence: number; type: RunEvent['type']; payload: unknown; createdAt: Date; threadId: string }>(
      `SELECT e.sequence, e.type, e.payload, e.created_at AS "createdAt", r.thread_id AS "threadId"
         FROM run_events e JOIN runs r ON r.id = e.run_id
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

  private result(row: { run: Record<string, unknown> | null; events: RawEvent[] } | undefined): AppendResult | null {
    if (!row?.run) return null;
    const run = toRecord(row.run);
    return {
      run,
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

export { RUN_COLUMNS };
