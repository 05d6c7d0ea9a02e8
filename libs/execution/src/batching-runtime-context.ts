import { randomUUID } from 'node:crypto';
import { endOfTurn } from '#libs/common';
import { isTerminal, type RuntimeOperations, type RuntimeOp } from '#libs/runs';
import type {
  AgentMessageInput,
  ChildRunResult,
  DelegationInput,
  InteractionRequestInput,
  OperationOptions,
  RecordedRun,
  RuntimeContext,
  RuntimeRunView,
  RuntimeSettableStatus,
  RuntimeTrigger,
} from '#libs/runtimes';
import type { ArtifactChunkInput, CanonicalMessage, InteractionKind } from '#libs/contracts';
import { retryWhileUnavailable } from './outage-retry.js';

/** What a BatchingRuntimeContext reads lazily, and the key that makes delegations idempotent. */
export interface RuntimeContextReads {
  history(): Promise<CanonicalMessage[]>;
  savedState(): Promise<unknown>;
  recorded(): Promise<RecordedRun>;
  /** The operation ids the run's log holds (read once by a resumed execution). */
  operationIds(): Promise<string[]>;
  extensions(): Promise<string[]>;
  childResult(childRunId: string): Promise<ChildRunResult | null>;
  /** Identifies this trigger of the run (same on a re-delivery of the same job). */
  triggerKey: string;
}

/** How a BatchingRuntimeContext's writes ride out a database outage. */
export interface RuntimeContextWrites {
  /** The run's last sequence when the execution starts, if known (its trigger's): the first append's expected sequence. */
  expectedSequence?: number;
  /** How long (ms) a write the database could not take is retried (0: not retried). */
  retryForMs: number;
  /**
   * The execution's fencing token (its run's `execution_epoch` when its dispatch was claimed):
   * every append and delegation carries it and is refused once a newer execution took the run over
   * (RuntimeOperations ApplyOptions.epoch). Absent: unfenced (an execution with no claimed dispatch).
   */
  epoch?: number;
  /** Called when a write learns that this execution was fenced (`run.fenced`): the executor aborts it. */
  onFenced?: () => void;
}

/**
 * The RuntimeContext an execution hands a runtime. Operations a runtime makes back to back (with no
 * wait between them) are committed together as one append — one statement, one commit — while
 * each still becomes its own event with its own sequence. A short runtime's whole output (e.g.
 * echo: `working`, its message, `completed`) is thus one append, and the appends of the executions
 * running in this process share statements (EventLogRepository group-commits them). The batch is
 * flushed at the end of the runtime's turn (a `setImmediate` after the first pending operation:
 * once the runtime awaits anything that is not already settled — its upstream's next chunk, a
 * timer, a read — what it made before is committed), before any wait (`sleep`,
 * `waitUntilCanceled`), after a terminal status or an interaction request, before a second
 * artifact chunk (each chunk is committed when the next one comes: see emitArtifact), and when
 * the execution ends (`flush`). Flushes are chained (one append of a run in flight at a time, in
 * order). So a stream sees exactly the same events, as soon as the runtime stops making them;
 * only events with no time between them share a commit. Before the end-of-turn flush, an
 * operation waited for the next wait, terminal status, interaction or chunk: a runtime that set a
 * status with a message and then awaited its upstream held that message back meanwhile.
 *
 * A failed flush (e.g. `run.terminal` because the run was canceled) rejects the call that
 * triggered it, or the runtime's next call (a flush at the end of a turn has no caller: its
 * failure is kept for the next call, and for the execution's final `flush`). A flush the
 * database could not take (unreachable) is retried for `writes.retryForMs` first, each append carrying the sequence this execution
 * expects the run at (the last append's result), so a retried append is never recorded twice
 * (RuntimeOperations.apply); a delegation is retried the same way (idempotent by its key).
 *
 * Every write carries the execution's fencing token (`writes.epoch`): once a newer execution took
 * the run over, the next one is refused (`run.fenced`, kept as the failure like any other) and
 * `writes.onFenced` is told, so the executor aborts this execution (docs/architecture.md "The fence").
 *
 * A resumed execution (trigger `resumed`) reads the operation ids the log holds once, before its
 * first write, and drops every operation whose id is among them (or was given twice by this
 * execution): a runtime replaying its lost predecessor records each operation once.
 */
export class BatchingRuntimeContext implements RuntimeContext {
  private pending: RuntimeOp[] = [];
  private failure: unknown = undefined;
  /** The last flush, settled or not: the next one starts after it (one append in flight, in order). */
  private flushed: Promise<void> = Promise.resolve();
  /**
   * A flush at the end of this turn; its failure is kept (this.failure): the runtime's next call,
   * or the final flush, rejects with it.
   */
  private readonly flushSoon = endOfTurn(() => void this.flush().catch(() => undefined));

  private historyRead?: Promise<CanonicalMessage[]>;

  private delegations = 0;

  /** The run's last sequence as this execution last saw it (its appends' results). */
  private expected: number | undefined;

  /** Resumed executions: the operation ids recorded (the log's, then this execution's own). */
  private recordedIds?: Promise<Set<string>>;

  readonly resumed: boolean;

