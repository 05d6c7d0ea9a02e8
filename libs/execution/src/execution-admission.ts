import { getHeapStatistics } from 'node:v8';
import { Logger } from '@nestjs/common';
import type { AppConfig } from '#libs/config';
import type { DispatchRelay, RunExecutionJob } from '#libs/runs';
import type { Metrics } from '#libs/metrics';
import { PARKED_PRESENCE_MS, RELEASE_WINDOW_MS, type ExecutionSlots, type SlotGrants, type SlotRequest } from './execution-slots.js';
import type { ExecutionWrapper, Prepared } from './prepared-dispatch.js';

/** A dispatch parked until it gets a slot, and how to settle its batch's wait. */
export interface ParkedEntry {
  p: Prepared;
  slotTtl: number;
  around?: ExecutionWrapper;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/**
 * Dispatches parked per process: at this many times WORKER_CONCURRENCY (at most WORKER_CONCURRENCY +
 * PARK_MAX_EXTRA) the transport stops taking jobs (until half of them have started), and before that its intake is metered (setIntake). A
 * parked dispatch stays here until it runs (or the process stops), its job active meanwhile.
 * Handing the youngest back to the queue past a cap instead made a large backlog cycle: measured,
 * 27,000 runs were taken from the queue 208,000 times (a job, its Redis commands and a fairness
 * call each time).
 */
const PARK_FACTOR = 10;

/** Dispatches parked per process past WORKER_CONCURRENCY, at most (with the default 4,000: 14,000 parked, not 40,000). */
const PARK_MAX_EXTRA = 10_000;

/** How often (ms) the heap is looked at for WORKER_HEAP_HIGH_WATER_PCT, at most. */
const HEAP_SAMPLE_MS = 250;

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

/** How the executor meters a transport's intake of jobs (see ExecutionAdmission.setIntake). */
export interface JobIntake {
  pause(): void;
  resume(): void;
  /** Hold at most this many jobs at once (fetching and in progress; at least 1). */
  limit(jobs: number): void;
}

/**
 * When a prepared dispatch starts: the executor's scheduler (docs/architecture.md "Batches",
 * "Slots handed on", "Fairness"). A dispatch asks for its organization's and agent's slot
 * (ExecutionSlots, one round trip per batch) within this worker's room (WORKER_CONCURRENCY); one
 * that must wait is parked here, in enqueue order, and asks again as slots free (every
 * PARK_RETRY_MS for slots freed elsewhere, and every PARKED_PRESENCE_MS all of the parked ones, which
 * keeps their places in their lines); an ended execution's slot is handed on to the next parked
 * dispatch of its organization and agent, or kept EXECUTION_SPARE_SLOT_MS for a new one, without a
 * round trip. It meters the transport's intake (back-pressure), drops a copy of a dispatch parked or
 * running here, marks the outbox rows of parked dispatches held, and hands them back to the queue
 * when the process stops.
 *
 * It runs nothing and knows no runtime: the dispatches it admits hold a slot and go to the executor,
 * which claims them (the one gate every start goes through: RunDispatchRepository.claim) and runs
 * the ones whose claim won — a batch's straight from `admit`, parked ones through `claimAndRun`.
 * One per RunExecutor, which constructs it.
 */
export class ExecutionAdmission {
  private readonly log = new Logger(ExecutionAdmission.name);
  /** Set once the process stops (stop): nothing more is admitted or parked, parked dispatches go back to the queue. */
  private stopping = false;
  /** How long (ms) a slot lasts unless renewed: 1.5 × EXECUTION_HEARTBEAT_MS (ExecutionLease renews it every heartbeat). */
  readonly slotTtl: number;
  /**
   * EXECUTION_SPARE_SLOT_MS: how long the slot of an execution that ended with nothing parked here
   * waits for the next dispatch of its organization and agent (a client that sends its next
   * message once it has the answer): taken without a round trip, as a hand-on; past it, the slot
   * goes back. Meanwhile the slot sets count it as running, as they did a moment before.
   */
  private readonly spareMs: number;
  /** WORKER_CONCURRENCY: executions this process runs at once, at most. */
  private readonly concurrency: number;
  /** Dispatches parked here at most: PARK_FACTOR × WORKER_CONCURRENCY, at most WORKER_CONCURRENCY + PARK_MAX_EXTRA. */
  private readonly parkCap: number;
  /** Bytes of V8 heap in use above which nothing new starts here (WORKER_HEAP_HIGH_WATER_PCT of the heap limit; Infinity: off). */
  private readonly heapHighWater: number;
  /** Whether the heap was above heapHighWater when last looked at, and when (ms). */
  private heapFull = false;
  private heapSampledAt = 0;
  /** Executions admitted and not ended (a slot held), in this process. */
  private admitted = 0;
  /**
   * Outbox ids of the dispatches parked or running here: a copy of one that arrives (the relay
   * sent it again, or two copies came in one job) is dropped, the one here claims it.
   */
  private readonly holding = new Set<string>();
  /** OUTBOX_REDELIVER_MS: the relay re-sends a row nobody marked for this long. */
  private readonly redeliverMs: number;
  /**
   * Half of OUTBOX_RELAY_INTERVAL_MS: a parked dispatch this old has its row marked held (the
   * relay sends rows older than twice its interval again when the queue looks idle).
   */
  private readonly holdAfterMs: number;
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
    config: AppConfig,
    private readonly slots: ExecutionSlots,
    private readonly relay: DispatchRelay,
    private readonly metrics: Metrics,
    /**
     * Claims parked dispatches that were just admitted (one statement for all of them) and runs the
     * ones whose claim won, settling each entry when its execution ends (RunExecutor); one whose
     * claim another delivery won, or all of them if the claim fails, it gives back (giveBack).
     */
    private readonly claimAndRun: (go: readonly ParkedEntry[]) => Promise<void>,
  ) {
    this.slotTtl = config.EXECUTION_HEARTBEAT_MS * 1.5;
    this.concurrency = config.WORKER_CONCURRENCY;
    this.parkCap = Math.min(this.concurrency * PARK_FACTOR, this.concurrency + PARK_MAX_EXTRA);
    this.heapHighWater = config.WORKER_HEAP_HIGH_WATER_PCT >= 100 ? Infinity : (getHeapStatistics().heap_size_limit * config.WORKER_HEAP_HIGH_WATER_PCT) / 100;
    this.spareMs = config.EXECUTION_SPARE_SLOT_MS;
    this.redeliverMs = config.OUTBOX_REDELIVER_MS;
    this.holdAfterMs = config.OUTBOX_RELAY_INTERVAL_MS / 2;
  }

