import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { BlockedReasonSchema, RunStatusSchema, type BlockedReason, type RunStatus } from '#libs/contracts';

/** The run state a wake-up may carry (the state after the commit it announces). */
export interface WakeupState {
  status: RunStatus;
  blockedReason: BlockedReason | null;
}

/** `state` is absent when the publisher did not send it (readers then read the run). */
export type WakeupListener = (lastSequence: number, state?: WakeupState) => void;

/** Longest a listener waits for the subscription to be confirmed (ms); polling covers the rest. */
const SUBSCRIBE_WAIT_MS = 1_000;

function encode(seq: number, state?: WakeupState): string {
  return state ? `${seq}|${state.status}|${state.blockedReason ?? ''}` : String(seq);
}

function decode(message: string): { seq: number; state?: WakeupState } {
  const [seq, status, blocked] = message.split('|');
  const out: { seq: number; state?: WakeupState } = { seq: Number(seq) };
  const st = RunStatusSchema.safeParse(status);
  if (st.success) {
    const br = BlockedReasonSchema.safeParse(blocked);
    out.state = { status: st.data, blockedReason: br.success ? br.data : null };
  }
  return out;
}

/**
 * Wake-up signals after commit: "run R has events up to sequence N (and is now in state S)".
 * Postgres stays the truth; a signal only tells readers to read `sequence > last seen` from the
 * log, or that a blocking wait may end. Signals may be lost (Redis restart, dropped connection):
 * every reader also polls, so a lost signal delays an event but never loses it.
 *
 * Channel `<REDIS_PREFIX>:run:<runId>`, message `<lastSequence>[|<status>|<blockedReason>]`.
 * One publisher and one subscriber connection per process. The subscriber holds ONE pattern
 * subscription (`<REDIS_PREFIX>:run:*`) for every run, so following a run costs no Redis round
 * trip (a blocking SendMessage or a stream starts without SUBSCRIBE / UNSUBSCRIBE); each process
 * receives every wake-up of the deployment, a few dozen bytes each.
 */
