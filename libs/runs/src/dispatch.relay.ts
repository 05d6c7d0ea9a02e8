import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { RunExecuteJob } from '#libs/contracts';
import { Metrics } from '#libs/metrics';
import { RunDispatchRepository } from './run-dispatch.repository.js';
import { RunExecutionQueue, type RunExecutionJob } from './run-execution.queue.js';

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
 * run change that needs them) to BullMQ, idempotently (job id `<runId>-<trigger sequence>`), and
 * deletes them once enqueued. Two paths, both safe with any number of processes:
 *
 * - fast path: a command hands the dispatch it committed to `relay()`; the dispatches of one
 *   event-loop turn go out as one `addBulk`, then their rows are deleted by id. If Redis is down
 *   or slow, nothing waits: the rows stay for the safety net.
 * - safety net: every `OUTBOX_RELAY_INTERVAL_MS`, rows older than twice that (left by a failed
 *   fast path, a Redis outage or a process that died) are claimed with SKIP LOCKED in a
 *   transaction that commits their deletion only once they are enqueued.
 *
 * A dispatch both paths handle is enqueued once: BullMQ keeps the job id (completed jobs are
 * kept, see RunExecutionQueue). Nothing on a request path waits on Redis.
 */
@Injectable()
export class DispatchRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(DispatchRelay.name);
  private timer?: NodeJS.Timeout;
  private pending: CommittedDispatch[] = [];
  private flushScheduled = false;
  private sweeping = false;
  private stopped = false;
  private failures = 0;
  private readonly batch: number;
  private readonly intervalMs: number;
  private readonly enabled: boolean;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly outbox: RunDispatchRepository,
    private readonly queue: RunExecutionQueue,
    private readonly metrics: Metrics,
  ) {
    this.batch = config.OUTBOX_RELAY_BATCH;
    this.intervalMs = config.OUTBOX_RELAY_INTERVAL_MS;
    this.enabled = config.OUTBOX_RELAY_ENABLED;
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
    this.pending.push(dispatch);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.pending;
    this.pending = [];
    // Redis unavailable: leave the rows to the safety net rather than queue writes in memory
    if (batch.length === 0 || !this.queue.ready()) return;
    try {
      await withTimeout(this.queue.addBulk(batch.map(({ job, triggerSequence }): RunExecutionJob => ({ job, triggerSequence }))), ENQUEUE_TIMEOUT_MS, 'enqueue');
      this.metrics.dispatchesRelayed.inc({ path: 'fast' }, batch.length);
      await this.outbox.deleteRelayed(batch.map((d) => d.id));
    } catch (e) {
      this.failed(e);
    }
  }

  /**
   * Safety net: relay rows older than twice the interval until none is left or Redis is
   * unavailable. Resolves with how many were relayed.
   */
  async sweep(): Promise<number> {
    if (this.sweeping || this.stopped || !this.queue.ready()) return 0;
    this.sweeping = true;
    let moved = 0;
    try {
      for (;;) {
        const n = await this.outbox.claimOlderThan(2 * this.intervalMs, this.batch, (jobs) => withTimeout(this.queue.addBulk(jobs), ENQUEUE_TIMEOUT_MS, 'enqueue'));
        moved += n;
        if (n > 0) this.metrics.dispatchesRelayed.inc({ path: 'sweep' }, n);
        if (this.failures > 0) this.log.log(`relaying dispatches again after ${this.failures} failed attempt(s)`);
        this.failures = 0;
        if (n < this.batch || this.stopped) break;
      }
    } catch (e) {
      this.failed(e);
    } finally {
      this.sweeping = false;
    }
    return moved;
  }

  private failed(e: unknown): void {
    this.metrics.relayFailures.inc();
    if (this.failures++ === 0) this.log.warn(`dispatch relay: ${e instanceof Error ? e.message : String(e)} (the outbox keeps the dispatches; will retry)`);
  }
}
