import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { RunDispatchRepository } from './run-dispatch.repository.js';
import { RunExecutionQueue } from './run-execution.queue.js';

/** Longest a relay waits for one addBulk before it rolls the batch back (ms). */
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

/**
 * The outbox relay: moves pending run dispatches (`run_dispatches`, written in the same
 * transaction as the run change that needs them) to BullMQ in batches (`addBulk`, idempotent job
 * ids) and deletes them in the transaction that claimed them, once enqueued.
 *
 * Runs in every process that has RunsModule (safe with many: rows are claimed with SKIP LOCKED).
 * `kick()` is called after a command commits, so a dispatch normally leaves within one event-loop
 * turn, batched with the others of that turn; a timer (`OUTBOX_RELAY_INTERVAL_MS`) picks up what
 * other or earlier processes left behind. Nothing on a request path waits on it: while Redis is
 * down commands still commit, rows wait here, and they are enqueued once Redis is back.
 */
@Injectable()
export class DispatchRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(DispatchRelay.name);
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;
  private failures = 0;
  private readonly batch: number;
  private readonly intervalMs: number;
  private readonly enabled: boolean;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly outbox: RunDispatchRepository,
    private readonly queue: RunExecutionQueue,
  ) {
    this.batch = config.OUTBOX_RELAY_BATCH;
    this.intervalMs = config.OUTBOX_RELAY_INTERVAL_MS;
    this.enabled = config.OUTBOX_RELAY_ENABLED;
  }

  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    this.timer = setInterval(() => this.kick(), this.intervalMs);
    this.timer.unref();
    this.kick();
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** Ask for a relay pass soon (coalesced: one pass at a time, one more if kicked meanwhile). */
  kick(): void {
    if (!this.enabled || this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.drain());
  }

  /** Relay until the outbox is empty or Redis is unavailable. Resolves with how many were relayed. */
  async drain(): Promise<number> {
    let moved = 0;
    try {
      for (;;) {
        this.again = false;
        if (this.stopped || !this.queue.ready()) break;
        const n = await this.outbox.claim(this.batch, (jobs) => withTimeout(this.queue.addBulk(jobs), ENQUEUE_TIMEOUT_MS, 'enqueue'));
        moved += n;
        if (this.failures > 0) this.log.log(`relaying dispatches again after ${this.failures} failed attempt(s)`);
        this.failures = 0;
        if (n < this.batch && !this.again) break;
      }
    } catch (e) {
      if (this.failures++ === 0) this.log.warn(`dispatch relay: ${e instanceof Error ? e.message : String(e)} (will retry)`);
    } finally {
      this.running = false;
    }
    return moved;
  }
}
