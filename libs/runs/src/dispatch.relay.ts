import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { RunExecuteJob } from '#libs/contracts';
import { Metrics } from '#libs/metrics';
import { RunDispatchRepository } from './run-dispatch.repository.js';
import { RunExecutionQueue, type RunExecutionJob } from './run-execution.queue.js';

/**
 * Most dispatches the fast path holds while an enqueue is in flight; beyond it (Redis slow) they
 * are left to the safety net — their rows are in the outbox — instead of growing in memory.
 */
const PENDING_MAX = 10_000;

/** Longest a relay waits for one addBulk before it gives the batch up (ms). */
const ENQUEUE_TIMEOUT_MS = 5_000;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A dispatch a command just committed: its outbox row and its job. */
export interface CommittedDispatch {
  id: string;
  triggerSequence: number;
  job: RunExecuteJob;
}

/**
 * The outbox relay: moves run dispatches (`run_dispatches`, written in the same statement as the
 * run change that needs them) to BullMQ, DISPATCH_BATCH_MAX per job. A row stays until the worker
 * that executes it claims it (deletes it, `claim`): a dispatch enqueued twice runs once, and a
 * row's presence means its execution has not started (the lost-run sweeper leaves such runs
 * alone). Two paths, both safe with any number of processes:
 *
 * - fast path: a command hands the dispatch it committed to `relay()`; the dispatches of one
 *   event-loop turn go out as one `addBulk` (no database statement), and while one `addBulk` is in
 *   flight, or less than DISPATCH_COALESCE_MS after the last one started, the dispatches committed
 *   meanwhile gather and go out together (one enqueue in flight per process, like a group commit:
 *   the busier the process, the fuller its jobs — each job costs BullMQ some 45 Redis commands and
 *   the worker one fairness round trip, whatever its size; an idle one adds no delay). If Redis is
 *   down or slow, nothing waits: the rows stay for the safety net.
 * - safety net: every `OUTBOX_RELAY_INTERVAL_MS`, rows nobody claimed are enqueued again — those
 *   older than twice the interval when the queue has nothing waiting (their jobs are gone: Redis
 *   lost them, or the fast path failed) or when this process's fast path failed since the last
 *   pass, and otherwise those older than OUTBOX_REDELIVER_MS (a job lost while others queue) —
 *   each at most once per OUTBOX_REDELIVER_MS.
 *
 * Workers hand back the part of a batch they cannot run yet (`defer`) and the unstarted part of a
 * batch whose worker died (`requeue`). Nothing on a request path waits on Redis.
 */