  constructor(
    private readonly runs: RuntimeOperations,
    readonly run: RuntimeRunView,
    readonly input: CanonicalMessage,
    readonly signal: AbortSignal,
    private readonly reads: RuntimeContextReads,
    readonly trigger: RuntimeTrigger = { kind: 'created' },
    private readonly writes: RuntimeContextWrites = { retryForMs: 0 },
  ) {
    this.expected = writes.expectedSequence;
    this.resumed = trigger.kind === 'resumed';
  }

  /** Read once, on first use (most runtimes never ask, so the hot path pays nothing). */
  history(): Promise<CanonicalMessage[]> {
    this.historyRead ??= this.reads.history();
    return this.historyRead;
  }

  /**
   * Commits what is pending, then the delegation (its own transaction). The n-th delegation of an
   * execution is keyed by the trigger and n, so a re-delivered job yields the same child.
   */
  async delegate(input: DelegationInput): Promise<{ linkId: string; childRunId: string; childContextId: string }> {
    await this.flush();
    const key = `${this.reads.triggerKey}:${this.delegations++}`;
    const d = await retryWhileUnavailable(() => this.runs.delegate(this.run.orgId, this.run.runId, { ...input, key }, { epoch: this.writes.epoch }), this.writes.retryForMs).catch((e: unknown) => {
      if (isFenced(e)) this.writes.onFenced?.();
      throw e;
    });
    // the delegation appended to this run (run.linked): the next append reads where the log is
    this.expected = undefined;
    return { linkId: d.linkId, childRunId: d.childRunId, childContextId: d.childThreadId };
  }

  childResult(childRunId: string): Promise<ChildRunResult | null> {
    return this.reads.childResult(childRunId);
  }

  async setStatus(status: RuntimeSettableStatus, message?: AgentMessageInput, op?: OperationOptions): Promise<void> {
    if (await this.seen(op)) return;
    await this.push({ op: 'status', status, message, ...idOf(op) }, isTerminal(status));
  }

  async requestInteraction(kind: InteractionKind, message?: AgentMessageInput, options: InteractionRequestInput = {}, op?: OperationOptions): Promise<string> {
    const interactionId = randomUUID();
    if (await this.seen(op)) return interactionId;
    await this.push({ op: 'interaction', kind, message, interactionId, origin: 'runtime', ...options, ...idOf(op) }, options.blocking !== false);
    return interactionId;
  }

  async emitMessage(message: AgentMessageInput, op?: OperationOptions): Promise<void> {
    if (await this.seen(op)) return;
    await this.push({ op: 'message', message, ...idOf(op) }, false);
  }

  async saveState(state: unknown): Promise<void> {
    await this.push({ op: 'state', state }, false);
  }

  async savedState(): Promise<unknown> {
    await this.flush();
    return this.reads.savedState();
  }

  /** Read once, on first use. */
  extensions(): Promise<string[]> {
    this.extensionsRead ??= this.reads.extensions();
    return this.extensionsRead;
  }

  private extensionsRead?: Promise<string[]>;

  async recorded(): Promise<RecordedRun> {
    await this.flush();
    return this.reads.recorded();
  }

  async emitArtifact(chunk: ArtifactChunkInput, op?: OperationOptions): Promise<void> {
    if (await this.seen(op)) return;
    // a chunk is committed when the next one comes (or at the end of the turn): back-to-back chunks
    // could share an append (the statement folds them in order), but a push config's deliveries are
    // one POST at a time, so a task's chunks committed together wait for each other there — measured
    // with `npm run bench:push`: first commit -> last receipt p50 314 -> 485 ms, lag p99 283 -> 695 ms
    if (this.pending.some((p) => p.op === 'artifact')) await this.flush();
    await this.push({ op: 'artifact', chunk, ...idOf(op) }, false);
  }

  /**
   * True when the operation must be dropped: this execution resumes a lost one and the log (or
   * this execution) holds its id already. Only resumed executions read the log for it.
   */
  private async seen(op: OperationOptions | undefined): Promise<boolean> {
    if (!op?.id || !this.resumed) return false;
    this.recordedIds ??= this.reads.operationIds().then((ids) => new Set(ids));
    const ids = await this.recordedIds;
    if (ids.has(op.id)) return true;
    ids.add(op.id);
    return false;
  }

  async sleep(ms: number): Promise<void> {
    await this.flush();
    const signal = this.signal;
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  async waitUntilCanceled(): Promise<void> {
    await this.flush();
    const signal = this.signal;
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  /** Commit whatever is pending, after any flush in flight. Rejects with the append path's error. */
  flush(): Promise<void> {
    const next = this.flushed.then(() => this.flushPending());
    this.flushed = next.catch(() => undefined);
    return next;
  }

  private async flushPending(): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (this.pending.length === 0) return;
    const ops = this.pending;
    this.pending = [];
    try {
      const run = await this.runs.apply(this.run.orgId, this.run.runId, ops, { expectedSequence: this.expected, retryForMs: this.writes.retryForMs, epoch: this.writes.epoch });
      this.expected = run.lastSequence;
    } catch (e) {
      this.failure = e;
      if (isFenced(e)) this.writes.onFenced?.();
      throw e;
    }
  }

  private async push(op: RuntimeOp, flushNow: boolean): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    this.pending.push(op);
    if (flushNow) await this.flush();
    else this.flushSoon();
  }
}

/** `run.fenced`: a newer execution took the run over (RuntimeOperations). */
function isFenced(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'run.fenced';
}

function idOf(op: OperationOptions | undefined): { opId?: string } {
  return op?.id ? { opId: op.id } : {};
}
