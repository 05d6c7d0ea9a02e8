import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { SequencedOutputEnvelope } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { EventLogRepository } from './event-log.repository.js';
import { RunNotifier, type CommittedEnvelopes } from './run-notifier.js';

/** Page size of every read from the log (catch-up and live). */
const PAGE = 500;

/**
 * The poll of followed runs is spread over its interval in this many ticks: each run is re-read
 * once per STREAM_POLL_INTERVAL_MS, a tenth of them per tick. (Reading every run at once made a
 * burst of one read per followed run every interval, which stalled the process's live deliveries
 * behind it.)
 */
const POLL_SLICES = 10;

/**
 * The process's view of one run's log tail, shared by all its local subscribers: one reader per
 * run per process, however many streams follow it. `ring` holds the newest envelopes, contiguous
 * by sequence and ending at `lastSequence`, so live subscribers are served from memory; a
 * subscriber that falls behind the ring (slow reader, old cursor) reads its own pages from
 * Postgres until it catches up. The tail only ever grows by envelopes that continue it exactly
 * (`extend`), whether they come from a read of the log or from a wake-up that carried them.
 */
class RunTail {
  lastSequence = 0;
  ring: SequencedOutputEnvelope[] = [];
  subscribers = 0;
  unlisten: (() => void) | null = null;
  private fetching: Promise<void> | null = null;
  private again = false;
  private waiters = new Set<() => void>();
  /** Set once the first read has happened (so subscribers know the tail is current). */
  ready: Promise<void> | null = null;
  /** Which tick of the poll's interval re-reads this tail (RunStreamHub: the poll is spread). */
  pollSlot = 0;

  constructor(
    readonly orgId: string,
    readonly runId: string,
    private readonly log: EventLogRepository,
    private readonly ringSize: number,
  ) {}

  /**
   * Deliver the envelopes a wake-up carried, when they continue the tail (the first one not yet
   * held is `lastSequence + 1`; those already held are skipped: a duplicate or overlapping
   * wake-up). False on a gap (a lost or reordered wake-up): the caller reads the log instead.
   * Only envelopes of this tail's organization are taken.
   */
  offer(committed: CommittedEnvelopes): boolean {
    if (committed.orgId !== this.orgId) return false;
    const envs = committed.envelopes;
    const first = envs[0]?.sequence;
    if (first === undefined || first > this.lastSequence + 1) return false;
    this.extend(envs);
    return true;
  }

  /**
   * Append contiguous envelopes (sequence order) to the ring: those at or below `lastSequence`
   * are already held and skipped; the rest must start at `lastSequence + 1` (else nothing is
   * taken). Wakes waiters when the tail grew.
   */
  private extend(envs: readonly SequencedOutputEnvelope[]): void {
    const first = envs[0]?.sequence;
    if (first === undefined) return;
    const from = this.lastSequence + 1 - first;
    if (from < 0 || from >= envs.length) return;
    for (let i = from; i < envs.length; i++) this.ring.push(envs[i]!);
    if (this.ring.length > this.ringSize) this.ring.splice(0, this.ring.length - this.ringSize);
    this.lastSequence = envs[envs.length - 1]!.sequence;
    this.wake();
  }

  /** Read everything after `lastSequence` (coalescing concurrent calls), then wake waiters. */
  refresh(): Promise<void> {
    if (this.fetching) {
      this.again = true;
      return this.fetching;
    }
    this.fetching = (async () => {
      try {
        do {
          this.again = false;
          for (;;) {
            const page = await this.log.readAfter(this.orgId, this.runId, this.lastSequence, PAGE);
            if (page.length === 0) break;
            // wake-ups may have extended the tail while the read was in flight: take the rest
            this.extend(page);
            if (page.length < PAGE) break;
          }
        } while (this.again);
      } finally {
        this.fetching = null;
      }
    })();
    return this.fetching;
  }

  /** Call `waiter` once, at the next refresh that finds events. */
  onChange(waiter: () => void): void {
    this.waiters.add(waiter);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = new Set();
    for (const w of waiters) w();
  }
}