  /** How many jobs a transport should run at once (a batch job stays active while its dispatches run or wait here). */
  get jobConcurrency(): number {
    // as many as may park: a newcomer organization's job is taken (and admitted from the reserve)
    // while a busy one's wait here; the intake pauses when the parking is full
    return this.parkCap;
  }

  /**
   * How many more executions may start here now: WORKER_CONCURRENCY less those running, or none
   * while the process stops or its heap is above WORKER_HEAP_HIGH_WATER_PCT (sampled every
   * HEAP_SAMPLE_MS; the dispatches then park, and the intake pauses once the parking is full).
   */
  private room(): number {
    if (this.stopping) return 0;
    const now = Date.now();
    if (this.heapHighWater !== Infinity && now - this.heapSampledAt >= HEAP_SAMPLE_MS) {
      this.heapSampledAt = now;
      const full = getHeapStatistics().used_heap_size > this.heapHighWater;
      if (full !== this.heapFull) {
        this.heapFull = full;
        if (full) this.log.warn(`heap above WORKER_HEAP_HIGH_WATER_PCT with ${this.admitted} executions running: new ones wait until it falls back`);
        else this.log.log(`heap back under WORKER_HEAP_HIGH_WATER_PCT (${this.admitted} executions running): new ones start again`);
      }
    }
    return this.heapFull ? 0 : Math.max(0, this.concurrency - this.admitted);
  }

  /**
   * The process stops: nothing more is admitted or parked here. Parked dispatches go back to the
   * queue (another worker takes them), spare slots back to the slot sets.
   */
  stop(): void {
    this.stopping = true;
    if (this.parked.length > 0) this.retryParkedSoon();
    if (this.spare.length > 0) this.expireSpare(true);
  }

  /**
   * Count a batch (job) of `size` dispatches in progress while `execute` runs it: its size goes
   * into the recent dispatches per job, and both meter the intake (checkIntake).
   */
  async batch(size: number, execute: () => Promise<void>): Promise<void> {
    this.batches++;
    this.jobSize += (size - this.jobSize) / 16;
    try {
      await execute();
    } finally {
      this.batches--;
      this.checkIntake();
    }
  }

  /**
   * Step 0 of a batch: the dispatches that arrive but a copy of one parked or running here (the
   * relay sent it again, or it came twice in one job), which is dropped: the one here claims it
   * (one claim per dispatch, RunDispatchRepository.claim). Each one returned is held here
   * (`holding`) until it leaves.
   */
  arrive(items: readonly RunExecutionJob[]): RunExecutionJob[] {
    return items.filter((item) => {
      if (!item.id) return true;
      if (this.holding.has(item.id)) {
        this.metrics.executions.inc({ outcome: 'duplicate' });
        return false;
      }
      this.holding.add(item.id);
      return true;
    });
  }