@Injectable()
export class RunNotifier implements OnApplicationShutdown {
  private readonly log = new Logger(RunNotifier.name);
  private readonly prefix: string;
  private readonly url: string;
  private pub?: Redis;
  private sub?: Redis;
  private patternReady?: Promise<unknown>;
  private readonly listeners = new Map<string, Set<WakeupListener>>();
  private readonly cancelListeners = new Set<(runId: string) => void>();
  private readonly cancelChannel: string;
  private readonly pushChannel: string;
  private readonly pushListeners = new Set<(runId: string) => void>();
  private pendingWakeups = new Map<string, { seq: number; state?: WakeupState }>();
  private wakeupsScheduled = false;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.prefix = `${config.REDIS_PREFIX}:run:`;
    this.cancelChannel = `${config.REDIS_PREFIX}:run-canceled`;
    this.pushChannel = `${config.REDIS_PREFIX}:run-push-configured`;
    this.url = config.REDIS_URL;
  }

  /**
   * True while the wake-up subscription is confirmed and connected: a listener added now misses
   * no signal published after it. False before the first `listen`, or while Redis is away.
   */
  get live(): boolean {
    return this.sub?.status === 'ready' && this.patternConfirmed;
  }
  private patternConfirmed = false;

  private publisher(): Redis {
    if (!this.pub) {
      // auto-pipelining coalesces commands issued in one event-loop turn into one write
      this.pub = new Redis(this.url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
      this.pub.on('error', (e: Error) => this.log.warn(`redis publisher: ${e.message}`));
    }
    return this.pub;
  }

  private subscriber(): Redis {
    if (!this.sub) {
      const sub = new Redis(this.url, { maxRetriesPerRequest: null });
      sub.on('error', (e: Error) => this.log.warn(`redis subscriber: ${e.message}`));
      // ioredis re-subscribes after a reconnect; until it has, the subscription is not confirmed
      sub.on('close', () => (this.patternConfirmed = false));
      sub.on('ready', () => {
        if (this.patternReady) this.patternConfirmed = true;
      });
      sub.on('message', (channel: string, message: string) => {
        if (channel === this.cancelChannel) for (const l of this.cancelListeners) l(message);
        else if (channel === this.pushChannel) for (const l of this.pushListeners) l(message);
      });
      sub.on('pmessage', (_pattern: string, channel: string, message: string) => {
        const set = this.listeners.get(channel.slice(this.prefix.length));
        if (!set) return;
        const { seq, state } = decode(message);
        for (const l of set) l(seq, state);
      });
      this.sub = sub;
    }
    return this.sub;
  }

  /** Subscribe to every run's wake-ups once per process; waits at most SUBSCRIBE_WAIT_MS. */
  private async ensurePattern(): Promise<void> {
    if (!this.patternReady) {
      this.patternReady = this.subscriber()
        .psubscribe(`${this.prefix}*`)
        .then(
          () => (this.patternConfirmed = true),
          (e: Error) => {
            // not subscribed at all (ioredis will not resubscribe it): the next listener tries again
            this.patternReady = undefined;
            this.log.warn(`subscribe to wake-ups failed: ${e.message}`);
          },
        );
    }
    if (this.patternConfirmed) return;
    // Never wait long on a Redis that is down or slow: readers poll anyway
    await Promise.race([this.patternReady, new Promise((r) => setTimeout(r, SUBSCRIBE_WAIT_MS).unref())]);
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
      const subscribed = this.subscriber()
        .subscribe(this.cancelChannel)
        .catch((e: Error) => this.log.warn(`subscribe to cancellations failed: ${e.message}`));
      await Promise.race([subscribed, new Promise((r) => setTimeout(r, SUBSCRIBE_WAIT_MS).unref())]);
    }
    return () => {
      this.cancelListeners.delete(listener);
    };
  }

  /**
   * Fire-and-forget: a failed publish is logged, never thrown (readers poll anyway). Wake-ups of
   * one event-loop turn go out as one pipeline (one write), one per run with its newest sequence
   * (and the state after it, when given).
   */
  notify(runId: string, lastSequence: number, state?: WakeupState): void {
    const seen = this.pendingWakeups.get(runId);
    if (seen === undefined || lastSequence > seen.seq) {
      this.pendingWakeups.set(runId, { seq: lastSequence, state: state ? { status: state.status, blockedReason: state.blockedReason } : undefined });
    }
    if (this.wakeupsScheduled) return;
    this.wakeupsScheduled = true;
    setImmediate(() => this.flushWakeups());
  }

  private flushWakeups(): void {
    this.wakeupsScheduled = false;
    const batch = this.pendingWakeups;
    this.pendingWakeups = new Map();
    const pipeline = this.publisher().pipeline();
    for (const [runId, w] of batch) pipeline.publish(this.prefix + runId, encode(w.seq, w.state));
    pipeline.exec().catch((e: Error) => this.log.warn(`publishing ${batch.size} wake-up(s) failed: ${e.message}`));
  }

  /**
   * Listen for wake-ups of one run. Resolves once the process's wake-up subscription is confirmed
   * (so a signal sent after that is not missed), or after at most 1 s when Redis does not confirm
   * it (readers poll); then adding a listener costs no round trip. Returns the function that
   * removes the listener.
   */
  async listen(runId: string, listener: WakeupListener): Promise<() => void> {
    let set = this.listeners.get(runId);
    if (!set) {
      set = new Set();
      this.listeners.set(runId, set);
    }
    set.add(listener);
    await this.ensurePattern();
    return () => {
      const s = this.listeners.get(runId);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) this.listeners.delete(runId);
    };
  }

  /**
   * A push notification config was set on a run (`<REDIS_PREFIX>:run-push-configured`, message:
   * the run id): delivery loops start following it at once instead of at their next sweep.
   * Fire-and-forget.
   */
  notifyPushConfigured(runId: string): void {
    this.publisher()
      .publish(this.pushChannel, runId)
      .catch((e: Error) => this.log.warn(`publish push-configured failed for run ${runId}: ${e.message}`));
  }

  /** Listen to every push-configured signal (workers). Returns the function that removes the listener. */
  async onPushConfigured(listener: (runId: string) => void): Promise<() => void> {
    this.pushListeners.add(listener);
    if (this.pushListeners.size === 1) {
      const subscribed = this.subscriber()
        .subscribe(this.pushChannel)
        .catch((e: Error) => this.log.warn(`subscribe to push-configured failed: ${e.message}`));
      await Promise.race([subscribed, new Promise((r) => setTimeout(r, SUBSCRIBE_WAIT_MS).unref())]);
    }
    return () => {
      this.pushListeners.delete(listener);
    };
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    this.pub?.disconnect();
    this.sub?.disconnect();
  }
}
