import { Injectable } from '@nestjs/common';
import type { BlockedReason, RunKind, RunStatus, SequencedOutputEnvelope } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { EventLogRepository } from '../event-log.repository.js';
import { RUN_COLUMNS } from '../run-record.js';
import { runNotFound } from '../run-errors.js';
import { foldState } from '../run-state.js';
import {
  INTERACTION_COLUMNS,
  STATUS_EVENT_SQL,
  isUuid,
  selectInteractions,
  selectLinks,
  selectRun,
  selectViews,
  toRunState,
  type InteractionRecord,
  type RunLinkRecord,
  type RunListFilter,
  type RunState,
  type RunView,
  type RunViewOptions,
} from './run-rows.repository.js';

/**
 * The terms of the filter of `list` / `count` on the columns `runs` and `run_counts` share (org,
 * agent, status, blocked reason, creator, kind), parameters numbered as `listParams` gives them.
 * Statements using it stay unnamed (planned per call with the actual values): a generic plan
 * of its `$n IS NULL OR ...` terms could not pick the index the given filters need.
 */
const KEY_WHERE = `org_id = $1
          AND ($2::uuid IS NULL OR agent_id = $2)
          AND ($4::run_status[] IS NULL OR status = ANY($4))
          AND (NOT $7::boolean OR blocked_reason IS NULL)
          AND ($8::text[] IS NULL OR blocked_reason = ANY($8))
          AND (NOT $9::boolean OR created_by IS NOT DISTINCT FROM $10::text)
          AND ($11::text IS NULL OR kind = $11)`;

/** The whole filter of `list` / `count` as SQL over `runs`: KEY_WHERE, the thread and the status time. */
const LIST_WHERE = `${KEY_WHERE}
          AND ($3::text IS NULL OR thread_id = $3)
          AND ($5::timestamptz IS NULL OR status_at > $5)
          AND ($6::timestamptz IS NULL OR status_at >= $6)`;

/** The count of KEY_WHERE's runs from `run_counts` (no thread or time filter: $3, $5, $6 are null). */
const COUNTED_SQL = `SELECT coalesce(sum(n), 0) AS n FROM run_counts
        WHERE ${KEY_WHERE}
          AND $3::text IS NULL AND $5::timestamptz IS NULL AND $6::timestamptz IS NULL`;

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

/** What the admin API shows of one run: its read model, its InteractionRequests and its RunLinks. */
export interface RunDetail {
  view: RunView;
  interactions: InteractionRecord[];
  links: { children: RunLinkRecord[]; parents: RunLinkRecord[] };
}

/**
 * The views of runs the protocol faces show: the A2A adapter (Task = a run's read model, ListTasks,
 * the stream's state at a cursor) and the admin API (runs, their detail and log, interactions).
 * All projections of the event log, scoped by organization; never writes.
 * Errors: `run.not_found` from `require`, `view` and `detail` (also when the run belongs to another
 * agent than the one given).
 */
@Injectable()
export class RunViews {
  constructor(
    private readonly db: DatabaseService,
    private readonly log: EventLogRepository,
  ) {}

  /** The run and its open interactions, or null (another org's run is null too). */
  get(orgId: string, runId: string): Promise<RunState | null> {
    return selectRun(this.db, orgId, runId);
  }

  /** The run and its open interactions. Errors: `run.not_found` (also when it is not `agentId`'s). */
  async require(orgId: string, runId: string, agentId?: string): Promise<RunState> {
    const run = await selectRun(this.db, orgId, runId);
    if (!run || (agentId !== undefined && run.agentId !== agentId)) throw runNotFound(runId);
    return run;
  }

  /**
   * The read model of a run: history limited to `historyLength` messages (undefined: all, 0: none),
   * artifacts unless `includeArtifacts` is false; one round trip. Errors: `run.not_found` (also
   * when it is not `agentId`'s).
   */
  async view(orgId: string, runId: string, opts: RunViewOptions & { agentId?: string } = {}): Promise<RunView> {
    const [view] = await selectViews(this.db, orgId, [runId], opts);
    if (!view || (opts.agentId !== undefined && view.run.agentId !== opts.agentId)) throw runNotFound(runId);
    return view;
  }

  /** Read models of several runs in one round trip (e.g. a page of `list`), in the order given; unknown ids are left out. */
  views(orgId: string, runIds: readonly string[], opts: RunViewOptions = {}): Promise<RunView[]> {
    return selectViews(this.db, orgId, runIds, opts);
  }

