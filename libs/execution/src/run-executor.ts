import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AppError, isDependencyUnavailable } from '#libs/common';
import { RunExecuteJobSchema, type CanonicalMessage, type RunExecuteJob } from '#libs/contracts';
import { DispatchRelay, ExecutionReads, RunNotifier, RuntimeOperations, isTerminal, type RunExecutionJob } from '#libs/runs';
import { Metrics } from '#libs/metrics';
import { ExecutionAborted, RuntimeRegistry, isResumable, type ParsedRuntime, type RuntimeTrigger } from '#libs/runtimes';
import { BatchingRuntimeContext } from './batching-runtime-context.js';
import { ExecutionLease } from './execution-lease.js';
import { ExecutionAdmission, type JobIntake, type ParkedEntry } from './execution-admission.js';
import { ExecutionSlots, type SlotTicket } from './execution-slots.js';
import { LostExecutionPolicy } from './lost-execution.policy.js';
import { retryWhileUnavailable } from './outage-retry.js';
import type { ExecutionWrapper, Prepared } from './prepared-dispatch.js';
import { TriggerReads } from './trigger-reads.js';
import { randomUUID } from 'node:crypto';

/** Messages of the thread a runtime sees at most (RuntimeContext.history). */
const HISTORY_LIMIT = 100;

/**
 * Why an execution did not complete, for the transport to map (BullMQ: `UnrecoverableError`
 * when not retryable). The executor has failed the run already (or found it invalid) when it throws one.
 */
export class ExecutionError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
    this.name = 'ExecutionError';
  }
}

/**
 * Executes one trigger of a run (a `run.execute` payload): loads the revision's runtime through
 * the injected RuntimeRegistry (parsed configs cached by revision id, bounded LRU), runs it with a
 * RuntimeContext whose every method goes through RuntimeOperations (the append path, batched),
 * and aborts it when the run is canceled (one cancellation subscription per process, a poll as
 * the safety net) or the process stops.
 *
 * Policy when things go wrong: a runtime that throws fails its run ("the agent runtime failed")
 * after what it produced is kept; a run that ended meanwhile (`run.terminal`) just stops; an
 * invalid payload or runtime config is not retryable. Transport-agnostic: apps/worker wires
 * BullMQ to `executeBatch`.
 *
 * Its parts: when a prepared dispatch starts is ExecutionAdmission's (slots, the parking, hand-ons,
 * the intake); an execution's lease, and the fence's check at its heartbeat, ExecutionLease's; the
 * trigger and what the log holds, TriggerReads'. The executor's own part of the fence
 * (docs/architecture.md "The fence"): each admitted dispatch is claimed (one claim per dispatch:
 * only the claim's winner runs) and takes its run's fencing token from the claim, which every
 * write of its execution then carries (BatchingRuntimeContext, ExecutionLease, failRun, the
 * hand-on); a refused write or heartbeat aborts it as `fenced` (ExecutionLease.fenced).
 */
