import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { endOfTurn } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { BlockedReasonSchema, RunStatusSchema, type BlockedReason, type RunEvent, type RunStatus, type SequencedOutputEnvelope } from '#libs/contracts';

/** The run state a wake-up may carry (the state after the commit it announces). */
export interface WakeupState {
  status: RunStatus;
  blockedReason: BlockedReason | null;
}

/**
 * The envelopes a commit wrote, as a wake-up carries them: contiguous by sequence, the last one
 * at the wake-up's `lastSequence`, all of one run of `orgId`. Shared by every listener of the
 * process: read-only.
 */
export interface CommittedEnvelopes {
  orgId: string;
  envelopes: readonly SequencedOutputEnvelope[];
}

/**
 * `state` is absent when the publisher did not send it (readers then read the run); `committed`
 * is absent when the wake-up carries no envelopes (a parent's `run.link_updated`, a commit above
 * WAKEUP_PAYLOAD_MAX_BYTES, an older publisher, a payload that did not parse): readers then read
 * the log after the sequence they have.
 */
export type WakeupListener = (lastSequence: number, state?: WakeupState, committed?: CommittedEnvelopes) => void;

/**
 * Largest serialized envelope payload a wake-up carries (bytes of its JSON, UTF-8); a commit (or a
 * tick's coalesced commits of one run) above it is announced by its sequence (and state) only.
 */
export const WAKEUP_PAYLOAD_MAX_BYTES = 16 * 1024;

/** Longest a listener waits for the subscription to be confirmed (ms); polling covers the rest. */
const SUBSCRIBE_WAIT_MS = 1_000;

/** The channel suffix of batched wake-ups (`<REDIS_PREFIX>:run:+`; no run id contains `+`). */
export const BATCH_CHANNEL = '+';

/** Largest batched wake-up message (UTF-16 length, ~bytes): past it, the turn's wake-ups go out in several. */
const WAKEUP_BATCH_MAX_BYTES = 256 * 1024;

interface PendingWakeup {
  seq: number;
  state?: WakeupState;
  /** Contiguous, ending at `seq`; null once a tick's commits of the run could not be joined. */
  committed: CommittedEnvelopes | null;
}

/** `<seq>[|<status>|<blocked>[|<payload JSON>]]`; the payload is dropped above the size bound. */
function encode(w: PendingWakeup): string {
  const head = w.state ? `${w.seq}|${w.state.status}|${w.state.blockedReason ?? ''}` : String(w.seq);
  const payload = w.committed ? encodePayload(w.committed) : null;
  if (payload === null) return head;
  return w.state ? `${head}|${payload}` : `${head}|||${payload}`;
}

/**
 * `{"orgId","threadId","events":[{"sequence","occurredAt","event"}]}` (the run id is the
 * channel's), or null when it would exceed WAKEUP_PAYLOAD_MAX_BYTES. Serialized event by event,
 * so an oversized commit costs at most one event's serialization past the bound.
 */
function encodePayload(c: CommittedEnvelopes): string | null {
  const first = c.envelopes[0];
  if (!first) return null;
  let out = `{"orgId":${JSON.stringify(c.orgId)},"threadId":${JSON.stringify(first.threadId)},"events":[`;
  for (let i = 0; i < c.envelopes.length; i++) {
    const e = c.envelopes[i]!;
    out += (i ? ',' : '') + JSON.stringify({ sequence: e.sequence, occurredAt: e.occurredAt, event: e.event });
    // UTF-16 length <= UTF-8 bytes <= 3 × UTF-16 length: count bytes only when it may matter
    if (out.length * 3 > WAKEUP_PAYLOAD_MAX_BYTES && Buffer.byteLength(out) > WAKEUP_PAYLOAD_MAX_BYTES) return null;
  }
  return `${out}]}`;
}

/** Contiguous by sequence and ending at `lastSequence`. */
function continuous(envelopes: readonly SequencedOutputEnvelope[], lastSequence: number): boolean {
  if (envelopes.length === 0 || envelopes[envelopes.length - 1]!.sequence !== lastSequence) return false;
  for (let i = 1; i < envelopes.length; i++) if (envelopes[i]!.sequence !== envelopes[i - 1]!.sequence + 1) return false;
  return true;
}