@Injectable()
export class DispatchRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(DispatchRelay.name);
  private timer?: NodeJS.Timeout;
  private pending: CommittedDispatch[] = [];
  private flushScheduled = false;
  /** An enqueue of the fast path is in flight: dispatches committed meanwhile wait for it and go out together. */
  private flushing = false;
  private sweeping = false;
  private stopped = false;
  private failures = 0;
  /** The fast path failed since the last safety-net pass: its rows need not wait OUTBOX_REDELIVER_MS. */
  private fastPathFailed = false;
  private readonly batch: number;
  private readonly intervalMs: number;
  private readonly redeliverMs: number;
  private readonly enabled: boolean;
  /** DISPATCH_COALESCE_MS: least time (ms) between two fast-path enqueues of this process. */
  private readonly coalesceMs: number;
  /** When the fast path's last enqueue started (performance.now() ms). */
  private lastFlushAt = -Infinity;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly outbox: RunDispatchRepository,
    private readonly queue: RunExecutionQueue,
    private readonly metrics: Metrics,
  ) {
    this.batch = config.OUTBOX_RELAY_BATCH;
    this.intervalMs = config.OUTBOX_RELAY_INTERVAL_MS;
    this.redeliverMs = config.OUTBOX_REDELIVER_MS;
    this.enabled = config.OUTBOX_RELAY_ENABLED;
    this.coalesceMs = config.DISPATCH_COALESCE_MS;
  }

  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    this.metrics.onCollect('outbox', async () => this.metrics.outboxPending.set(await this.outbox.pending()));
    this.metrics.onCollect('queue', async () => {
      const counts = await this.queue.queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
      for (const [state, n] of Object.entries(counts)) this.metrics.queueJobs.set({ state }, n);
    });
    this.timer = setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** Fast path: enqueue a dispatch a command just committed (batched per event-loop turn). */
  relay(dispatch: CommittedDispatch): void {
    if (!this.enabled || this.stopped) return;
    if (this.pending.length >= PENDING_MAX) {
      this.fastPathFailed = true;
      return;
    }
    this.pending.push(dispatch);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.flushing) return;
    this.flushScheduled = true;
    // at most one addBulk per DISPATCH_COALESCE_MS: a busy process fills its jobs, an idle one sends at once
    const wait = this.lastFlushAt + this.coalesceMs - performance.now();
    if (wait > 0) setTimeout(() => void this.flush(), wait);
    else setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.flushScheduled = false;
    this.flushing = true;
    this.lastFlushAt = performance.now();
    try {
      await this.enqueuePending();
    } finally {
      this.flushing = false;
      if (this.pending.length > 0 && !this.stopped) this.scheduleFlush();
    }
  }

  private async enqueuePending(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    // Redis unavailable: leave the rows to the safety net rather than queue writes in memory
    if (!this.queue.ready()) {
      this.fastPathFailed = true;
      return;
    }
    try {
      await withTimeout(this.queue.addBulk(batch.map(({ id, job, triggerSequence }): RunExecutionJob => ({ id, job, triggerSequence }))), ENQUEUE_TIMEOUT_MS, 'enqueue');
      this.metrics.dispatchesRelayed.inc({ path: 'fast' }, batch.length);
    } catch (e) {
      this.fastPathFailed = true;
      this.failed(e);
    }
  }

  /**
   * Safety net: enqueue again the rows nobody claimed (see the class) until none is left or Redis
   * is unavailable. Resolves with how many were relayed.
   */
  async sweep(): Promise<number> {
    if (this.sweeping || this.stopped || !this.queue.ready()) return 0;
    this.sweeping = true;
    let moved = 0;
    try {
      const idle = this.fastPathFailed || (await withTimeout(this.queue.waiting(), ENQUEUE_TIMEOUT_MS, 'queue counts')) === 0;
      this.fastPathFailed = false;
      for (;;) {
        const n = await this.outbox.relayable(this.batch, { minAgeMs: 2 * this.intervalMs, redeliverMs: this.redeliverMs, idle }, (jobs) =>
          withTimeout(this.queue.addBulk(jobs, { fresh: true }), ENQUEUE_TIMEOUT_MS, 'enqueue'),
        );
        moved += n;
        if (n > 0) this.metrics.dispatchesRelayed.inc({ path: 'sweep' }, n);
        if (this.failures > 0) this.log.log(`relaying dispatches again after ${this.failures} failed attempt(s)`);
        this.failures = 0;
        if (n < this.batch || this.stopped) break;
      }
    } catch (e) {
      this.fastPathFailed = true;
      this.failed(e);
    } finally {
      this.sweeping = false;
    }
    return moved;
  }

  /**
   * A worker claims the dispatches it is about to execute (deletes their outbox rows, one
   * statement): the ids returned are its to run, each with its run's fencing token (the
   * execution's epoch), their runs' leases taken for `lease` (RunDispatchRepository.claim); the
   * others ran or run elsewhere.
   */
  claim(ids: readonly string[], lease: { owner: string; ttlMs: number; idleForMs: number }): Promise<Map<string, number>> {
    return this.outbox.claim(ids, lease);
  }

  /**
   * A worker holds these dispatches (parked, waiting for a slot): their rows are marked relayed
   * now, so the safety net does not send them again before OUTBOX_REDELIVER_MS (one statement).
   */
  hold(ids: readonly string[]): Promise<void> {
    return this.outbox.hold(ids);
  }

  /** Which of `ids` nobody has claimed yet (their executions have not started). */
  unclaimed(ids: readonly string[]): Promise<Set<string>> {
    return this.outbox.unclaimed(ids);
  }

  /**
   * Hand dispatches back to the queue (a worker that cannot run them yet: `delayMs` later; or the
   * unstarted part of a batch whose worker died). Their rows stay unclaimed meanwhile, so the
   * safety net enqueues them again if this fails.
   */
  async requeue(dispatches: readonly RunExecutionJob[], delayMs = 0): Promise<void> {
    if (dispatches.length === 0) return;
    await withTimeout(this.queue.addBulk(dispatches, delayMs > 0 ? { delayMs } : { fresh: true }), ENQUEUE_TIMEOUT_MS, 'enqueue');
  }

  private failed(e: unknown): void {
    this.metrics.relayFailures.inc();
    if (this.failures++ === 0) this.log.warn(`dispatch relay: ${e instanceof Error ? e.message : String(e)} (the outbox keeps the dispatches; will retry)`);
  }
}