@Injectable()
export class RunExecutor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunExecutor.name);
  /** Executions in progress, by run id (a run may have more than one): a cancellation aborts them. */
  private readonly inFlight = new Map<string, Set<AbortController>>();
  private stopCancelListener?: () => void;
  /** Set once the process stops: executions that start after that are aborted at once. */
  private stopping = false;
  /** EXECUTION_OUTAGE_RETRY_MS: how long a database call of an execution is retried while the database is unreachable. */
  private readonly outageMs: number;
  /** When each prepared dispatch starts (slots, the parking, hand-ons, the intake): this executor's scheduler. */
  private readonly admission: ExecutionAdmission;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly registry: RuntimeRegistry,
    private readonly ops: RuntimeOperations,
    private readonly reads: ExecutionReads,
    private readonly notifier: RunNotifier,
    private readonly metrics: Metrics,
    private readonly slots: ExecutionSlots,
    private readonly lostPolicy: LostExecutionPolicy,
    private readonly relay: DispatchRelay,
    private readonly triggers: TriggerReads,
    private readonly lease: ExecutionLease,
  ) {
    this.outageMs = config.EXECUTION_OUTAGE_RETRY_MS;
    this.admission = new ExecutionAdmission(config, slots, relay, metrics, (go) => this.claimAndRunEach(go));
  }

  /** A read (or idempotent write) of an execution, retried while the database is unreachable. */
  private durable<T>(call: () => Promise<T>): Promise<T> {
    return retryWhileUnavailable(call, this.outageMs);
  }

  async onApplicationBootstrap(): Promise<void> {
    // one subscription for every cancellation, instead of one per executing run
    this.stopCancelListener = await this.notifier.onCanceled((runId) => this.inFlight.get(runId)?.forEach((c) => c.abort(new ExecutionAborted('canceled'))));
  }

  onModuleDestroy(): void {
    this.abortAll();
  }

  /**
   * Abort every execution in progress and stop listening for cancellations (their runs stay as
   * they are; the sweeper decides). A transport calls this before it waits for its active jobs.
   */
  abortAll(): void {
    this.stopping = true;
    this.stopCancelListener?.();
    this.stopCancelListener = undefined;
    for (const set of this.inFlight.values()) for (const c of set) c.abort(new ExecutionAborted('stopping'));
    // parked dispatches go back to the queue (another worker takes them), spare slots back to the slot sets
    this.admission.stop();
  }

  /** How many jobs a transport should run at once (a batch job stays active while its dispatches run or wait here). */
  get jobConcurrency(): number {
    return this.admission.jobConcurrency;
  }

  /** Executions in progress in this process. */
  get running(): number {
    let n = 0;
    for (const s of this.inFlight.values()) n += s.size;
    return n;
  }

  /**
   * Back-pressure: the transport's way to stop, restart and meter taking jobs, paused while the
   * parking is full and limited to what it can take (ExecutionAdmission.setIntake).
   */
  setIntake(intake: JobIntake): void {
    this.admission.setIntake(intake);
  }

  /**
   * Execute a batch of dispatches (a `run.execute-batch` job's items, in enqueue order). Resolves
   * when every admitted execution has nothing more to do for now. Per batch, not per run: one
   * fairness round trip (ExecutionSlots.acquireBatch) and one claim statement (the outbox rows of
   * the dispatches it runs or drops are deleted: a dispatch delivered twice runs once). The
   * dispatches that cannot start yet (this worker is full, or their org or agent is at its limit)
   * wait parked here, in their org's line, until they run (the job stays active meanwhile).
   * Each admitted dispatch runs concurrently, in `opts.around` (the transport's span) when given;
   * one that fails is failed or handed to the lost-run policy on its own, the others go on.
   * Errors: `ExecutionError` (not retryable) when every dispatch of the batch was invalid.
   */
  async executeBatch(items: readonly RunExecutionJob[], opts: { enqueuedAt?: number; around?: ExecutionWrapper } = {}): Promise<void> {
    await this.admission.batch(items.length, () => this.executeBatchNow(items, opts));
  }

  private async executeBatchNow(items: readonly RunExecutionJob[], opts: { enqueuedAt?: number; around?: ExecutionWrapper }): Promise<void> {
    const now = Date.now();
    const invalid: ExecutionError[] = [];
    const drop: string[] = [];
    // 0. a copy of a dispatch parked or running here (the relay sent it again, or it came twice in
    // one job) is dropped: the one here claims it (ExecutionAdmission.arrive)
    const fresh = this.admission.arrive(items);
    // 1. parse; the job usually carries the run's identity and input, otherwise read them (one query)
    const prepared = (await Promise.all(fresh.map((item) => this.prepare(item, now, opts.enqueuedAt, opts.around, invalid, drop))))
      .filter((p): p is Prepared => p !== null)
      // enqueue order: the order of each organization's line
      .sort((a, b) => a.ticket.enqueuedAt - b.ticket.enqueuedAt);
    // 2. and 3. admission (ExecutionAdmission.admit): the ones with nothing to run leave at once (their
    // rows are dropped with the claim below); the others take a spare slot, get one from the slot
    // sets (one round trip for the batch) or park here until they do
    const { admitted, parked } = await this.admission.admit(fresh, prepared, opts.around);
    // 4. claim what runs (and what was dropped, in the same statement), then run the admitted ones together
    await Promise.all([this.claimAndRun(admitted, drop, this.admission.slotTtl, opts.around), ...parked]);
    if (prepared.length === 0 && invalid.length > 0) throw invalid[0]!;
  }

  /**
   * Step 1 of a batch, for one dispatch: parsed, with its run's identity and input (carried by the
   * job, else read: one query). Null when it cannot run — an invalid payload or a missing input
   * message (an `ExecutionError` pushed to `invalid`), or a run gone or terminal — and then its
   * outbox row id, if any, goes to `drop`.
   */
  private async prepare(
    item: RunExecutionJob,
    now: number,
    batchEnqueuedAt: number | undefined,
    around: ExecutionWrapper | undefined,
    invalid: ExecutionError[],
    drop: string[],
  ): Promise<Prepared | null> {
    const enqueuedAt = item.enqueuedAt ?? batchEnqueuedAt ?? now;
    const parsed = RunExecuteJobSchema.safeParse(item.job);
    if (!parsed.success) {
      const e = new ExecutionError(`invalid run.execute payload: ${parsed.error.message}`, false);
      invalid.push(e);
      this.metrics.executions.inc({ outcome: 'invalid' });
      if (item.id) drop.push(item.id);
      // its span says so too (as far as the payload names a run)
      await around?.(item.job as RunExecuteJob, item.triggerSequence, () => Promise.reject(e)).catch(() => undefined);
      return null;
    }
    const job = parsed.data;
    this.metrics.jobWait.observe(Math.max(0, now - enqueuedAt) / 1000);
    const ticket: SlotTicket = { member: `${job.runId}-${item.triggerSequence}`, enqueuedAt };
    const base = { item, job, ticket, slot: { id: randomUUID(), at: now } };
    if (job.context) {
      const { input, ...run } = job.context;
      return { ...base, run, input };
    }
    const found = await this.durable(() => this.reads.input(job.orgId, job.runId, job.inputMessageId ?? null));
    if (!found || isTerminal(found.run.status)) {
      this.slots.leaveLine(job.orgId, ticket.member);
      if (item.id) drop.push(item.id);
      return null;
    }
    if (!found.message) {
      invalid.push(new ExecutionError(`run ${job.runId}: input message ${job.inputMessageId ?? '(newest)'} not found`, false));
      this.metrics.executions.inc({ outcome: 'invalid' });
      if (item.id) drop.push(item.id);
      return null;
    }
    return { ...base, run: found.run, input: found.message };
  }

  /**
   * Claim admitted dispatches (and drop `drop`: rows with nothing to run) in one statement, then run
   * the claimed ones concurrently. One whose claim another delivery won gives its slot back. If the
   * claim itself fails, every admitted one gives its slot back (the rows stay for the relay).
   */
  private async claimAndRun(admitted: readonly Prepared[], drop: readonly string[], slotTtl: number, around?: ExecutionWrapper): Promise<void> {
    if (admitted.length === 0 && drop.length === 0) return;
    let claimed: Map<string, number>;
    try {
      const ids = [...admitted.flatMap((p) => (p.item.id ? [p.item.id] : [])), ...drop];
      claimed = ids.length > 0 ? await this.durable(() => this.relay.claim(ids, this.lease.claimLease)) : new Map<string, number>();
    } catch (e) {
      for (const p of admitted) this.admission.giveBack(p);
      throw e;
    }
    const runs: Prepared[] = [];
    for (const p of admitted) {
      // delivered twice: the other delivery claimed it
      if (this.wonClaim(p, claimed)) runs.push(p);
      else this.admission.giveBack(p);
    }
    await Promise.all(runs.map((p) => this.runOne(p, slotTtl, around)));
  }

  /**
   * Whether `p` runs after the claim that returned `claimed` (dispatch id → its run's fencing
   * token): its id was claimed by this statement, and no other dispatch of the same claim took it
   * first (two copies of one dispatch admitted together: only the first runs). The winner gets its
   * epoch. A dispatch with no outbox row (nothing to claim) runs, unfenced.
   */
  private wonClaim(p: Prepared, claimed: Map<string, number>): boolean {
    const id = p.item.id;
    if (!id) return true;
    const epoch = claimed.get(id);
    if (epoch === undefined) return false;
    claimed.delete(id);
    p.epoch = epoch;
    return true;
  }

  /**
   * Parked dispatches ExecutionAdmission just admitted: claimed in one statement; each whose claim
   * won runs, settling its entry when it ends; the others give their slot back and settle at once
   * (all of them, rejected, if the claim fails: the rows stay for the relay).
   */
  private async claimAndRunEach(go: readonly ParkedEntry[]): Promise<void> {
    let claimed: Map<string, number>;
    try {
      const ids = go.flatMap((e) => (e.p.item.id ? [e.p.item.id] : []));
      claimed = ids.length > 0 ? await this.durable(() => this.relay.claim(ids, this.lease.claimLease)) : new Map<string, number>();
    } catch (err) {
      for (const e of go) {
        this.admission.giveBack(e.p);
        e.reject(err);
      }
      return;
    }
    for (const e of go) {
      if (!this.wonClaim(e.p, claimed)) {
        this.admission.giveBack(e.p);
        e.resolve();
      } else {
        this.runOne(e.p, e.slotTtl, e.around).then(e.resolve, e.reject);
      }
    }
  }

  /** One admitted execution: its metrics, its span, its failure handled alone; releases its slot. */
  private async runOne(p: Prepared, slotTtl: number, around?: ExecutionWrapper): Promise<void> {
    const t0 = process.hrtime.bigint();
    let outcome = 'ok';
    try {
      const run = () => this.executeHolding(p.job, p.run, p.input, p.item.triggerSequence, p.slot, slotTtl, p.epoch);
      await (around ? around(p.job, p.item.triggerSequence, run) : run());
    } catch (e) {
      outcome = e instanceof ExecutionError && !e.retryable ? 'invalid' : 'failed';
      // the run was failed already when the executor says so; anything else goes to the lost-run policy
      if (!(e instanceof ExecutionError)) void this.lost(p.job, e instanceof Error ? e.message : String(e));
    } finally {
      this.admission.ended(p, slotTtl);
      this.metrics.executions.inc({ outcome });
      this.metrics.executionDuration.observe(Metrics.since(t0));
    }
  }

  /**
   * The rest of an execution, once it holds its slot (released by the caller), in steps: the
   * trigger it runs for, its revision's runtime, its abort signal, its heartbeat, the
   * RuntimeContext, then the runtime itself.
   */
  private async executeHolding(
    job: RunExecuteJob,
    run: { threadId: string; agentId: string; revisionId: string },
    input: CanonicalMessage,
    triggerSequence: number | null,
    slot: { id: string; at: number },
    slotTtl: number,
    epoch: number | undefined,
  ): Promise<void> {
    const trigger = await this.durable(() => this.triggers.triggerOf(job, triggerSequence));
    if (!trigger) return;
    const entry = await this.runtimeOf(job, run.revisionId, epoch);
    const abort = this.track(job.runId);
    const stopHeartbeat = this.lease.heartbeat(job, run.agentId, triggerSequence, slot, slotTtl, abort, epoch);
    try {
      const ctx = this.contextFor(job, run, input, trigger, triggerSequence, entry, abort, epoch);
      await this.runRuntime(job, entry, ctx, trigger, abort.signal, epoch);
    } finally {
      stopHeartbeat();
      this.untrack(job.runId, abort);
    }
  }

  /**
   * The revision's runtime and parsed config (RuntimeRegistry.parseRevision: parsed once per
   * revision). A config that does not parse fails the run ("the agent revision has an invalid
   * runtime") and is an `ExecutionError`, not retryable.
   */
  private async runtimeOf(job: RunExecuteJob, revisionId: string, epoch: number | undefined): Promise<ParsedRuntime> {
    let loaded = false;
    try {
      return await this.registry.parseRevision(revisionId, async () => {
        const raw = await this.durable(() => this.reads.revisionRuntime(job.orgId, revisionId));
        loaded = true;
        return raw;
      });
    } catch (e) {
      // a read that failed is not an invalid config: it goes to the caller as it is
      if (!loaded) throw e;
      await this.durable(() => this.ops.failRun(job.orgId, job.runId, 'the agent revision has an invalid runtime', { epoch }));
      throw new ExecutionError(`run ${job.runId}: ${e instanceof Error ? e.message : String(e)}`, false, { cause: e });
    }
  }

  /** A new execution of the run, registered so that a cancellation aborts it (aborted at once when the process is stopping). */
  private track(runId: string): AbortController {
    const abort = new AbortController();
    const running = this.inFlight.get(runId) ?? new Set<AbortController>();
    running.add(abort);
    this.inFlight.set(runId, running);
    // the process began stopping while this execution was getting ready: do not start holding
    if (this.stopping) abort.abort(new ExecutionAborted('stopping'));
    return abort;
  }

  private untrack(runId: string, abort: AbortController): void {
    const running = this.inFlight.get(runId);
    if (!running) return;
    running.delete(abort);
    if (running.size === 0) this.inFlight.delete(runId);
  }

  /** The RuntimeContext of an execution: every read through ExecutionReads (retried through outages), every write through RuntimeOperations (batched). */
  private contextFor(
    job: RunExecuteJob,
    run: { threadId: string; agentId: string; revisionId: string },
    input: CanonicalMessage,
    trigger: RuntimeTrigger,
    triggerSequence: number | null,
    entry: ParsedRuntime,
    abort: AbortController,
    epoch: number | undefined,
  ): BatchingRuntimeContext {
    const { orgId, runId } = job;
    const signal = abort.signal;
    const carried = job.context?.extensions;
    const view = { orgId, runId, threadId: run.threadId, agentId: run.agentId, revisionId: run.revisionId };
    return new BatchingRuntimeContext(
      this.ops,
      view,
      input,
      signal,
      {
        history: () =>
          this.durable(() => this.reads.threadHistory(orgId, run.agentId, run.threadId, HISTORY_LIMIT)).then((msgs) => msgs.map(({ runId: _r, sequence: _s, ...m }) => m)),
        childResult: (childRunId) => this.durable(() => this.triggers.childResult(orgId, runId, childRunId)),
        savedState: () => this.durable(() => this.reads.savedState(orgId, runId)),
        recorded: () => this.durable(() => this.triggers.recorded(orgId, runId)),
        operationIds: () => this.durable(() => this.reads.operationIds(orgId, runId)),
        // carried by a created run's job (JOB_INLINE_EXTENSIONS_MAX), else read from `run.created`
        extensions: carried ? () => Promise.resolve([...carried]) : () => this.durable(() => this.reads.extensions(orgId, runId)),
        // a resumed execution delegates under its lost predecessor's key: a replayed delegation is the same child
        triggerKey: String(this.triggers.lostSequenceOf(trigger) ?? triggerSequence ?? job.inputMessageId ?? job.linkId ?? job.interactionId ?? randomUUID()),
      },
      trigger,
      // every write carries the execution's fencing token: one that a takeover replaced (it was
      // only slow, not dead) is refused at its next write, and aborted
      { expectedSequence: triggerSequence ?? undefined, retryForMs: this.outageMs, epoch, onFenced: () => this.lease.fenced(runId, abort, 'a write was refused') },
    );
  }

  /**
   * Run the runtime and settle what it leaves: what it produced is flushed; a stopping worker that
   * cut a resumable runtime short hands the run on; a run that ended meanwhile (`run.terminal`), or
   * whose output a resumed execution recorded already (`run.conflict`, resumable runtimes), just
   * stops; an execution a takeover fenced (`run.fenced`, or aborted as fenced) stops with no
   * further effect; a resumable runtime cut short by a database outage that outlasted
   * EXECUTION_OUTAGE_RETRY_MS lets the run go — nothing is written, its lease (if any) lapses and a
   * sweeper resumes the run once the database is back; any other failure keeps what was produced,
   * fails the run ("the agent runtime failed") and is an `ExecutionError` (retryable as the
   * runtime's error says). Every write here carries the execution's `epoch`.
   */
  private async runRuntime(job: RunExecuteJob, entry: ParsedRuntime, ctx: BatchingRuntimeContext, trigger: RuntimeTrigger, signal: AbortSignal, epoch: number | undefined): Promise<void> {
    const { orgId, runId } = job;
    const resumable = isResumable(entry.runtime, entry.config);
    try {
      await entry.runtime.execute(entry.config, ctx);
      await ctx.flush();
      // the worker is stopping and cut a resumable runtime short: hand the run on now instead of
      // waiting for the sweeper (LostExecutionPolicy: resumed, or nothing if it ended meanwhile or
      // a newer execution holds it). Not for more input on a working run: that execution only hands
      // the input to the one following the run, which goes on elsewhere
      if (this.stopping && signal.aborted && resumable && trigger.kind !== 'continued') {
        await this.lostPolicy
          .handle(orgId, runId, 'the worker executing it stopped', { handedOn: true, epoch })
          .catch((e: unknown) => this.log.warn(`run ${runId}: handing it on failed: ${e instanceof Error ? e.message : String(e)}`));
      }
    } catch (e) {
      if (e instanceof AppError && e.code === 'run.terminal') return;
      if ((e instanceof AppError && e.code === 'run.fenced') || (signal.reason instanceof ExecutionAborted && signal.reason.why === 'fenced')) return;
      // a resumable runtime whose output another execution of the run already recorded: that
      // execution carries on, this one just stops
      if (e instanceof AppError && e.code === 'run.conflict' && resumable) {
        this.log.warn(`run ${runId}: another execution recorded this one's output; stopping`);
        return;
      }
      if (resumable && isDependencyUnavailable(e)) {
        this.log.warn(`run ${runId}: the database did not take its writes for ${this.outageMs} ms; letting it go (resumed once the database is back)`);
        this.metrics.executionsStopped.inc({ reason: 'let_go' });
        return;
      }
      // keep what the runtime produced before it failed
      await ctx.flush().catch(() => undefined);
      const reason = e instanceof Error ? e.message : String(e);
      this.log.error(`run ${runId}: runtime failed: ${reason}`);
      await this.durable(() => this.ops.failRun(orgId, runId, 'the agent runtime failed', { epoch }));
      throw new ExecutionError(reason, e instanceof AppError ? e.retryable : true, { cause: e });
    }
  }

  /**
   * The transport lost an execution (its worker died): LostExecutionPolicy resumes the run (a
   * resumable runtime) or fails it ("the execution was lost"). A run waiting on its caller needs
   * no execution: losing one changes nothing for it.
   */
  async lost(payload: unknown, why: string): Promise<void> {
    const parsed = RunExecuteJobSchema.safeParse(payload);
    if (!parsed.success) return;
    this.log.warn(`run ${parsed.data.runId}: job failed: ${why}`);
    await this.lostPolicy.handle(parsed.data.orgId, parsed.data.runId, 'the execution was lost').catch(() => undefined);
  }

  /**
   * The transport lost a batch (its worker died, or the batch failed as a whole): the dispatches
   * nobody claimed never started, so they go back to the queue; the claimed ones were running (or
   * ran) and go to `lost`. While the database cannot say which is which, nothing is decided here
   * (the outbox relay and the sweepers decide later).
   */
  async lostBatch(items: readonly RunExecutionJob[], why: string): Promise<void> {
    const ids = items.flatMap((i) => (i.id ? [i.id] : []));
    const open = await this.relay.unclaimed(ids).catch(() => null);
    if (!open) return;
    const unstarted = items.filter((i) => i.id && open.has(i.id));
    await this.relay.requeue(unstarted).catch(() => undefined);
    for (const i of items) if (!(i.id && open.has(i.id))) await this.lost(i.job, why);
  }
}