/**
 * Decode a wake-up of run `runId` (its envelopes only when `envelopes`). A payload that does not
 * parse or check out is dropped (readers read).
 */
export function decodeWakeup(runId: string, message: string, envelopes = true): { seq: number; state?: WakeupState; committed?: CommittedEnvelopes } {
  const a = message.indexOf('|');
  const b = a < 0 ? -1 : message.indexOf('|', a + 1);
  const c = b < 0 ? -1 : message.indexOf('|', b + 1);
  const out: { seq: number; state?: WakeupState; committed?: CommittedEnvelopes } = { seq: Number(a < 0 ? message : message.slice(0, a)) };
  if (a >= 0) {
    const st = RunStatusSchema.safeParse(message.slice(a + 1, b < 0 ? undefined : b));
    if (st.success) {
      const br = BlockedReasonSchema.safeParse(b < 0 ? '' : message.slice(b + 1, c < 0 ? undefined : c));
      out.state = { status: st.data, blockedReason: br.success ? br.data : null };
    }
  }
  if (envelopes && c >= 0 && Number.isSafeInteger(out.seq)) {
    const committed = decodePayload(runId, message.slice(c + 1));
    if (committed && continuous(committed.envelopes, out.seq)) out.committed = committed;
  }
  return out;
}

function decodePayload(runId: string, json: string): CommittedEnvelopes | null {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const { orgId, threadId, events } = raw as { orgId?: unknown; threadId?: unknown; events?: unknown };
  if (typeof orgId !== 'string' || typeof threadId !== 'string' || !Array.isArray(events)) return null;
  const envelopes: SequencedOutputEnvelope[] = [];
  for (const e of events as Array<{ sequence?: unknown; occurredAt?: unknown; event?: { type?: unknown } }>) {
    if (typeof e !== 'object' || e === null || !Number.isSafeInteger(e.sequence) || typeof e.occurredAt !== 'string') return null;
    if (typeof e.event !== 'object' || e.event === null || typeof e.event.type !== 'string') return null;
    envelopes.push({ runId, threadId, sequence: e.sequence as number, occurredAt: e.occurredAt, event: e.event as RunEvent });
  }
  return { orgId, envelopes };
}

