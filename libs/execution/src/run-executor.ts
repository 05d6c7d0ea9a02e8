import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AppError, isDependencyUnavailable } from '#libs/common';
import { RunExecuteJobSchema, type CanonicalMessage, type RunExecuteJob } from '#libs/contracts';
import { DispatchRelay, ExecutionReads, RunNotifier, RuntimeOperations, isTerminal, type RunExecutionJob } from '#libs/runs';
import { Metrics } from '#libs/metrics';
import { ExecutionAborted, RuntimeRegistry, isResumable, type ParsedRuntime, type RuntimeTrigger } from '#libs/runtimes';
import { BatchingRuntimeContext } from './batching-runtime-context.js';
import { ExecutionLease } from './execution-lease.js';
import { ExecutionSlots, PARKED_PRESENCE_MS, RELEASE_WINDOW_MS, type SlotGrants, type SlotRequest, type SlotTicket } from './execution-slots.js';
import { LostExecutionPolicy } from './lost-execution.policy.js';
import { retryWhileUnavailable } from './outage-retry.js';
import { TriggerReads } from './trigger-reads.js';
import { randomUUID } from 'node:crypto';

/** Messages of the thread a runtime sees at most (RuntimeContext.history). */
const HISTORY_LIMIT = 100;

/**
 * How a transport wraps one execution (e.g. in its span): call `run` and return its outcome.
 * `triggerSequence` is the sequence of the dispatch's trigger.
 */
export type ExecutionWrapper = (job: RunExecuteJob, triggerSequence: number, run: () => Promise<void>) => Promise<void>;

/** A dispatch of a batch, ready to ask for a slot: parsed, its run's identity and input known. */
interface Prepared {
  item: RunExecutionJob;
  job: RunExecuteJob;
  run: { threadId: string; agentId: string; revisionId: string };
  input: CanonicalMessage;
  ticket: SlotTicket;
  /**
   * The slot it holds or asks for: its member in the slot sets (new for each dispatch; a slot
   * handed on keeps its member and changes holders) and when its expiry was last set (ms).
   */
  slot: { id: string; at: number };
  /**
   * Its fencing token, set by its claim (the run's `execution_epoch` then): every write of its
   * execution carries it. Undefined for a dispatch with no outbox row (nothing to claim).
   */
  epoch?: number;
}

