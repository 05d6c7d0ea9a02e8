import { hostname } from 'node:os';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TtlLruCache, endOfTurn } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { SequencedOutputEnvelope } from '#libs/contracts';
import { Metrics } from '#libs/metrics';
import { OutboundSender, PushConfigRepository, PushConfigService, type ClaimedPushConfig, type PushAttemptRow, type PushConfigRow, type PushOutcome, type PushTarget, WebhookSigner, webhookHeaders } from '#libs/push';
import { RunNotifier, foldState, isTerminal } from '#libs/runs';
import { projectEnvelope, type ProjectionState } from '../stream-projection.js';

/** Log entries read per config and claim. */
const PAGE = 100;
/** Configs picked up per sweep. */
const SWEEP_LIMIT = 500;
/** Configs claimed (leases taken and logs read) per statement. */
const CLAIM_BATCH = 256;
/** Claim statements in flight at once; configs woken meanwhile wait for the next one. */
const CLAIMS_IN_FLIGHT = 4;
/** Claims recorded per statement. */
const RECORD_BATCH = 512;
/** Record statements in flight at once; outcomes arriving meanwhile go in the next one. */
const RECORDS_IN_FLIGHT = 4;

/** A delivery attempt as recorded. */
type Attempt = PushAttemptRow;

/** What a config's claim came to, waiting to be recorded. */
interface PendingRecord {
  outcome: PushOutcome;
  attempts: Attempt[];
  /** `at`: when the statement was sent (performance.now()), i.e. no later than the lease renewal. */
  resolve: (r: { status: string | null; at: number }) => void;
}

/** What this process knows of a config between passes (see PushDeliveryService.known). */
interface Known {
  runId: string;
  cursor: number;
  /** Consecutive failed attempts as recorded (the backoff's exponent). */
  failures: number;
  state: ProjectionState;
  leaseAt: number;
}

/** The entries a wake-up carries (the committed envelopes of one run, contiguous, ending at its sequence). */
interface CarriedEntries {
  orgId?: string;
  envelopes: readonly SequencedOutputEnvelope[];
}

/**
 * The body of one push delivery: the A2A stream event of one log entry in the config's version
 * (v1.0 `StreamResponse`, v0.3 `status-update` / `artifact-update`), with the entry's sequence in
 * the event's `metadata.sequence` so a receiver can detect a gap. Null when the entry has no A2A
 * projection (`run.created`, the caller's own messages, ...).
 */
export function pushPayload(env: SequencedOutputEnvelope, before: ProjectionState, version: '1.0' | '0.3'): { body: Record<string, unknown> | null; state: ProjectionState } {
  const { result, state } = projectEnvelope(env, before, version);
  if (!result) return { body: null, state };
  const withSeq = (o: Record<string, unknown>) => ({ ...o, metadata: { ...(o.metadata as object | undefined), sequence: env.sequence } });
  const r = result as Record<string, unknown>;
  if (version === '1.0') {
    const [key] = Object.keys(r);
    return { body: { [key!]: withSeq(r[key!] as Record<string, unknown>) }, state };
  }
  return { body: withSeq(r), state };
}

/**
 * Delivers push notifications: for every active config, the events of its run after its cursor,
 * in log order, each POSTed with the config's headers and signed (Standard Webhooks), over
 * keep-alive connections (OutboundSender: a pool per origin). At-least-once: a delivery whose
 * 2xx was not recorded is sent again with the same `webhook-id`, so receivers dedupe by it.
 *
 * Batched end to end, one config at a time within a batch's order:
 * - claim: the configs woken since the last claim are claimed together — one statement takes
 *   their leases (one delivery per config across all workers) and reads each one's log after its
 *   cursor (and, unless this process still knows it, the state the projection starts from);
 * - send: each claimed config POSTs its entries in order, one at a time (configs in parallel, at
 *   most PUSH_CONCURRENCY in flight in the process), stopping at its first failure, and stops
 *   starting new attempts once its lease could run out before the outcome is recorded;
 * - extend: a wake-up during a pass that is still sending, carrying the entries right after the
 *   pass's, adds them to the pass (sent before its record), instead of a record and another pass;
 * - record: outcomes are group-committed — one statement records the attempts, cursors, failure
 *   state and `done` of every config that finished meanwhile, and frees their leases.
 * A crash before the record re-sends that claim's deliveries (same `webhook-id`s).
 *
 * Configs are woken by their run's wake-ups (one whose sequence this process has already read or
 * delivered costs nothing), by a new config's signal, and by a sweep every PUSH_SWEEP_INTERVAL_MS
 * of configs that are behind or due for a retry — so lost signals, a Redis restart or a dead
 * worker (its leases expire) delay deliveries but lose none. Failures back off exponentially with
 * jitter (honouring `Retry-After`), 410 stops the config, and a config failing longer than
 * PUSH_RETRY_BUDGET_MS is marked failing with its last error.
 */
