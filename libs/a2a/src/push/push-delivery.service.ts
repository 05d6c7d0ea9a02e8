import { hostname } from 'node:os';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import { TtlLruCache } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { SequencedOutputEnvelope } from '#libs/contracts';
import { Metrics } from '#libs/metrics';
import { webhookHeaders } from '#libs/outbound';
import { OutboundSender, PushConfigRepository, PushConfigService, type PushConfigRow, type PushTarget } from '#libs/push';
import { RunNotifier, RunQueries, isTerminal } from '#libs/runs';
import { projectEnvelope, type ProjectionState } from '../stream-projection.js';

/** Events read from the log per page while delivering. */
const PAGE = 100;
/** Configs picked up per sweep. */
const SWEEP_LIMIT = 500;
/** Delivered events recorded per statement (cursor, attempts and lease renewal together). */
const ADVANCE_EVERY = 16;

/** A delivery attempt as recorded. */
interface Attempt {
  orgId: string;
  runId: string;
  sequence: number;
  webhookId: string;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
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
 * in log order, one at a time, each POSTed with the config's headers and signed (Standard
 * Webhooks); the cursor advances with the 2xx answers (recorded in small batches). At-least-once:
 * a delivery whose 2xx was not recorded is sent again with the same `webhook-id`, so receivers
 * dedupe by it.
 *
 * One loop per config across all workers: a loop holds the config's lease in Postgres (renewed
 * with every delivery). Loops start on the run's wake-ups (low latency), on a new config's
 * signal, and on a sweep every PUSH_SWEEP_INTERVAL_MS that picks up configs that are behind or
 * due for a retry — so lost signals, a Redis restart or a dead worker delay deliveries but lose
 * none. Failures back off exponentially with jitter (honouring `Retry-After`), 410 stops the
 * config, and a config failing longer than PUSH_RETRY_BUDGET_MS is marked failing with its last
 * error. At most PUSH_CONCURRENCY loops run in a process.
 */