  /**
   * Steps 2 and 3 of a batch, once its dispatches that `arrive` kept (`fresh`) were prepared
   * (`prepared`, in enqueue order): the ones that did not prepare leave at once; the others get a
   * spare slot, or ask for theirs (one round trip), or park here until they get one (each parked
   * one runs in `around`, like the batch's). Returns the admitted ones, each holding a slot (the
   * caller claims and runs them, and gives back those that will not run), and the parked ones'
   * promises, each settled once its dispatch has run (or was handed back to the queue).
   */
  async admit(fresh: readonly RunExecutionJob[], prepared: readonly Prepared[], around?: ExecutionWrapper): Promise<{ admitted: Prepared[]; parked: Promise<void>[] }> {
    // the ones with nothing to run leave at once (their rows are dropped with the executor's claim)
    const kept = new Set(prepared.map((p) => p.item));
    for (const item of fresh) if (item.id && !kept.has(item)) this.holding.delete(item.id);

    // 2. admission: this worker's room, then the fair share (one round trip for the batch). An
    // organization with dispatches parked here already: its new ones queue behind them (parked, and
    // asked in enqueue order with them), so they never pass an earlier one that is not presented
    // now. The others all ask, so that those past this worker's room still take their place in
    // their org's line.
    const parkedOrgs = new Set(this.parked.map((e) => e.p.job.orgId));
    const asking = prepared.filter((p) => !parkedOrgs.has(p.job.orgId));
    const behind = prepared.filter((p) => parkedOrgs.has(p.job.orgId));
    // slots of executions that just ended here go on to new ones of their org and agent (takeSpare)
    const spared = this.stopping ? NO_PREPARED : await this.takeSpare(asking);
    if (spared.size > 0) this.admitted += spared.size;
    const asks = spared.size > 0 ? asking.filter((p) => !spared.has(p)) : asking;
    const room = this.room();
    const askedAt = Date.now();
    const { granted } = this.noteHandOn(
      await this.slots.acquireBatch(
        asks.map(slotRequest),
        this.slotTtl,
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
    const parked = this.stopping ? [] : waiting.map((p) => this.park(p, this.slotTtl, around));
    if (parked.length > 0) this.holdRows(waiting);
    if (this.stopping && waiting.length > 0) await this.handBack(waiting);
    this.checkIntake();
    return { admitted, parked };
  }

  /** An admitted dispatch that will not run here: its slot back. */
  giveBack(p: Prepared): void {
    this.admitted--;
    this.leave(p);
    this.releaseSlot(p);
  }

  /** An admitted execution ended: it leaves this process, its slot goes on or back (endSlot). */
  ended(p: Prepared, slotTtl: number): void {
    this.admitted--;
    this.leave(p);
    this.endSlot(p, slotTtl);
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
   * it while parkCap dispatches (PARK_FACTOR × WORKER_CONCURRENCY, at most WORKER_CONCURRENCY + PARK_MAX_EXTRA) wait here, and resumes it once half of
   * them started, so a backlog waits in the queue (in order) instead of in one worker. Meanwhile it
   * limits the jobs the transport holds to those in progress here plus what the parking's room
   * could take at the recent dispatches per job — never under 1.2 × WORKER_CONCURRENCY (room for
   * newcomers' jobs beside as many running ones as may run; a transport may look at a raised
   * limit only once a job ends) nor over parkCap: a transport that
   * fetches every job it may hold before processing any (BullMQ) would otherwise take hundreds of
   * full jobs at once on resuming and park thousands of dispatches.
   */
  setIntake(intake: JobIntake): void {
    this.intake = intake;
    this.intakeLimit = 0;
    this.checkIntake();
  }

  private checkIntake(): void {
    const cap = this.parkCap;
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
   * active, so an otherwise idle queue would look as if their jobs were gone). Only rows the relay
   * could take soon are marked: a dispatch enqueued at least half a relay interval ago (the relay
   * takes rows older than twice its interval), again every third of OUTBOX_REDELIVER_MS while it
   * waits — checked when it parks and at every retry of the parking (PARK_RETRY_MS), so a dispatch
   * parked for a moment (most, under a passing burst) costs no statement. A copy sent all the same
   * is harmless (dropped here, or its claim lost elsewhere); if this process dies, the marks age
   * and the relay sends the rows again. Best effort: a failure only means a copy may be sent.
   */
  private holdRows(ps: readonly Prepared[]): void {
    const now = Date.now();
    const due = ps.filter((p) => p.item.id && now - p.ticket.enqueuedAt >= this.holdAfterMs && now - (p.heldAt ?? 0) >= this.redeliverMs / 3);
    if (due.length === 0) return;
    for (const p of due) p.heldAt = now;
    void this.relay.hold(due.map((p) => p.item.id!)).catch(() => undefined);
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
      if (!this.stopping) this.holdRows(this.parked.map((e) => e.p));
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
        void this.claimAndRun(handed);
      }
      if (!this.parkAsk || this.parked.length === 0) return;
      this.parkAsk = false;
      // (they stay in the parking while asked: a batch arriving meanwhile sees its org's parked ones)
      const entries = [...this.parked];
      const room = this.room();
      // Only those that could start are asked about: at most `room` start, and within an
      // organization only its oldest (its line), so each organization's first `room`. Every
      // PARKED_PRESENCE_MS all of them are presented, which keeps their places in their lines (the
      // intake's limit keeps the parking near parkCap)
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
        void this.claimAndRun(go);
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
}
