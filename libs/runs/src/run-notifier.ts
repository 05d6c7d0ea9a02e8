import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '#libs/config';

type Listener = (lastSequence: number) => void;

/** Longest a listener waits for its subscription to be confirmed (ms); polling covers the rest. */
const SUBSCRIBE_WAIT_MS = 1_000;

/**
 * Wake-up signals after commit: "run R has events up to sequence N". Postgres stays the truth;
 * a signal only tells subscribers to read `sequence > last seen` from the log. Signals may be
 * lost (Redis restart, dropped connection): every reader also polls on a heartbeat, so a lost
 * signal delays an event but never loses it.
 *
 * Channel: `<REDIS_PREFIX>:run:<runId>`, message: the run's last sequence (decimal).
 * One publisher and one subscriber connection per process, multiplexed over runs.
 */
@Injectable()
export class RunNotifier implements OnApplicationShutdown {
  private readonly log = new Logger(RunNotifier.name);
  private readonly prefix: string;
  private readonly url: string;
  private pub?: Redis;
  private sub?: Redis;
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly cancelListeners = new Set<(runId: string) => void>();
  private readonly cancelChannel: string;
  private pendingWakeups = new Map<string, number>();
  private wakeupsScheduled = false;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.prefix = `${config.REDIS_PREFIX}:run:`;
    this.cancelChannel = `${config.REDIS_PREFIX}:run-canceled`;
    this.url = config.REDIS_URL;
  }

  private publisher(): Redis {
    if (!this.pub) {
      // auto-pipelining coalesces the publishes of concurrent appends into one write
      this.pub = new Redis(this.url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
      this.pub.on('error', (e: Error) => this.log.warn(`redis publisher: ${e.message}`));
    }
    return this.pub;
  }

  private subscriber(): Redis {
    if (!this.sub) {
      const sub = new Redis(this.url, { maxRetriesPerRequest: null });
      sub.on('error', (e: Error) => this.log.warn(`redis subscriber: ${e.message}`));
      sub.on('message', (channel: string, message: string) => {
        if (channel === this.cancelChannel) {
          for (const l of this.cancelListeners) l(message);
          return;
        }
        const set = this.listeners.get(channel.slice(this.prefix.length));
        if (!set) return;
        const seq = Number(message);
        for (const l of set) l(seq);
      });
      this.sub = sub;
    }
    return this.sub;
  }

  /**
   * Cancellations, on one channel (`<REDIS_PREFIX>:run-canceled`, message: the run id): workers
   * subscribe once instead of once per run they execute. Fire-and-forget like `notify`.
   */
  notifyCanceled(runId: string): void {
    this.publisher()
      .publish(this.cancelChannel, runId)
      .catch((e: Error) => this.log.warn(`publish cancel failed for run ${runId}: ${e.message}`));
  }

  /** Listen to every cancellation (workers). Returns the function that removes the listener. */
  async onCanceled(listener: (runId: string) => void): Promise<() => void> {
    this.cancelListeners.add(listener);
    if (this.cancelListeners.size === 1) {
      const sub = this.subscriber();
      const subscribed = sub.subscribe(this.cancelChannel).catch((e: Error) => this.log.warn(`subscribe to cancellations failed: ${e.message}`));
      await Promise.race([subscribed, new Promise((r) => setTimeout(r, SUBSCRIBE_WAIT_MS).unref())]);
    }
    return () => {
      this.cancelListeners.delete(listener);
    };
  }

  /**
   * Fire-and-forget: a failed publish is logged, never thrown (readers poll anyway). Wake-ups of
   * one event-loop turn go out as one pipeline (one write), one per run with its newest sequence.
   */
  notify(runId: string, lastSequence: number): void {
    const seen = this.pendingWakeups.get(runId);
    if (seen === undefined || lastSequence > seen) this.pendingWakeups.set(runId, lastSequence);
    if (this.wakeupsScheduled) return;
    this.wakeupsScheduled = true;
    setImmediate(() => this.flushWakeups());
  }

  private flushWakeups(): void {
    this.wakeupsScheduled = false;
    const batch = this.pendingWakeups;
    this.pendingWakeups = new Map();
    const pipeline = this.publisher().pipeline();
    for (const [runId, seq] of batch) pipeline.publish(this.prefix + runId, String(seq));
    pipeline.exec().catch((e: Error) => this.log.warn(`publishing ${batch.size} wake-up(s) failed: ${e.message}`));
  }

  /**
   * Listen for wake-ups of one run. Resolves once the subscription is active (so a signal sent
   * after that is not missed), or after at most 1 s when Redis does not confirm it (readers poll);
   * returns the function that removes the listener.
   */
  async listen(runId: string, listener: Listener): Promise<() => void> {
    let set = this.listeners.get(runId);
    if (!set) {
      set = new Set();
      this.listeners.set(runId, set);
      const sub = this.subscriber();
      const subscribed = sub.subscribe(this.prefix + runId).catch((e: Error) => this.log.warn(`subscribe failed for run ${runId}: ${e.message}`));
      // Never wait long on a Redis that is down or slow: readers poll anyway, and ioredis
      // resubscribes on reconnect.
      await Promise.race([subscribed, new Promise((r) => setTimeout(r, SUBSCRIBE_WAIT_MS).unref())]);
    }
    set.add(listener);
    return () => {
      const s = this.listeners.get(runId);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) {
        this.listeners.delete(runId);
        this.sub?.unsubscribe(this.prefix + runId).catch(() => undefined);
      }
    };
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    this.pub?.disconnect();
    this.sub?.disconnect();
  }
}