/**
 * Wake-up signals after commit: "run R has events up to sequence N (and is now in state S), and
 * these are the envelopes that commit wrote". Postgres stays the truth: a follower delivers the
 * carried envelopes only when they continue exactly what it has (their sequences are the log's, the
 * commit returned them), and reads `sequence > last seen` from the log on a gap, when none are
 * carried, or on its poll; a blocking wait may end on the carried state. Signals may be lost,
 * duplicated or reordered (Redis restart, dropped connection, two writers of one run racing to
 * publish): every reader also polls and ignores what it has already, so a bad signal delays an
 * event but never loses, repeats or invents one.
 *
 * Channel `<REDIS_PREFIX>:run:+`: the wake-ups of one event-loop turn of a process, one PUBLISH
 * (one Redis command per turn, not per run), one line per run `<runId> <wake-up>`, at most
 * WAKEUP_BATCH_MAX_BYTES per message; a single run's wake-up on `<REDIS_PREFIX>:run:<runId>` is
 * understood too. A wake-up is `<lastSequence>[|<status>|<blockedReason>[|<payload>]]`,
 * the payload `{"orgId","threadId","events":[{"sequence","occurredAt","event"}]}` at most
 * WAKEUP_PAYLOAD_MAX_BYTES (a state-less wake-up with a payload: `<lastSequence>|||<payload>`).
 * One publisher and one subscriber connection per process. The subscriber holds ONE pattern
 * subscription (`<REDIS_PREFIX>:run:*`) for every run, so following a run costs no Redis round
 * trip (a blocking SendMessage or a stream starts without SUBSCRIBE / UNSUBSCRIBE); each process
 * receives every wake-up of the deployment: a few dozen bytes, plus the committed envelopes up to
 * WAKEUP_PAYLOAD_MAX_BYTES.
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
  /** Listeners that asked for the carried envelopes (the others are not worth parsing them for). */
  private readonly wantEnvelopes = new WeakSet<WakeupListener>();
  private readonly cancelListeners = new Set<(runId: string) => void>();
  private readonly cancelChannel: string;
  private readonly pushChannel: string;
  private readonly pushListeners = new Set<(runId: string) => void>();
  private pendingWakeups = new Map<string, PendingWakeup>();
  /** The wake-ups of this turn go out at its end, in one publish. */
  private readonly flushWakeupsSoon = endOfTurn(() => this.flushWakeups());

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
        const runId = channel.slice(this.prefix.length);
        if (runId !== BATCH_CHANNEL) return this.deliver(runId, message);
        // a batch: one line per run, `<runId> <wake-up>`
        for (let at = 0; at < message.length; ) {
          let end = message.indexOf('\n', at);
          if (end < 0) end = message.length;
          const space = message.indexOf(' ', at);
          if (space > at && space < end) this.deliver(message.slice(at, space), message.slice(space + 1, end));
          at = end + 1;
        }
      });
      this.sub = sub;
    }
    return this.sub;
  }

  /** Hand one run's wake-up to its listeners (if this process has any). */
  private deliver(runId: string, message: string): void {
    const set = this.listeners.get(runId);
    if (!set) return;
    let envelopes = false;
    for (const l of set) if (this.wantEnvelopes.has(l)) envelopes = true;
    const { seq, state, committed } = decodeWakeup(runId, message, envelopes);
    if (!Number.isSafeInteger(seq)) return;
    for (const l of set) l(seq, state, committed);
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
   * Announce a commit of run `runId` up to `lastSequence` (and the state after it, and the
   * envelopes it wrote: `committed.envelopes` contiguous and ending at `lastSequence`, else they
   * are not sent). Fire-and-forget: a failed publish is logged, never thrown (readers poll
   * anyway). Wake-ups of one event-loop turn go out as one pipeline (one write), one per run with
   * its newest sequence; the envelopes of that turn's commits of a run are joined when they follow
   * each other, else only the newest commit's are sent (readers fill the gap from the log).
   */
  notify(runId: string, lastSequence: number, state?: WakeupState, committed?: CommittedEnvelopes): void {
    const carried = committed && continuous(committed.envelopes, lastSequence) ? committed : null;
    const seen = this.pendingWakeups.get(runId);
    if (seen === undefined || lastSequence > seen.seq) {
      let joined = carried;
      const prev = seen?.committed;
      if (carried && prev && prev.orgId === carried.orgId && carried.envelopes[0]!.sequence === seen!.seq + 1) {
        joined = { orgId: carried.orgId, envelopes: [...prev.envelopes, ...carried.envelopes] };
      }
      this.pendingWakeups.set(runId, {
        seq: lastSequence,
        state: state ? { status: state.status, blockedReason: state.blockedReason } : undefined,
        committed: joined,
      });
    }
    this.flushWakeupsSoon();
  }

  private flushWakeups(): void {
    const batch = this.pendingWakeups;
    this.pendingWakeups = new Map();
    // one PUBLISH for the whole turn (one line per run), at most WAKEUP_BATCH_MAX_BYTES each
    const messages: string[] = [];
    let current = '';
    for (const [runId, w] of batch) {
      const line = `${runId} ${encode(w)}`;
      if (current && current.length + line.length + 1 > WAKEUP_BATCH_MAX_BYTES) {
        messages.push(current);
        current = '';
      }
      current = current ? `${current}\n${line}` : line;
    }
    if (current) messages.push(current);
    const pub = this.publisher();
    for (const m of messages) pub.publish(this.prefix + BATCH_CHANNEL, m).catch((e: Error) => this.log.warn(`publishing ${batch.size} wake-up(s) failed: ${e.message}`));
  }

  /**
   * Listen for wake-ups of one run. Resolves once the process's wake-up subscription is confirmed
   * (so a signal sent after that is not missed), or after at most 1 s when Redis does not confirm
   * it (readers poll); then adding a listener costs no round trip. The listener gets the carried
   * envelopes (`committed`) only with `opts.envelopes` (a wait that needs only the state does not
   * pay for parsing them). Returns the function that removes the listener.
   */
  async listen(runId: string, listener: WakeupListener, opts: { envelopes?: boolean } = {}): Promise<() => void> {
    if (opts.envelopes) this.wantEnvelopes.add(listener);
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