@Injectable()
export class PushDeliveryService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(PushDeliveryService.name);
  private readonly owner = `${hostname()}:${process.pid}`;
  private readonly sender: OutboundSender;
  /** Active configs this process follows, by run. */
  private readonly byRun = new Map<string, { configs: Set<string>; unlisten?: () => void }>();
  /** Configs claimed, sending or being recorded (one pass at a time per config). */
  private readonly inFlight = new Set<string>();
  /** In-flight configs woken by an entry their claim did not read: another pass follows. */
  private readonly dirty = new Set<string>();
  /** Configs waiting for the next claim, in wake-up order. */
  private readonly queued = new Set<string>();
  /** Per in-flight config, the newest sequence its claim read. */
  private readonly seen = new Map<string, number>();
  /**
   * Per config, the cursor this process last recorded, the projection state at it, and — when the
   * record kept the lease — when that lease was renewed (performance.now(), taken before the
   * statement, so never later than the database's); 0 when the lease was freed.
   */
  private readonly known = new Map<string, Known>();
  /**
   * Per config woken since its last pass: the entries its wake-ups carried (ascending, at most
   * PAGE) and the newest sequence they announced (carried or not), for its next pass.
   */
  private readonly buffered = new Map<string, { list: SequencedOutputEnvelope[]; upTo: number }>();
  /**
   * Per config in a pass that is still sending: its entries (the pass sends them in order, and
   * sends what is appended here before it records) and the cursor it started from.
   */
  private readonly sending = new Map<string, { runId: string; cursor: number; list: SequencedOutputEnvelope[] }>();
  private claims = 0;
  private records = 0;
  /**
   * Claims (`pump`) and records (`flushRecords`) start at the end of the turn that asked for them,
   * once per turn: the configs one wake-up message wakes share a claim, and the outcomes of one
   * turn a record, instead of the first going out alone.
   */
  private readonly pumpSoon = endOfTurn(() => this.pump());
  private readonly flushRecordsSoon = endOfTurn(() => this.flushRecords());
  private pending: PendingRecord[] = [];
  private timer?: NodeJS.Timeout;
  private stopPushSignal?: () => void;
  private stopped = false;
  private readonly leaseMs: number;
  /** A claim starts no attempt later than this (ms after the claim): the lease outlasts its record. */
  private readonly sendWindowMs: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: PushConfigRepository,
    private readonly configs: PushConfigService,
    private readonly notifier: RunNotifier,
    private readonly metrics: Metrics,
  ) {
    this.sender = new OutboundSender(configs.policy);
    // outlasts one attempt started at the end of the send window, and its record: a dead
    // worker's configs are picked up after it
    this.leaseMs = Math.round(config.PUSH_TIMEOUT_MS * 1.5) + 1_000;
    this.sendWindowMs = this.leaseMs - config.PUSH_TIMEOUT_MS - 1_000;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.configs.enabled) return;
    // a config of the run was set or deleted: kept leases of its configs are not trusted any more
    // (a deleted config must not get a pass from carried entries), then the active ones are followed
    this.stopPushSignal = await this.notifier.onPushConfigured((runId) => {
      for (const id of this.byRun.get(runId)?.configs ?? []) {
        const k = this.known.get(id);
        if (k) k.leaseAt = 0;
      }
      void this.followRuns([runId]).catch(() => undefined);
    });
    this.timer = setInterval(() => void this.sweep(), this.config.PUSH_SWEEP_INTERVAL_MS);
    this.timer.unref();
    void this.sweep();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.stopPushSignal?.();
    for (const f of this.byRun.values()) f.unlisten?.();
    this.byRun.clear();
    this.sender.close();
    // leases kept between passes are freed, so another worker takes over at once (else they expire)
    const held = [...this.known].filter(([id, k]) => k.leaseAt > 0 && !this.inFlight.has(id)).map(([id]) => id);
    await this.repo.releaseMany(held, this.owner).catch(() => undefined);
  }

  /** Configs claimed, sending or being recorded in this process. */
  get active(): number {
    return this.inFlight.size;
  }

  /** One sweep: configs that are behind or due; follow their runs and claim them. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    try {
      const due = await this.repo.due(SWEEP_LIMIT, this.owner);
      this.track(due);
      for (const c of due) this.kick(c.id);
    } catch (e) {
      this.log.warn(`push sweep failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** Start following the active configs of these runs (a new config's signal). */
  private async followRuns(runIds: string[]): Promise<void> {
    const found = await this.repo.activeForRuns(runIds);
    this.track(found);
    for (const c of found) this.kick(c.id);
  }

  private track(configs: Array<{ id: string; runId: string }>): void {
    for (const { id, runId } of configs) {
      let f = this.byRun.get(runId);
      if (!f) {
        const follow: { configs: Set<string>; unlisten?: () => void } = { configs: new Set() };
        this.byRun.set(runId, follow);
        f = follow;
        void this.notifier
          .listen(runId, (lastSequence, _state, committed) => {
            for (const c of follow.configs) this.wake(c, lastSequence, committed);
          }, { envelopes: true })
          .then((unlisten) => {
            if (this.byRun.get(runId) === follow) follow.unlisten = unlisten;
            else unlisten();
          });
      }
      f.configs.add(id);
    }
  }

  private untrack(id: string, runId: string): void {
    this.known.delete(id);
    this.buffered.delete(id);
    this.targets.delete(id);
    const f = this.byRun.get(runId);
    if (!f) return;
    f.configs.delete(id);
    if (f.configs.size === 0) {
      f.unlisten?.();
      this.byRun.delete(runId);
    }
  }

  /**
   * A wake-up of the config's run says its log reaches `sequence`, and may carry the entries that
   * commit wrote. Nothing to do when this process has read (in flight) or delivered (recorded)
   * that far already. Else, when this process still holds the config's lease and the carried
   * entries continue its cursor exactly, they are delivered without reading the log; otherwise
   * the config is claimed (its log read).
   */
  private wake(id: string, sequence: number, committed?: CarriedEntries): void {
    if (this.stopped) return;
    if (this.inFlight.has(id)) {
      if ((this.seen.get(id) ?? -1) >= sequence) return;
      if (committed && this.extend(id, sequence, committed.envelopes)) return;
      this.dirty.add(id);
      this.buffer(id, sequence, committed?.envelopes);
      return;
    }
    const k = this.known.get(id);
    if (k && k.cursor >= sequence) return;
    this.buffer(id, sequence, committed?.envelopes);
    this.resume(id);
  }

  /**
   * A wake-up during a pass that is still sending: when the carried entries continue the pass's
   * entries exactly and reach `sequence` (all it announced), the pass sends them too, before its
   * record — instead of a record, then another pass for them (the lag of a run's later events
   * was a chain of records). False when they do not (the config gets another pass after this one).
   */
  private extend(id: string, sequence: number, envelopes: readonly SequencedOutputEnvelope[]): boolean {
    const pass = this.sending.get(id);
    if (!pass) return false;
    let next = (pass.list.at(-1)?.sequence ?? pass.cursor) + 1;
    const more: SequencedOutputEnvelope[] = [];
    for (const e of envelopes) {
      if (e.sequence < next) continue;
      if (e.sequence !== next || e.runId !== pass.runId) return false;
      more.push(e);
      next++;
    }
    if (next - 1 !== sequence || more.length === 0 || pass.list.length + more.length > PAGE) return false;
    pass.list.push(...more);
    this.seen.set(id, sequence);
    return true;
  }

  /** Note what a wake-up announced (and carried) for the config's next pass. */
  private buffer(id: string, sequence: number, envelopes: readonly SequencedOutputEnvelope[] = []): void {
    const b = this.buffered.get(id) ?? { list: [], upTo: 0 };
    b.upTo = Math.max(b.upTo, sequence);
    for (const e of envelopes) {
      const i = b.list.findIndex((x) => x.sequence >= e.sequence);
      if (i < 0) b.list.push(e);
      else if (b.list[i]!.sequence !== e.sequence) b.list.splice(i, 0, e);
    }
    // beyond a page the pass reads the log anyway
    if (b.list.length > PAGE) b.list = [];
    this.buffered.set(id, b);
  }

  /**
   * Another pass for an idle config: from the buffered entries when they continue its recorded
   * cursor exactly and its kept lease leaves time to send them; else with the next claim.
   */
  private resume(id: string): void {
    // already waiting for a claim, which reads the log
    if (this.queued.has(id)) return;
    const k = this.known.get(id);
    const b = this.buffered.get(id);
    this.buffered.delete(id);
    const target = this.targets.get(id)?.target;
    if (k && b && target && k.leaseAt > 0 && performance.now() - k.leaseAt < this.sendWindowMs && this.inFlight.size < this.config.PUSH_CONCURRENCY) {
      // the entries that continue the cursor without a gap; whatever was announced beyond them is
      // left to a claim after this pass
      const events: SequencedOutputEnvelope[] = [];
      for (const e of b.list) {
        if (e.sequence <= k.cursor) continue;
        if (e.sequence !== k.cursor + events.length + 1 || e.runId !== k.runId) break;
        events.push(e);
      }
      const last = events.at(-1);
      if (last) {
        this.inFlight.add(id);
        this.seen.set(id, last.sequence);
        if (last.sequence < b.upTo) this.dirty.add(id);
        void this.pass({ id, runId: k.runId, target, cursor: k.cursor, state: k.state, failuresSoFar: k.failures, events, startedAt: k.leaseAt, complete: last.sequence >= b.upTo }).catch((e: unknown) => this.passFailed(id, e));
        return;
      }
    }
    this.kick(id);
  }

  /** Claim the config with the next batch, or once more after its current pass. */
  private kick(id: string): void {
    if (this.stopped) return;
    if (this.inFlight.has(id)) this.dirty.add(id);
    else this.queued.add(id);
    this.pumpSoon();
  }

  /** Start claims while configs wait, claim slots are free and fewer than PUSH_CONCURRENCY are in flight. */
  private pump(): void {
    while (!this.stopped && this.queued.size > 0 && this.claims < CLAIMS_IN_FLIGHT && this.inFlight.size < this.config.PUSH_CONCURRENCY) {
      const n = Math.min(CLAIM_BATCH, this.config.PUSH_CONCURRENCY - this.inFlight.size);
      const ids: string[] = [];
      for (const id of this.queued) {
        ids.push(id);
        if (ids.length >= n) break;
      }
      for (const id of ids) this.queued.delete(id);
      // a config in a pass already gets another one after it
      for (const id of ids.filter((x) => this.inFlight.has(x))) this.dirty.add(id);
      ids.splice(0, ids.length, ...ids.filter((x) => !this.inFlight.has(x)));
      if (ids.length === 0) continue;
      for (const id of ids) this.inFlight.add(id);
      this.claims++;
      void this.claim(ids).finally(() => {
        this.claims--;
        this.pump();
      });
    }
  }

  /** One claim statement for `ids`; each claimed config then sends and records on its own. */
  private async claim(ids: string[]): Promise<void> {
    const claimedAt = performance.now();
    const known = new Map<string, number>();
    for (const id of ids) {
      const k = this.known.get(id);
      if (k) known.set(id, k.cursor);
    }
    let claimed: ClaimedPushConfig[] = [];
    try {
      claimed = await this.repo.claimBatch(ids, this.owner, this.leaseMs, PAGE, known);
    } catch (e) {
      this.log.warn(`push claim of ${ids.length} config(s) failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    const got = new Set(claimed.map((c) => c.row.id));
    // leased elsewhere, not due, no longer active or deleted (or the claim failed): the sweep or
    // the next wake-up tries again
    for (const id of ids) if (!got.has(id)) this.settle(id);
    for (const c of claimed) {
      const id = c.row.id;
      const last = c.events.at(-1);
      this.seen.set(id, last ? last.sequence : c.row.cursor);
      const state = c.stateEvent !== undefined ? foldState(c.stateEvent ?? undefined) : (this.known.get(id)?.state ?? foldState(undefined));
      // a short page is the end of the log for now
      const complete = c.events.length < PAGE;
      let target: PushTarget;
      try {
        target = this.target(c.row);
      } catch (e) {
        // its credentials cannot be read here (e.g. PUSH_ENCRYPTION_SECRET differs from the one
        // that sealed them): a failed attempt like any other — retried with backoff, given up past
        // PUSH_RETRY_BUDGET_MS — never a crash of the delivery loop
        void this.unreadable(c, e).catch((err: unknown) => this.passFailed(id, err));
        continue;
      }
      void this.pass({ id, runId: c.row.runId, target, cursor: c.row.cursor, state, failuresSoFar: c.row.attempts, events: c.events, startedAt: claimedAt, complete }).catch((e: unknown) => this.passFailed(id, e));
    }
  }

  /** Record a failed attempt for a claimed config whose target could not be built (see claim). */
  private async unreadable(c: ClaimedPushConfig, e: unknown): Promise<void> {
    const id = c.row.id;
    const error = `the push config cannot be read: ${e instanceof Error ? e.message : String(e)}`;
    const { status } = await this.record({ id, cursor: c.row.cursor, progressed: false, done: false, failure: { error, delayMs: this.backoff(c.row.attempts + 1), gone: false } }, []);
    this.known.delete(id);
    if (status !== null && status !== 'active') {
      this.log.warn(`push config ${id} of task ${c.row.runId} is ${status}: ${error}`);
      this.untrack(id, c.row.runId);
    } else this.log.warn(`push config ${id} of task ${c.row.runId}: ${error} (will retry)`);
    this.settle(id);
  }

  private passFailed(id: string, e: unknown): void {
    this.log.warn(`push config ${id}: ${e instanceof Error ? e.message : String(e)}`);
    this.known.delete(id);
    this.settle(id);
  }

  /** The config's pass is over: another one follows if it was woken meanwhile. */
  private settle(id: string): void {
    this.inFlight.delete(id);
    this.seen.delete(id);
    if (this.dirty.delete(id)) this.resume(id);
    else this.buffered.delete(id);
    this.pump();
  }

  /**
   * One pass of a config under its lease: send `events` (the log after `cursor`) in order, then
   * record the outcome (group commit), keeping the lease for the next pass. The cursor moves over
   * the 2xx answers and over entries without an A2A projection; the first failure ends the pass
   * (the attempts before it are recorded with it); no attempt starts once the lease, renewed at
   * `startedAt`, could run out before the record. A config whose run ended and whose log is
   * fully delivered (`complete`: nothing after `events` yet) is marked done: nothing follows a
   * terminal status.
   */
  private async pass(p: { id: string; runId: string; target: PushTarget; cursor: number; state: ProjectionState; failuresSoFar: number; events: readonly SequencedOutputEnvelope[]; startedAt: number; complete: boolean }): Promise<void> {
    const { id, target } = p;
    let { state, cursor } = p;
    const attempts: Attempt[] = [];
    let failure: PushOutcome['failure'];
    let cut = false;
    // entries carried by wake-ups while it sends are appended to `list` (see extend)
    const list = [...p.events];
    this.sending.set(id, { runId: p.runId, cursor: p.cursor, list });
    try {
      for (let i = 0; i < list.length; i++) {
        const env = list[i]!;
        if (this.stopped || performance.now() - p.startedAt > this.sendWindowMs) {
          cut = true;
          break;
        }
        const { body, state: after } = pushPayload(env, state, target.protocolVersion);
        if (body) {
          const { attempt, ok, retryAfterMs } = await this.post(target, env, body);
          attempts.push(attempt);
          if (!ok) {
            const failuresSoFar = cursor > p.cursor ? 0 : p.failuresSoFar;
            failure = { error: attempt.error ?? `HTTP ${attempt.statusCode}`, delayMs: this.backoff(failuresSoFar + 1, retryAfterMs), gone: attempt.statusCode === 410 };
            break;
          }
        }
        state = after;
        cursor = env.sequence;
      }
    } finally {
      this.sending.delete(id);
    }
    const more = !failure && (cut || !p.complete);
    const done = !failure && !more && isTerminal(state.status);
    const { status, at } = await this.record({ id, cursor, progressed: cursor > p.cursor, done, keep: !this.stopped, ...(failure && { failure }) }, attempts);
    if (status === 'active') this.known.set(id, { runId: p.runId, cursor, state, failures: failure ? p.failuresSoFar + 1 : cursor > p.cursor ? 0 : p.failuresSoFar, leaseAt: !failure && !this.stopped ? at : 0 });
    else this.known.delete(id);
    if (status !== null && status !== 'active') {
      if (status !== 'done') this.log.warn(`push config ${target.configId} of task ${target.runId} is ${status}: ${failure?.error ?? ''}`);
      this.untrack(id, p.runId);
    }
    if (more && status === 'active') this.dirty.add(id);
    this.settle(id);
  }

  /** Queue an outcome for the next record statement; resolves to the config's status after it (null: not recorded). */
  private record(outcome: PushOutcome, attempts: Attempt[]): Promise<{ status: string | null; at: number }> {
    return new Promise((resolve) => {
      this.pending.push({ outcome, attempts, resolve });
      this.flushRecordsSoon();
    });
  }

  private flushRecords(): void {
    while (this.pending.length > 0 && this.records < RECORDS_IN_FLIGHT) {
      const batch = this.pending.splice(0, RECORD_BATCH);
      this.records++;
      const at = performance.now();
      this.repo
        .recordBatch(this.owner, batch.map((b) => b.outcome), batch.flatMap((b) => b.attempts), this.config.PUSH_RETRY_BUDGET_MS, this.leaseMs)
        .then(
          (rows) => {
            const status = new Map(rows.map((r) => [r.id, r.status]));
            for (const b of batch) b.resolve({ status: status.get(b.outcome.id) ?? null, at });
          },
          (e: unknown) => {
            // not recorded: the leases expire (or this owner claims again) and the deliveries are re-sent
            this.log.warn(`recording ${batch.length} push outcome(s) failed: ${e instanceof Error ? e.message : String(e)}`);
            for (const b of batch) b.resolve({ status: null, at });
          },
        )
        .finally(() => {
          this.records--;
          this.flushRecords();
        });
    }
  }

  /** Decrypted targets by config row id, reused while the stored row's settings are unchanged. */
  private readonly targets = new TtlLruCache<string, { key: string; target: PushTarget }>(10_000, 0);
  private target(row: PushConfigRow): PushTarget {
    const key = `${row.protocolVersion}|${row.url}|${row.token}|${row.authScheme}|${row.authCredentials}|${row.webhookSecret}`;
    const hit = this.targets.get(row.id);
    if (hit && hit.key === key) return hit.target;
    const target = this.configs.target(row);
    this.targets.set(row.id, { key, target });
    return target;
  }

  /** One delivery attempt (not recorded yet); `ok` for a 2xx. */
  private async post(target: PushTarget, env: SequencedOutputEnvelope, body: Record<string, unknown>): Promise<{ attempt: Attempt; ok: boolean; retryAfterMs?: number }> {
    const payload = JSON.stringify(body);
    const webhookId = `msg_${target.id}_${env.sequence}`;
    const headers: Record<string, string> = {
      ...webhookHeaders(this.signer(target.webhookSecret), webhookId, payload),
      'x-a2a-sequence': String(env.sequence),
      'x-a2a-task-id': env.runId,
    };
    if (target.token !== null) headers['x-a2a-notification-token'] = target.token;
    if (target.authorization !== null) headers.authorization = target.authorization;
    const result = await this.sender.post({ url: target.url, body: payload, headers, timeoutMs: this.config.PUSH_TIMEOUT_MS });
    const ok = result.status !== null && result.status >= 200 && result.status < 300;
    const attempt: Attempt = { configRowId: target.id, orgId: target.orgId, runId: target.runId, sequence: env.sequence, webhookId, statusCode: result.status, error: result.error ?? null, latencyMs: result.latencyMs };
    this.metrics.pushDeliveries.inc({ outcome: ok ? 'delivered' : result.status === null ? 'error' : String(result.status) });
    if (ok) this.metrics.pushLag.observe(Math.max(0, Date.now() - Date.parse(env.occurredAt)) / 1000);
    return { attempt, ok, ...(result.retryAfterMs !== undefined && { retryAfterMs: result.retryAfterMs }) };
  }

  /** Standard Webhooks signers by secret (a secret's key is decoded once). */
  private readonly signers = new TtlLruCache<string, WebhookSigner>(10_000, 0);
  private signer(secret: string): WebhookSigner {
    let w = this.signers.get(secret);
    if (!w) {
      w = new WebhookSigner(secret);
      this.signers.set(secret, w);
    }
    return w;
  }

  /**
   * Delay before the next attempt after the `n`-th consecutive failure (ms): exponential from
   * PUSH_RETRY_BASE_MS with equal jitter, capped by PUSH_RETRY_MAX_DELAY_MS; a later Retry-After wins.
   */
  private backoff(n: number, retryAfterMs?: number): number {
    const cap = this.config.PUSH_RETRY_MAX_DELAY_MS;
    const exp = Math.min(cap, this.config.PUSH_RETRY_BASE_MS * 2 ** Math.min(30, n - 1));
    const delay = exp / 2 + Math.random() * (exp / 2);
    return Math.round(retryAfterMs !== undefined ? Math.min(cap, Math.max(delay, retryAfterMs)) : delay);
  }
}