  /**
   * Runs newest status first, keyset-paginated on (status_at, id). Returns `limit + 1` rows at
   * most (the extra row says another page exists). `openInteractionId` is not read (null).
   * Lag-tolerant, like `search` and `count`: the read replica may serve it (DatabaseService.readQuery).
   */
  async list(orgId: string, f: RunListFilter): Promise<RunState[]> {
    const rows = await this.db.readQuery<Record<string, unknown>>(
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
   * How many runs match the filter of `list` (ignoring its cursor and limit). Without a thread or
   * time filter, the sum of `run_counts` (kept by triggers on runs, run-counts.repository.ts): its cost does
   * not grow with the runs. With one, a count of the runs (bounded by the thread or the window).
   */
  async count(orgId: string, f: Omit<RunListFilter, 'before' | 'limit'>): Promise<number> {
    const narrowed = f.threadId !== undefined || f.statusAfter !== undefined || f.statusFrom !== undefined;
    const rows = await this.db.readQuery<{ n: string }>(narrowed ? `SELECT count(*) AS n FROM runs WHERE ${LIST_WHERE}` : COUNTED_SQL, listParams(orgId, f));
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Full-text search (PostgreSQL `simple` configuration, every word must match) over the messages
   * of one agent's runs, newest status first, keyset-paginated like `list` (`limit + 1` rows at
   * most). `createdBy` given: only that principal's runs (null: anonymous callers'); `kind` given:
   * only runs of that kind.
   */
  async search(orgId: string, agentId: string, f: { query: string; createdBy?: string | null; kind?: RunKind; before?: { statusAt: Date; id: string }; limit: number }): Promise<RunState[]> {
    const rows = await this.db.readQuery<Record<string, unknown>>(
      `SELECT ${RUN_COLUMNS}, NULL AS "openInteractionId" FROM runs
        WHERE org_id = $1 AND agent_id = $2
          AND (NOT $3::boolean OR created_by IS NOT DISTINCT FROM $4::text)
          AND EXISTS (SELECT 1 FROM messages m WHERE m.run_id = runs.id AND m.org_id = runs.org_id
                       AND to_tsvector('simple', m.parts::text) @@ plainto_tsquery('simple', $5))
          AND ($6::timestamptz IS NULL OR (status_at, id) < ($6, $7::uuid))
          AND ($9::text IS NULL OR kind = $9)
        ORDER BY status_at DESC, id DESC
        LIMIT $8`,
      [orgId, agentId, f.createdBy !== undefined, f.createdBy ?? null, f.query, f.before?.statusAt ?? null, f.before?.id ?? null, f.limit + 1, f.kind ?? null],
    );
    return rows.map(toRunState);
  }

  /**
   * The run's (status, blockedReason) as of `sequence`: folded (run-state.ts foldState) from the
   * newest status-affecting event at or before it. A resumed stream projects from its cursor with
   * it, without replaying the whole log.
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

  /** The run's log after `afterSequence`, in order, at most `limit` envelopes (EventLogRepository.readAfter). */
  events(orgId: string, runId: string, afterSequence: number, limit?: number): Promise<SequencedOutputEnvelope[]> {
    return this.log.readAfter(orgId, runId, afterSequence, limit);
  }

  /** The admin API's run detail: the read model, every InteractionRequest and the RunLinks. Errors: `run.not_found`. */
  async detail(orgId: string, runId: string): Promise<RunDetail> {
    const [view, interactions, links] = await Promise.all([this.view(orgId, runId), selectInteractions(this.db, orgId, runId), selectLinks(this.db, orgId, runId)]);
    return { view, interactions, links };
  }

  /**
   * The organization's InteractionRequests across runs, newest first (by creation, then id), at
   * most `limit`; only those of `runId` / with `status` when given. An id that is not a UUID
   * matches nothing. A lag-tolerant read (the read replica may serve it).
   */
  async interactions(orgId: string, f: { runId?: string; status?: string; limit: number }): Promise<InteractionRecord[]> {
    if (f.runId !== undefined && !isUuid(f.runId)) return [];
    return this.db.readQuery<InteractionRecord>(
      `SELECT ${INTERACTION_COLUMNS}
         FROM interaction_requests
        WHERE org_id = $1 AND ($2::uuid IS NULL OR run_id = $2::uuid) AND ($3::text IS NULL OR status = $3::text)
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [orgId, f.runId ?? null, f.status ?? null, f.limit],
    );
  }
}
