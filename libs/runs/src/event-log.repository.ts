import { Inject, Injectable } from '@nestjs/common';
import { AppError, isDependencyUnavailable } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { RunEvent, RunExecuteJob, SequencedOutputEnvelope } from '#libs/contracts';
import { DatabaseService, PG_UNIQUE_VIOLATION, sqlState } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { injectTrace } from '#libs/telemetry';
import { GroupCommit } from './group-commit.js';
import { duplicateMessage, duplicateOperation } from './run-errors.js';
import { RUN_PARTITIONED_TABLES, createEventPartitions } from './run-event-partitions.repository.js';
import { planPartitions } from './run-event-periods.js';
import {
  APPEND_BATCH_MAX,
  CREATE_BATCH_SQL,
  appendInput,
  appendStatement,
  createInput,
  type AppendGuard,
  type AppendInput,
  type AppendRow,
  type NewRunWithEvents,
  type RecordedDispatch,
} from './append-sql.js';
import { AGENT_SENDER, toRecord, type RunRecord } from './run-record.js';

export type { AppendGuard, NewRun, NewRunWithEvents, RecordedDispatch } from './append-sql.js';

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

/** A run as `create` returns it: the row, and the dispatch recorded with it (when one was asked). */
export interface CreatedRun {
  run: RunRecord;
  dispatch: RecordedDispatch | null;
}

type Query = DatabaseService['query'];

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

/**
 * `org.storage_quota_exceeded` for an append the storage quota refused in its statement (the
 * `quota` part of the append statement: nothing of it was written).
 */
function refuseOverQuota(item: AppendInput, row: AppendRow): void {
  if (!row.overQuota) return;
  const stored = Number(row.orgStored ?? 0);
  throw new AppError('org.storage_quota_exceeded', `the organization's storage quota is exhausted (${stored} of ${item.quotaBytes} bytes stored; this write adds ${item.storedBytes})`, {
    details: { quotaBytes: item.quotaBytes, storedBytes: stored, writeBytes: item.storedBytes },
  });
}

/** SQLSTATE of a deadlock PostgreSQL broke by aborting this statement (nothing of it committed). */
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
   * sender (a user message: on any run of the agent; an agent message: on this run);
   * `run.duplicate_operation` when an operation id (`opId`) of `events` is in the run's log already;
   * `org.storage_quota_exceeded` when `guard.quotaBytes` is given and the organization's stored bytes
   * (org_storage, in the statement's snapshot) plus what `events` add would pass it (nothing written).
   * A guard with `epoch` is refused (null) when a newer execution holds the run; with `takeOver` the
   * append takes the run's executions over (docs/architecture.md "The fence").
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
    return Promise.allSettled(batch.map((item, i) => (rows[i]!.held ? this.appendAlone(item) : new Promise<AppendResult | null>((resolve) => resolve(this.appended(item, rows[i]!))))));
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

  /**
   * The append statement for `batch`; a unique violation of a batch of one is
   * `run.duplicate_operation` when it is the log's (an operation id the run's log holds: the only
   * unique key of `run_events` an append can meet, its sequences coming from the run row), else
   * `run.duplicate_message`.
   */
  private async appendRows(batch: readonly AppendInput[], q: Query = this.db.query.bind(this.db)): Promise<AppendRow[]> {
    const t0 = process.hrtime.bigint();
    try {
      const statement = appendStatement(batch);
      const rows = await q<AppendRow>(statement.text, [JSON.stringify(batch)], statement.name);
      this.metrics.appendDuration.observe({ kind: 'append' }, Metrics.since(t0));
      if (rows.length !== batch.length) throw new Error(`append: ${rows.length} rows for ${batch.length} items`);
      return rows;
    } catch (e) {
      if (batch.length === 1 && sqlState(e) === PG_UNIQUE_VIOLATION) throw String((e as { table?: unknown }).table ?? '').startsWith('run_events') ? duplicateOperation(e) : duplicateMessage(e);
      throw e;
    }
  }

  /**
   * An item's result from its row (null: its guard did not hold), its events counted. Throws
   * `org.storage_quota_exceeded` when the storage quota refused it (nothing of it was written).
   */
  private appended(item: AppendInput, row: AppendRow): AppendResult | null {
    refuseOverQuota(item, row);
    const result = this.result(row);
    if (result) this.count(item.events);
    return result;
  }

  /**
   * Delegation (RunLink): create the child run (its first events and dispatch) and append the
   * parent's `run.linked` event, in ONE transaction — a link exists exactly when its child does.
   * The child's (createdBy, originMessageId) makes it idempotent: when such a run exists, nothing
   * is written and `{ child: null }` is returned (the caller reads the existing link).
   * Null when the parent's guard does not hold (nothing is written). With `guard.quotaBytes`, the
   * parent's append is checked with the child's bytes counted (same transaction): over the quota,
   * nothing is written and `org.storage_quota_exceeded` is thrown.
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
        const parentInput = appendInput(parent.orgId, parent.runId, parent.guard, parent.events);
        const [parentRow] = await this.appendRows([parentInput], q);
        // the parent's check sees the child's bytes: this transaction's creation counted them (org_storage)
        refuseOverQuota(parentInput, parentRow!);
        const appended = this.result(parentRow);
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
   * Restore archived runs into `orgId`, all or nothing: ONE transaction that takes the
   * organization's import lock without waiting (a transaction-level advisory lock; held by another
   * import: 409 `archive.import_in_progress`), refuses unless the organization has no runs (409
   * `archive.org_not_empty`), then writes each batch with one statement (RESTORE_SQL: the
   * documented bulk-load path, not an append). A run id that exists already (in any organization of
   * this database) is 409 `archive.conflict`. Each statement runs under `statementTimeoutMs`
   * (SET LOCAL statement_timeout). After each batch the organization's stored bytes (org_storage,
   * which the runs' insert trigger has just grown by the batch's stored_bytes) are checked against
   * `quotaBytes` (null = unlimited): past it, 403 `org.storage_quota_exceeded` and nothing stays.
   * The caller hands batches that are ready (read and checked beforehand, RunArchives spools them):
   * the transaction never waits on a client.
   */
  async restore(orgId: string, batches: AsyncIterable<RestoreBatch>, opts: { statementTimeoutMs: number; quotaBytes: number | null }): Promise<RestoreResult> {
    try {
      return await this.db.transaction(async (q) => {
        await q(`SELECT set_config('statement_timeout', $1, true)`, [String(opts.statementTimeoutMs)]);
        const [lock] = await q<{ got: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.run-archive.restore:' || $1, 0)) AS got`, [orgId]);
        if (!lock!.got) throw new AppError('archive.import_in_progress', 'another archive import into this organization is running; retry once it has answered');
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
          if (opts.quotaBytes !== null) {
            const [used] = await q<{ stored: string }>(`SELECT COALESCE(sum(bytes), 0)::text AS stored FROM org_storage WHERE org_id = $1`, [orgId], 'runs.restore_stored');
            const stored = Number(used!.stored);
            if (stored > opts.quotaBytes) {
              throw new AppError('org.storage_quota_exceeded', `the archive takes the organization past its storage quota (${opts.quotaBytes} bytes): its first ${total.runs} runs alone store ${stored} bytes; nothing was imported`, {
                details: { quotaBytes: opts.quotaBytes, storedBytes: stored },
              });
            }
          }
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