@Injectable()
export class PushDeliveryService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(PushDeliveryService.name);
  private readonly owner = `${hostname()}:${process.pid}`;
  private readonly sender: OutboundSender;
  /** Active configs this process follows, by run. */
  private readonly byRun = new Map<string, { configs: Set<string>; unlisten?: () => void }>();
  private readonly running = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly queued: string[] = [];
  private readonly queuedSet = new Set<string>();
  private timer?: NodeJS.Timeout;
  private stopPushSignal?: () => void;
  private stopped = false;
  private readonly leaseMs: number;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: PushConfigRepository,
    private readonly configs: PushConfigService,
    private readonly queries: RunQueries,
    private readonly notifier: RunNotifier,
    private readonly metrics: Metrics,
  ) {
    this.sender = new OutboundSender(configs.policy);
    // outlasts one attempt (renewed after each delivery): a dead worker's configs are picked up after it
    this.leaseMs = Math.round(config.PUSH_TIMEOUT_MS * 1.5) + 1_000;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.configs.enabled) return;
    this.stopPushSignal = await this.notifier.onPushConfigured((runId) => void this.followRuns([runId]).catch(() => undefined));
    this.timer = setInterval(() => void this.sweep(), this.config.PUSH_SWEEP_INTERVAL_MS);
    this.timer.unref();
    void this.sweep();
  }

  onModuleDestroy(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.stopPushSignal?.();
    for (const f of this.byRun.values()) f.unlisten?.();
    this.byRun.clear();
    this.sender.close();
  }

  /** Loops in progress in this process. */
  get active(): number {
    return this.running.size;
  }

  /** One sweep: configs that are behind or due; follow their runs and start their loops. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    try {
      const due = await this.repo.due(SWEEP_LIMIT);
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
          .listen(runId, () => {
            for (const c of follow.configs) this.kick(c);
          })
          .then((unlisten) => {
            if (this.byRun.get(runId) === follow) follow.unlisten = unlisten;
            else unlisten();
          });
      }
      f.configs.add(id);
    }
  }

  private untrack(id: string, runId: string): void {
    const f = this.byRun.get(runId);
    if (!f) return;
    f.configs.delete(id);
    if (f.configs.size === 0) {
      f.unlisten?.();
      this.byRun.delete(runId);
    }
  }

  /** Run the config's loop now, or once more after the current one, or when a slot frees. */
  private kick(id: string): void {
    if (this.stopped) return;
    if (this.running.has(id)) {
      this.dirty.add(id);
      return;
    }
    if (this.running.size >= this.config.PUSH_CONCURRENCY) {
      if (!this.queuedSet.has(id)) {
        this.queuedSet.add(id);
        this.queued.push(id);
      }
      return;
    }
    this.running.add(id);
    void this.loop(id).finally(() => {
      this.running.delete(id);
      const next = this.queued.shift();
      if (next !== undefined) {
        this.queuedSet.delete(next);
        this.kick(next);
      }
    });
  }

  private async loop(id: string): Promise<void> {
    try {
      do {
        this.dirty.delete(id);
        await this.deliver(id);
      } while (this.dirty.has(id) && !this.stopped);
    } catch (e) {
      this.log.warn(`push config ${id}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** Deliver what is behind for one config, under its lease. */
  private async deliver(id: string): Promise<void> {
    const claimed = await this.repo.claim(id, this.owner, this.leaseMs);
    if (!claimed) return;
    let done = false;
    try {
      done = await this.deliverClaimed(claimed);
    } finally {
      await this.repo.release(id, this.owner, done).catch(() => undefined);
      if (done) this.untrack(id, claimed.runId);
    }
  }

  /**
   * True when the run ended and everything was delivered (the config is done). Successes are
   * recorded in batches (the cursor and the attempts in one statement, at most ADVANCE_EVERY
   * deliveries or at the end of a page): a crash in between re-sends at most that many events,
   * with the same `webhook-id`s (at-least-once).
   */
  private async deliverClaimed(c: PushConfigRow): Promise<boolean> {
    const target = this.configs.target(c);
    let cursor = c.cursor;
    let state: ProjectionState = cursor === 0 ? { status: 'submitted', blockedReason: null } : await this.queries.stateAt(c.orgId, c.runId, cursor);
    const done: Attempt[] = [];
    let recorded = cursor;
    const flush = async (): Promise<boolean> => {
      if (cursor === recorded && done.length === 0) return true;
      const ok = await this.repo.advance(c.id, this.owner, cursor, this.leaseMs, done.splice(0));
      recorded = cursor;
      return ok;
    };
    for (;;) {
      const page = await this.queries.readEvents(c.orgId, c.runId, cursor, PAGE);
      for (const env of page) {
        if (this.stopped) {
          await flush();
          return false;
        }
        const { body, state: after } = pushPayload(env, state, target.protocolVersion);
        state = after;
        if (body) {
          const { attempt, ok, retryAfterMs } = await this.post(target, env, body);
          if (!ok) {
            // what was delivered before is recorded first, then the failure (which frees the lease)
            if (await flush()) await this.failed(target, attempt, c.attempts, retryAfterMs);
            return false;
          }
          done.push(attempt);
        }
        cursor = env.sequence;
        if (done.length >= ADVANCE_EVERY && !(await flush())) return false;
      }
      if (!(await flush())) return false;
      // a short page is the end of the log for now: later events wake this loop again (or the
      // sweep finds them); nothing follows a terminal status, so the config is then done
      if (page.length < PAGE) return isTerminal(state.status);
    }
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
    const attempt: Attempt = { orgId: target.orgId, runId: target.runId, sequence: env.sequence, webhookId, statusCode: result.status, error: result.error ?? null, latencyMs: result.latencyMs };
    this.metrics.pushDeliveries.inc({ outcome: ok ? 'delivered' : result.status === null ? 'error' : String(result.status) });
    if (ok) this.metrics.pushLag.observe(Math.max(0, Date.now() - Date.parse(env.occurredAt)) / 1000);
    return { attempt, ok, ...(result.retryAfterMs !== undefined && { retryAfterMs: result.retryAfterMs }) };
  }

  /** Record a failed attempt: back off (or stop on 410, or mark failing past the budget) and free the lease. */
  private async failed(target: PushTarget, attempt: Attempt, failuresSoFar: number, retryAfterMs?: number): Promise<void> {
    const gone = attempt.statusCode === 410;
    const status = await this.repo.fail(target.id, this.owner, attempt, this.backoff(failuresSoFar + 1, retryAfterMs), this.config.PUSH_RETRY_BUDGET_MS, gone);
    if (status && status !== 'active') this.log.warn(`push config ${target.configId} of task ${target.runId} is ${status}: ${attempt.error ?? `HTTP ${attempt.statusCode}`}`);
  }

  /** Standard Webhooks signers by secret (a secret's key is decoded once). */
  private readonly signers = new TtlLruCache<string, Webhook>(10_000, 0);
  private signer(secret: string): Webhook {
    let w = this.signers.get(secret);
    if (!w) {
      w = new Webhook(secret);
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