/** A dispatch parked until it gets a slot, and how to settle its batch's wait. */
interface ParkedEntry {
  p: Prepared;
  slotTtl: number;
  around?: ExecutionWrapper;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/**
 * Dispatches parked per process: at this many times WORKER_CONCURRENCY the transport stops taking
 * jobs (until half of them have started), and before that its intake is metered (setIntake). A
 * parked dispatch stays here until it runs (or the process stops), its job active meanwhile.
 * Handing the youngest back to the queue past a cap instead made a large backlog cycle: measured,
 * 27,000 runs were taken from the queue 208,000 times (a job, its Redis commands and a fairness
 * call each time).
 */
const PARK_FACTOR = 10;

/**
 * The first `n` entries of each organization, in the order given (parked dispatches sorted by
 * enqueue time: each organization's line order).
 */
function firstPerOrg(entries: readonly ParkedEntry[], n: number): ParkedEntry[] {
  const taken = new Map<string, number>();
  return entries.filter((e) => {
    const k = taken.get(e.p.job.orgId) ?? 0;
    if (k >= n) return false;
    taken.set(e.p.job.orgId, k + 1);
    return true;
  });
}

const NO_PREPARED: ReadonlySet<Prepared> = new Set();

/** What a dispatch asks the slot sets for: its org's and agent's slot, under its slot's member, in its org's line. */
function slotRequest(p: Prepared): SlotRequest {
  return { orgId: p.job.orgId, agentId: p.run.agentId, executionId: p.slot.id, ticket: p.ticket };
}

/** How often (ms) parked dispatches ask again for slots freed elsewhere (slots freed here ask at once). */
const PARK_RETRY_MS = 100;

/**
 * How long (ms) a slot-set answer lets this process hand an ended execution's slot on to the next
 * parked dispatch of its organization and agent without asking Redis (SlotGrants.handOn). Parked
 * dispatches ask every PARK_RETRY_MS, which renews it while they wait; past it, slots go back and
 * are asked for as usual, so a share that shrank (another org became active) or an earlier member
 * elsewhere in the org's line is seen within this long.
 */
const HAND_ON_FRESH_MS = 2.5 * PARK_RETRY_MS;

/** How the executor meters a transport's intake of jobs (see RunExecutor.setIntake). */
export interface JobIntake {
  pause(): void;
  resume(): void;
  /** Hold at most this many jobs at once (fetching and in progress; at least 1). */
  limit(jobs: number): void;
}

/**
 * Why an execution did not complete, for the transport to map (BullMQ: `UnrecoverableError`
 * when not retryable). The run has been failed already when `runFailed` is true.
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
 * BullMQ to `execute`.
 */
@Injectable()
export class RunExecutor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunExecutor.name);
  /** Executions in progress, by run id (a run may have more than one): a cancellation aborts them. */
  private readonly inFlight = new Map<string, Set<AbortController>>();
  private stopCancelListener?: () => void;
  /** Set once the process stops: executions that start after that are aborted at once. */
  private stopping = false;
  private readonly heartbeatMs: number;
  /** EXECUTION_OUTAGE_RETRY_MS: how long a database call of an execution is retried while the database is unreachable. */
  private readonly outageMs: number;
  /**
   * EXECUTION_SPARE_SLOT_MS: how long the slot of an execution that ended with nothing parked here
   * waits for the next dispatch of its organization and agent (a client that sends its next
   * message once it has the answer): taken without a round trip, as a hand-on; past it, the slot
   * goes back. Meanwhile the slot sets count it as running, as they did a moment before.
   */
  private readonly spareMs: number;
  /** WORKER_CONCURRENCY: executions this process runs at once, at most. */
  private readonly concurrency: number;
  /** Executions admitted and not ended (a slot held), in this process. */
  private admitted = 0;
  /**
   * Outbox ids of the dispatches parked or running here: a copy of one that arrives (the relay
   * sent it again, or two copies came in one job) is dropped, the one here claims it.
   */
  private readonly holding = new Set<string>();
  /** When the outbox rows of the parked dispatches were last marked held (ms; see holdParked). */
  private heldAt = 0;
  /** OUTBOX_REDELIVER_MS: the relay re-sends a row nobody marked for this long. */
  private readonly redeliverMs: number;
  /** Dispatches waiting here for a slot (their batch job stays active meanwhile), in enqueue order (park). */
  private parked: ParkedEntry[] = [];
  private parkTimer?: NodeJS.Timeout;
  private parkRetryScheduled = false;
  private parkRetrying = false;
  private parkRetryAgain = false;
  /** Set when parked dispatches should ask Redis in the next retry (anything but slots ended here to hand on). */
  private parkAsk = false;
  /** Slots of executions that ended here with nothing parked, kept a moment for new dispatches (see endSlot). */
  private spare: Array<{ p: Prepared; slotTtl: number; until: number }> = [];
  private spareTimer?: NodeJS.Timeout;
  /** Slots of executions that ended here, to hand on or give back in the next retry (see endSlot). */
  private freed: Array<{ p: Prepared; slotTtl: number }> = [];
  /** When the slot sets last said each organization's slots may be handed on (ms; see HAND_ON_FRESH_MS). */
  private readonly handOnAt = new Map<string, number>();
  /** … every organization's (no org fairness configured). */
  private handOnAllAt = 0;
  /** When a slot was last handed on here (ms). */
  private lastHandOnAt = 0;
  /** When every parked dispatch was last presented to the slots (see PARKED_PRESENCE_MS). */
  private parkPresentedAt = 0;
  /** The transport's job intake (BullMQ: pause / resume the worker, its job concurrency), paused while the parking is full. */
  private intake?: JobIntake;
  private intakePaused = false;
  /** The job limit last given to the intake. */
  private intakeLimit = 0;
  /** Batches (jobs) in progress here: running or parked dispatches of theirs. */
  private batches = 0;
  /** Dispatches per job lately (a moving average of the jobs taken here). */
  private jobSize = 1;

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
    this.heartbeatMs = config.EXECUTION_HEARTBEAT_MS;
    this.outageMs = config.EXECUTION_OUTAGE_RETRY_MS;
    this.concurrency = config.WORKER_CONCURRENCY;
    this.spareMs = config.EXECUTION_SPARE_SLOT_MS;
    this.redeliverMs = config.OUTBOX_REDELIVER_MS;
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
    if (this.parked.length > 0) this.retryParkedSoon();
    if (this.spare.length > 0) this.expireSpare(true);
  }

  /** How many jobs a transport should run at once (a batch job stays active while its dispatches run or wait here). */
  get jobConcurrency(): number {
    // as many as may park: a newcomer organization's job is taken (and admitted from the reserve)
    // while a busy one's wait here; the intake pauses when the parking is full
    return this.concurrency * PARK_FACTOR;
  }

  /** Executions in progress in this process. */
  get running(): number {
    let n = 0;
    for (const s of this.inFlight.values()) n += s.size;
    return n;
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
    this.batches++;
    this.jobSize += (items.length - this.jobSize) / 16;
    try {
      await this.executeBatchNow(items, opts);
    } finally {
      this.batches--;
      this.checkIntake();
    }
  }

  private async executeBatchNow(items: readonly RunExecutionJob[], opts: { enqueuedAt?: number; around?: ExecutionWrapper }): Promise<void> {
    const now = Date.now();
    const invalid: ExecutionError[] = [];
    const drop: string[] = [];
    // 0. a copy of a dispatch parked or running here (the relay sent it again, or it came twice in
    // one job) is dropped: the one here claims it (one claim per dispatch, RunDispatchRepository.claim)
    const fresh = items.filter((item) => {
      if (!item.id) return true;
      if (this.holding.has(item.id)) {
        this.metrics.executions.inc({ outcome: 'duplicate' });
        return false;
      }
      this.holding.add(item.id);
      return true;
    });
    // 1. parse; the job usually carries the run's identity and input, otherwise read them (one query)
    const prepared = (await Promise.all(fresh.map((item) => this.prepare(item, now, opts.enqueuedAt, opts.around, invalid, drop))))
      .filter((p): p is Prepared => p !== null)
      // enqueue order: the order of each organization's line
      .sort((a, b) => a.ticket.enqueuedAt - b.ticket.enqueuedAt);
    // the ones with nothing to run leave at once (their rows are dropped with the claim below)
    const kept = new Set(prepared.map((p) => p.item));
    for (const item of fresh) if (item.id && !kept.has(item)) this.holding.delete(item.id);

    // 2. admission: this worker's room, then the fair share (one round trip for the batch). An
    // organization with dispatches parked here already: its new ones queue behind them (parked, and
    // asked in enqueue order with them), so they never pass an earlier one that is not presented
    // now. The others all ask, so that those past this worker's room still take their place in
    // their org's line.
    const slotTtl = this.heartbeatMs * 1.5;
    const parkedOrgs = new Set(this.parked.map((e) => e.p.job.orgId));
    const asking = prepared.filter((p) => !parkedOrgs.has(p.job.orgId));
    const behind = prepared.filter((p) => parkedOrgs.has(p.job.orgId));
    // slots of executions that just ended here go on to new ones of their org and agent (takeSpare)
    const spared = this.stopping ? NO_PREPARED : await this.takeSpare(asking);
    if (spared.size > 0) this.admitted += spared.size;
    const asks = spared.size > 0 ? asking.filter((p) => !spared.has(p)) : asking;
    const room = this.stopping ? 0 : Math.max(0, this.concurrency - this.admitted);
    const askedAt = Date.now();
    const { granted } = this.noteHandOn(
      await this.slots.acquireBatch(
        asks.map(slotRequest),
        slotTtl,
        room,
      ),
      asks,
    );
    const grantedNow = asks.filter((_, i) => granted[i]);
    // a granted slot's expiry was set by this call, at askedAt + slotTtl or later
    for (const p of grantedNow) p.slot.at = askedAt;
    const admitted = [...spared, ...grantedNow];
    const waiting = [...asks.filter((_, i) => !granted[i]), ...behind];
    if (behind.length > 0) this.retryParkedSoon();
    this.admitted += grantedNow.length;
    // 3. the ones that must wait are parked here, in this process, until they run, and retried as
    // slots free (a local execution ending, or every PARK_RETRY_MS for the others'), all parked
    // ones in one round trip (a stopping worker hands them all back)
    const parked = this.stopping ? [] : waiting.map((p) => this.park(p, slotTtl, opts.around));
    if (parked.length > 0) this.holdRows(waiting);
    if (this.stopping && waiting.length > 0) await this.handBack(waiting);
    this.checkIntake();
    // 4. claim what runs (and what was dropped, in the same statement), then run the admitted ones together
    await Promise.all([this.claimAndRun(admitted, drop, slotTtl, opts.around), ...parked]);
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
      claimed = ids.length > 0 ? await this.durable(() => this.relay.claim(ids)) : new Map<string, number>();
    } catch (e) {
      for (const p of admitted) this.giveBack(p);
      throw e;
    }
    const runs: Prepared[] = [];
    for (const p of admitted) {
      // delivered twice: the other delivery claimed it
      if (this.wonClaim(p, claimed)) runs.push(p);
      else this.giveBack(p);
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

  /** An admitted dispatch that will not run here: its slot back. */
  private giveBack(p: Prepared): void {
    this.admitted--;
    this.leave(p);
    this.releaseSlot(p);
  }

  /** The dispatch leaves this process (ran, lost its claim, or was handed back): a copy of it is no longer dropped here. */
  private leave(p: Prepared): void {
    if (p.item.id) this.holding.delete(p.item.id);
  }

  private releaseSlot(p: Prepared): void {
    this.slots.release(p.job.orgId, p.run.agentId, p.slot.id);
    // a slot freed here: the parked ones may start
    if (this.parked.length > 0) this.retryParkedSoon();
  }

  /**
   * An execution ended: its slot goes to the next parked dispatch of its organization and agent
   * here when that may be done without asking (handOn), else back (releaseSlot). Decided with the
   * other slots freed within RELEASE_WINDOW_MS, in retryParked.
   */
  private endSlot(p: Prepared, slotTtl: number): void {
    if (this.stopping) return this.releaseSlot(p);
    if (this.parked.length === 0) {
      // nothing waits here for it: kept EXECUTION_SPARE_SLOT_MS for the next dispatch of its org and agent
      if (this.spareMs === 0) return this.releaseSlot(p);
      this.spare.push({ p, slotTtl, until: Date.now() + this.spareMs });
      this.spareTimer ??= setTimeout(() => this.expireSpare(), this.spareMs);
      return;
    }
    this.freed.push({ p, slotTtl });
    this.retryParkedSoon(false);
  }

  /** Spare slots past EXECUTION_SPARE_SLOT_MS (all of them when `all`) go back. */
  private expireSpare(all = false): void {
    clearTimeout(this.spareTimer);
    this.spareTimer = undefined;
    const now = Date.now();
    const keep = all ? [] : this.spare.filter((s) => s.until > now);
    for (const s of this.spare) if (all || s.until <= now) this.releaseSlot(s.p);
    this.spare = keep;
    if (keep.length > 0) this.spareTimer = setTimeout(() => this.expireSpare(), Math.max(1, keep[0]!.until - now));
  }

  /**
   * New dispatches (in enqueue order) that take a spare slot (endSlot) of their organization and
   * agent, under the hand-on's rules (mayHandOn, a slot not near its expiry, this process's room):
   * within an organization in order, up to the first one that cannot. A spare slot of the org and
   * agent of one that may not take it goes back first (awaited: the ask that follows sees it
   * free). Returns the ones that took one, each holding its slot now.
   */
  private async takeSpare(asking: readonly Prepared[]): Promise<ReadonlySet<Prepared>> {
    if (this.spare.length === 0) return NO_PREPARED;
    const now = Date.now();
    const taken = new Set<Prepared>();
    const stopped = new Set<string>();
    const back: Prepared[] = [];
    for (const p of asking) {
      const org = p.job.orgId;
      if (stopped.has(org)) continue;
      const i = this.spare.findIndex((s) => s.p.job.orgId === org && s.p.run.agentId === p.run.agentId);
      const fit = i >= 0 && this.admitted + taken.size < this.concurrency && this.mayPassOn(this.spare[i]!, p, now);
      if (!fit) {
        // a spare slot of its org and agent that it may not take goes back before it asks, so
        // that the answer counts it free (an agent at its cap would otherwise wait for it)
        if (i >= 0) back.push(this.spare.splice(i, 1)[0]!.p);
        stopped.add(org);
        continue;
      }
      p.slot = this.spare.splice(i, 1)[0]!.p.slot;
      taken.add(p);
    }
    if (taken.size > 0) this.metrics.slotHandOns.inc(taken.size);
    if (back.length > 0) await this.slots.releaseNow(back.map((p) => ({ orgId: p.job.orgId, agentId: p.run.agentId, executionId: p.slot.id })));
    return taken;
  }

  /** Record which organizations' slots may be handed on (see HAND_ON_FRESH_MS); returns `grants`. */
  private noteHandOn(grants: SlotGrants, asked: ReadonlyArray<Prepared>): SlotGrants {
    const now = Date.now();
    if (grants.handOn === 'all') {
      this.handOnAllAt = now;
      return grants;
    }
    for (const p of asked) {
      const org = p.job.orgId;
      if (grants.handOn.has(org)) this.handOnAt.set(org, now);
      else this.handOnAt.delete(org);
    }
    return grants;
  }

  private mayHandOn(orgId: string, now: number): boolean {
    return now - this.handOnAllAt <= HAND_ON_FRESH_MS || now - (this.handOnAt.get(orgId) ?? 0) <= HAND_ON_FRESH_MS;
  }

  /**
   * The hand-on's rule, for the slot `from` held and the dispatch `to`: same organization and
   * agent, the slot's expiry set less than half its TTL ago, and the organization may hand on now.
   */
  private mayPassOn(from: { p: Prepared; slotTtl: number }, to: Prepared, now: number): boolean {
    return (
      from.p.job.orgId === to.job.orgId && from.p.run.agentId === to.run.agentId && now - from.p.slot.at < from.slotTtl / 2 && this.mayHandOn(to.job.orgId, now)
    );
  }

  /**
   * The slots freed here lately, each handed on to the oldest dispatch parked here of its
   * organization when that one is of the same agent, the organization may hand on (mayHandOn) and
   * the slot is not near its expiry; the others go back. Returns the dispatches that now hold one
   * (taken out of the parking and their org's line; the caller claims and runs them).
   */
  private handOn(): ParkedEntry[] {
    const freed = this.freed.splice(0);
    if (freed.length === 0) return [];
    const now = Date.now();
    const handed: ParkedEntry[] = [];
    const taken = new Set<ParkedEntry>();
    for (const { p, slotTtl } of freed) {
      // the parking is in enqueue order: the first of the org not taken yet is its oldest
      const next = this.parked.find((e) => e.p.job.orgId === p.job.orgId && !taken.has(e));
      if (next && this.mayPassOn({ p, slotTtl }, next.p, now)) {
        taken.add(next);
        next.p.slot = p.slot;
        handed.push(next);
      } else {
        this.slots.release(p.job.orgId, p.run.agentId, p.slot.id);
        this.parkAsk = true;
      }
    }
    if (handed.length > 0) {
      this.parked = this.parked.filter((e) => !taken.has(e));
      this.slots.leaveLines(handed.map((e) => ({ orgId: e.p.job.orgId, member: e.p.ticket.member })));
      this.metrics.slotHandOns.inc(handed.length);
    }
    return handed;
  }

  /**
   * Park a dispatch until it gets a slot; resolves once it has run (or was handed back to the
   * queue). The parking is kept in enqueue order (each organization's line order).
   */
  private park(p: Prepared, slotTtl: number, around?: ExecutionWrapper): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const at = p.ticket.enqueuedAt;
      let lo = 0;
      let hi = this.parked.length;
      // after every entry enqueued no later (the common case, a newer batch, costs one comparison)
      if (hi > 0 && this.parked[hi - 1]!.p.ticket.enqueuedAt > at) {
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (this.parked[mid]!.p.ticket.enqueuedAt <= at) lo = mid + 1;
          else hi = mid;
        }
      } else lo = hi;
      this.parked.splice(lo, 0, { p, slotTtl, around, resolve, reject });
      this.metrics.executions.inc({ outcome: 'deferred' });
      this.parkTimer ??= setInterval(() => this.retryParkedSoon(), PARK_RETRY_MS);
    });
  }

  /**
   * Back-pressure: the transport's way to stop, restart and meter taking jobs. The executor pauses
   * it while PARK_FACTOR × WORKER_CONCURRENCY dispatches wait here, and resumes it once half of
   * them started, so a backlog waits in the queue (in order) instead of in one worker. Meanwhile it
   * limits the jobs the transport holds to those in progress here plus what the parking's room
   * could take at the recent dispatches per job — never under 1.2 × WORKER_CONCURRENCY (room for
   * newcomers' jobs beside as many running ones as may run; a transport may look at a raised
   * limit only once a job ends) nor over PARK_FACTOR × WORKER_CONCURRENCY: a transport that
   * fetches every job it may hold before processing any (BullMQ) would otherwise take hundreds of
   * full jobs at once on resuming and park thousands of dispatches.
   */
  setIntake(intake: JobIntake): void {
    this.intake = intake;
    this.intakeLimit = 0;
    this.checkIntake();
  }

  private checkIntake(): void {
    const cap = this.concurrency * PARK_FACTOR;
    if (!this.intakePaused && this.parked.length >= cap) {
      this.intakePaused = true;
      this.intake?.pause();
    } else if (this.intakePaused && !this.stopping && this.parked.length < cap / 2) {
      this.intakePaused = false;
      this.intake?.resume();
    }
    if (this.intakePaused || !this.intake) return;
    const room = Math.ceil(Math.max(0, cap - this.parked.length) / Math.max(1, this.jobSize));
    const limit = Math.min(this.jobConcurrency, Math.max(this.concurrency + Math.ceil(this.concurrency / 5), this.batches + room));
    if (limit !== this.intakeLimit) {
      this.intakeLimit = limit;
      this.intake.limit(limit);
    }
  }

  /**
   * Dispatches that will not run here go back to the queue, delayed (their rows stay unclaimed).
   * They leave their orgs' lines first: waiting in the queue they would hold every later one back
   * until the line forgot them; when one comes back it takes its old place again.
   */
  private async handBack(ps: readonly Prepared[], delayMs = 200 + Math.floor(Math.random() * 300)): Promise<void> {
    this.metrics.executions.inc({ outcome: 'deferred' }, ps.length);
    for (const p of ps) this.leave(p);
    this.slots.leaveLines(ps.map((p) => ({ orgId: p.job.orgId, member: p.ticket.member })));
    await this.relay.requeue(ps.map((p) => ({ ...p.item, enqueuedAt: p.ticket.enqueuedAt })), delayMs).catch((e: unknown) => {
      this.log.warn(`handing ${ps.length} dispatch(es) back failed (the outbox relay enqueues them again): ${e instanceof Error ? e.message : String(e)}`);
    });
  }

  /**
   * Mark the outbox rows of parked dispatches as held here (`relayed_at` = now, one statement), so
   * the relay's safety net does not send them again while they wait for a slot (their jobs are
   * active, so an otherwise idle queue would look as if their jobs were gone): done when they park
   * and every third of OUTBOX_REDELIVER_MS while they wait. A copy sent all the same is harmless
   * (dropped here, or its claim lost elsewhere); if this process dies, the marks age and the relay
   * sends the rows again. Best effort: a failure only means a copy may be sent.
   */
  private holdRows(ps: readonly Prepared[]): void {
    const ids = ps.flatMap((p) => (p.item.id ? [p.item.id] : []));
    if (ids.length === 0) return;
    if (ps.length === this.parked.length) this.heldAt = Date.now();
    void this.relay.hold(ids).catch(() => undefined);
  }

  /**
   * Retry the parked ones once the slots freed meanwhile went back (coalesced: one round trip for
   * many releases). `ask` false: only slots ended here to hand on (retryParked asks Redis only if
   * one of them went back instead).
   */
  private retryParkedSoon(ask = true): void {
    if (ask) this.parkAsk = true;
    if (this.parkRetryScheduled) return;
    this.parkRetryScheduled = true;
    setTimeout(() => {
      this.parkRetryScheduled = false;
      void this.retryParked();
    }, RELEASE_WINDOW_MS);
  }

  /** One round trip for every parked dispatch (in enqueue order); the granted ones are claimed and run. */
  private async retryParked(): Promise<void> {
    if (this.parkRetrying) {
      this.parkRetryAgain = true;
      return;
    }
    this.parkRetrying = true;
    try {
      if (this.parked.length === 0 || this.stopping) for (const { p } of this.freed.splice(0)) this.slots.release(p.job.orgId, p.run.agentId, p.slot.id);
      if (this.parked.length === 0) return;
      if (!this.stopping && Date.now() - this.heldAt >= this.redeliverMs / 3) this.holdRows(this.parked.map((e) => e.p));
      if (this.stopping) {
        const entries = this.parked.splice(0);
        // hand them back to the queue: another worker takes them (their rows are unclaimed)
        await this.handBack(entries.map((e) => e.p), 0);
        for (const e of entries) e.resolve();
        return;
      }
      // slots ended here go on to the next of their org and agent without a round trip (handOn)
      const handed = this.handOn();
      if (handed.length > 0) {
        this.lastHandOnAt = Date.now();
        this.admitted += handed.length;
        this.checkIntake();
        void this.claimAndRunEach(handed);
      }
      if (!this.parkAsk || this.parked.length === 0) return;
      this.parkAsk = false;
      // (they stay in the parking while asked: a batch arriving meanwhile sees its org's parked ones)
      const entries = [...this.parked];
      const room = Math.max(0, this.concurrency - this.admitted);
      // Only those that could start are asked about: at most `room` start, and within an
      // organization only its oldest (its line), so each organization's first `room`. Every
      // PARKED_PRESENCE_MS all of them are presented, which keeps their places in their lines (the
      // intake's limit keeps the parking near PARK_FACTOR × WORKER_CONCURRENCY)
      const now = Date.now();
      const presentAll = now - this.parkPresentedAt >= PARKED_PRESENCE_MS;
      // with no room, while slots are handed on here, each org's oldest still asks: the answer
      // renews (or ends) the hand-on (HAND_ON_FRESH_MS)
      const handingOn = now - this.lastHandOnAt <= HAND_ON_FRESH_MS;
      const asked = presentAll ? entries : firstPerOrg(entries, room === 0 && handingOn ? 1 : room);
      if (asked.length === 0) return;
      if (presentAll) this.parkPresentedAt = now;
      const { granted } = this.noteHandOn(
        await this.slots.acquireBatch(
          asked.map((e) => slotRequest(e.p)),
          asked[0]!.slotTtl,
          room,
        ),
        asked.map((e) => e.p),
      );
      const started = new Set(asked.filter((_, i) => granted[i]));
      const go = asked.filter((e) => started.has(e));
      for (const e of go) e.p.slot.at = now;
      if (started.size > 0) this.parked = this.parked.filter((e) => !started.has(e));
      this.checkIntake();
      this.admitted += go.length;
      if (go.length > 0) {
        // one claim for all of them; each parked promise settles when its own execution ends
        void this.claimAndRunEach(go);
      }
    } finally {
      this.parkRetrying = false;
      if (this.parked.length === 0 && this.parkTimer) {
        clearInterval(this.parkTimer);
        this.parkTimer = undefined;
      }
      if (this.parkRetryAgain) {
        this.parkRetryAgain = false;
        this.retryParkedSoon(false);
      }
    }
  }

  private async claimAndRunEach(go: readonly ParkedEntry[]): Promise<void> {
    let claimed: Map<string, number>;
    try {
      const ids = go.flatMap((e) => (e.p.item.id ? [e.p.item.id] : []));
      claimed = ids.length > 0 ? await this.durable(() => this.relay.claim(ids)) : new Map<string, number>();
    } catch (err) {
      for (const e of go) {
        this.giveBack(e.p);
        e.reject(err);
      }
      return;
    }
    for (const e of go) {
      if (!this.wonClaim(e.p, claimed)) {
        this.giveBack(e.p);
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
      this.admitted--;
      this.leave(p);
      this.endSlot(p, slotTtl);
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