/**
 * Live, resumable reads of run event logs: `follow(org, run, after)` yields every envelope with
 * sequence > `after`, in order, without gaps or duplicates, then live ones as they commit — from
 * any API instance, since Postgres is the truth and Redis only carries wake-ups.
 *
 * Delivery: a wake-up (RunNotifier) that carries the committed envelopes and continues the tail
 * exactly is delivered as is, with no read; any other (a gap: lost or reordered wake-ups; no
 * envelopes: too big, a parent's link update, an older publisher; another organization's) triggers
 * one read of the log after the tail per run per process. Duplicates and wake-ups older than the
 * tail change nothing. Lost wake-ups are covered by a poll of every followed run each
 * STREAM_POLL_INTERVAL_MS (spread over the interval, POLL_SLICES). The log stays the only truth: a sequence is delivered once, in order,
 * whichever way it arrived. Backpressure: the
 * generator only advances when its consumer pulls, so a slow reader holds no queue — it falls
 * behind the shared ring and then pages from Postgres itself.
 */
@Injectable()
export class RunStreamHub implements OnModuleDestroy {
  private readonly tails = new Map<string, RunTail>();
  private readonly poll: NodeJS.Timeout;
  private readonly ringSize: number;

  constructor(
    private readonly log: EventLogRepository,
    private readonly notifier: RunNotifier,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.ringSize = config.STREAM_RING_SIZE;
    let tick = 0;
    this.poll = setInterval(() => {
      const slot = tick++ % POLL_SLICES;
      for (const t of this.tails.values()) if (t.pollSlot === slot) void t.refresh().catch(() => undefined);
    }, Math.max(1, Math.floor(config.STREAM_POLL_INTERVAL_MS / POLL_SLICES)));
    this.poll.unref();
  }

  /** Slots handed to new tails in turn, so each tick of the poll reads about as many. */
  private nextSlot = 0;

  /** Runs followed by this process and their subscriber counts (for metrics and tests). */
  stats(): { runs: number; subscribers: number } {
    let subscribers = 0;
    for (const t of this.tails.values()) subscribers += t.subscribers;
    return { runs: this.tails.size, subscribers };
  }

  /** Force a re-read of every followed run (what the poll does; tests use it). */
  async pollNow(): Promise<void> {
    await Promise.all([...this.tails.values()].map((t) => t.refresh()));
  }

  /**
   * Envelopes of one run after `afterSequence`, live, until `signal` aborts or the consumer
   * stops iterating. The caller checks the run exists in `orgId` first: an unknown run simply
   * yields nothing.
   */
  async *follow(orgId: string, runId: string, afterSequence: number, signal: AbortSignal): AsyncGenerator<SequencedOutputEnvelope> {
    const tail = await this.acquire(orgId, runId, afterSequence);
    let cursor = afterSequence;
    // one abort listener per follower (not one per wait): it releases the pending wait
    let wakeSelf: (() => void) | null = null;
    const onAbort = () => wakeSelf?.();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      while (!signal.aborted) {
        if (cursor >= tail.lastSequence) {
          await new Promise<void>((resolve) => {
            wakeSelf = resolve;
            tail.onChange(resolve);
          });
          wakeSelf = null;
          continue;
        }
        const first = tail.ring[0]?.sequence;
        if (first !== undefined && cursor + 1 >= first) {
          const env = tail.ring[cursor + 1 - first]!;
          cursor = env.sequence;
          yield env;
        } else {
          const page = await this.log.readAfter(orgId, runId, cursor, PAGE);
          for (const env of page) {
            if (signal.aborted) return;
            cursor = env.sequence;
            yield env;
          }
        }
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.release(tail);
    }
  }

  private async acquire(orgId: string, runId: string, afterSequence: number): Promise<RunTail> {
    const key = `${orgId}/${runId}`;
    let tail = this.tails.get(key);
    if (!tail) {
      const t = new RunTail(orgId, runId, this.log, this.ringSize);
      t.pollSlot = this.nextSlot++ % POLL_SLICES;
      // the shared tail starts where its first follower starts; older cursors page from Postgres
      t.lastSequence = afterSequence;
      this.tails.set(key, t);
      t.ready = (async () => {
        // listen first, then read: a commit between the two is seen by the read or woken after it
        t.unlisten = await this.notifier.listen(runId, (seq, _state, committed) => {
          if (seq <= t.lastSequence) return;
          if (committed && t.offer(committed)) return;
          void t.refresh().catch(() => undefined);
        }, { envelopes: true });
        await t.refresh();
      })();
      tail = t;
    }
    tail.subscribers += 1;
    try {
      await tail.ready;
    } catch (e) {
      this.release(tail);
      throw e;
    }
    return tail;
  }

  private release(tail: RunTail): void {
    tail.subscribers -= 1;
    if (tail.subscribers > 0) return;
    this.tails.delete(`${tail.orgId}/${tail.runId}`);
    tail.unlisten?.();
  }

  onModuleDestroy(): void {
    clearInterval(this.poll);
  }
}
