import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { AppError, isDependencyUnavailable } from '#libs/common';
import {
  ArtifactChunkSchema,
  BLOCKED_REASON_BY_KIND,
  RUNTIME_STATE_MAX_BYTES,
  InteractionOptionSchema,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type InteractionExpiryOutcome,
  type InteractionKind,
  type InteractionRequestOptions,
  type InteractionOption,
  type Part,
  type RunEvent,
  type RunExecuteJob,
  type RunLinkKind,
  type RunStatus,
} from '#libs/contracts';
import { cancelOpenInteractions, publish } from './commands/command-support.js';
import { executionFenced, invalidTransition, linkTooDeep, refusedByState, runConflict, runNotFound, runTerminal, runtimeStateTooLarge } from './run-errors.js';
import { injectTrace } from '#libs/telemetry';
import { DispatchRelay } from './dispatch.relay.js';
import { EventLogRepository, type AppendGuard } from './event-log.repository.js';
import type { RunRecord } from './run-record.js';
import { RunLeaseRepository, type LeaseRenewal } from './run-lease.repository.js';
import { RunNotifier } from './run-notifier.js';
import { CommandReads } from './reads/command-reads.repository.js';
import type { RunState } from './reads/run-rows.repository.js';
import { ACTIVE_STATUSES, isTerminal, statusUpdateSources } from './run-state.js';
import { newRunId } from './run-id.js';
import { StorageQuotas } from './storage-quotas.service.js';

/** Why a run fails when a runtime's write would take its organization past its storage quota. */
export const STORAGE_QUOTA_EXHAUSTED = "the organization's storage quota is exhausted";

/** Statuses a runtime may set (canceling is the caller's; submitted is where runs start). */
export type RuntimeStatus = Exclude<RunStatus, 'canceled' | 'submitted'>;

/** An agent message as runtimes give it (messageId assigned when absent). */
export interface AgentMessageDraft {
  parts: Part[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}

/**
 * How a runtime opens an InteractionRequest (all optional). `blocking` defaults to true (the run
 * waits: input-required / auth-required); `expiresInMs` (ms from now) with `onExpire` (default
 * `fail`) says what happens when nobody answers; a confirmation without `options` offers
 * approve / reject. `state` is handed back to the runtime when the interaction closes.
 */
export interface InteractionDraft extends InteractionRequestOptions {
  /** Set by the caller of `apply` so it knows the id before the commit; a UUID otherwise. */
  interactionId?: string;
  message?: AgentMessageDraft;
  origin?: string;
  /** Legacy free-form details (merged into metadata). */
  details?: Record<string, unknown>;
}

/** What a runtime asks of a delegation (RunLink): the agent, its input, the link's kind. */
export interface DelegationDraft {
  /** Slug of a published agent of the same organization. */
  agent: string;
  message: AgentMessageDraft;
  kind?: RunLinkKind;
  /** Default true: the child's settlement dispatches this run again (trigger `link_settled`). */
  await?: boolean;
  /** Handed back to the runtime when the child settles. */
  state?: unknown;
  /** Makes the delegation idempotent: the same key on the same parent yields the same child. */
  key: string;
}

/** A delegation as committed: the link and the child run. */
export interface Delegation {
  linkId: string;
  childRunId: string;
  childThreadId: string;
  /** false: the key had created this child already (a re-executed runtime). */
  created: boolean;
}

/** How `apply` retries and which execution it writes for (see there): all optional. */
export interface ApplyOptions {
  /** The run's last sequence as the caller expects it before this append (its last append's, or its trigger's). */
  expectedSequence?: number;
  /** Retry an append the database could not take for up to this many ms (0 or absent: no retry). */
  retryForMs?: number;
  /**
   * The fencing token of the execution writing (the run's `execution_epoch` when its dispatch was
   * claimed): every attempt is refused, in its statement, once a newer execution took the run over,
   * and `apply` then rejects with `run.fenced` (docs/architecture.md "The fence").
   */
  epoch?: number;
}

/** Times `apply` re-reads a log that other writers keep moving before it gives up (`run.conflict`). */
const MAX_SEQUENCE_MOVES = 50;

/** Deepest RunLink nesting allowed (a child of a child ... of a run). */
export const MAX_LINK_DEPTH = 8;

const DEFAULT_CONFIRMATION_OPTIONS: InteractionOption[] = [
  { id: 'approve', label: 'Approve', kind: 'approve' },
  { id: 'reject', label: 'Reject', kind: 'reject' },
];

/**
 * One runtime operation, as RuntimeOperations.apply takes them (each becomes one event). `opId`
 * (OperationIdSchema, optional): the runtime's id for it, stored in its event's payload, so that a
 * resumed execution can tell it is recorded (RuntimeContext.recorded) — `state` carries none.
 */
export type RuntimeOp = (
  | { op: 'status'; status: RuntimeStatus; message?: AgentMessageDraft; reason?: string }
  | ({ op: 'interaction'; kind: InteractionKind } & InteractionDraft)
  | { op: 'message'; message: AgentMessageDraft }
  | { op: 'artifact'; chunk: ArtifactChunkInput }
  /** Record the runtime's own state for this run (`run.runtime_state_saved`); JSON, bounded. */
  | { op: 'state'; state: unknown }
) & { opId?: string };

function agentMessage(draft: AgentMessageDraft): CanonicalMessage {
  const m: CanonicalMessage = { messageId: draft.messageId ?? randomUUID(), role: 'agent', parts: draft.parts };
  if (draft.metadata) m.metadata = draft.metadata;
  return m;
}

/**
 * What an executing runtime does to its run: status changes, agent messages, artifacts and
 * interaction requests — each one event through the append path, guarded by the run state
 * machine, followed by a wake-up. Errors: `run.not_found`, `run.terminal` (the run ended, e.g.
 * canceled meanwhile: the runtime should stop), `run.invalid_transition`.
 *
 * The storage quota: every write of a runtime (`apply`, `delegate`) carries its organization's
 * quota (StorageQuotas.limit) and the append statement refuses it when the organization's stored
 * bytes plus what it adds would pass the quota — nothing of it is written. The run then fails
 * through `failRun` with STORAGE_QUOTA_EXHAUSTED, and the runtime's call rejects with `run.terminal`,
 * so it stops as it does for a canceled run. The platform's own appends (failing, expiring,
 * resuming, cancelling) are never refused.
 */
@Injectable()
export class RuntimeOperations {
  private readonly log = new Logger(RuntimeOperations.name);

  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly notifier: RunNotifier,
    private readonly leases: RunLeaseRepository,
    private readonly relay: DispatchRelay,
    private readonly quotas: StorageQuotas,
  ) {}

  /**
   * An execution's heartbeat: take or renew its lease on the run for `triggerSequence` until
   * now + `ttlMs` (ms), and return the run's status (terminal: the execution should stop) and
   * fencing token (not `epoch`: a takeover fenced the execution, which takes no lease and should
   * stop). Null when the run is gone. Writes no event (a lease is not run state).
   */
  heartbeat(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number, epoch?: number): Promise<LeaseRenewal | null> {
    return this.leases.renew(orgId, runId, owner, triggerSequence, ttlMs, epoch);
  }

  /** Move a run to `status` (runtimes never cancel). */
  setStatus(orgId: string, runId: string, status: RuntimeStatus, opts: { message?: AgentMessageDraft; reason?: string } = {}): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'status', status, ...opts }]);
  }

  /**
   * Open an InteractionRequest (blocking by default: the run waits on its caller).
   * `run.invalid_transition` when the run is blocked already.
   */
  requestInteraction(orgId: string, runId: string, kind: InteractionKind, opts: InteractionDraft = {}): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'interaction', kind, ...opts }]);
  }

  emitMessage(orgId: string, runId: string, draft: AgentMessageDraft): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'message', message: draft }]);
  }

  emitArtifact(orgId: string, runId: string, chunk: ArtifactChunkInput): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'artifact', chunk }]);
  }

  /**
   * Apply several runtime operations in order as ONE append (one statement, one commit, shared
   * with concurrent appends to other runs by the repository's group commit): each op becomes one
   * event with its own sequence. The guard is the batch's: the run must be active
   * (and not blocked on its caller, when the batch changes the status or opens an interaction:
   * a blocked run moves only through its interaction); the final status / blocked reason are
   * the last ones the batch sets. Ops after a terminal status or an interaction are refused
   * (`run.invalid_transition`) — callers flush before those. Artifact chunks may be several (the
   * projection folds a batch's chunks of an artifact in order, as one chunk after another).
   *
   * With `opts.retryForMs`, an append the database could not take (`isDependencyUnavailable`) is
   * retried with backoff (100 ms doubling to 2 s) for that long, then the last error is thrown.
   * The retry is idempotent by sequence: every attempt is guarded by the last sequence the run is
   * expected at (`opts.expectedSequence`, else read first), so an attempt whose answer was lost
   * either committed before the next one — the next one is refused, the log after the expected
   * sequence is read and this batch found in it: done, nothing appended twice — or can never
   * commit after it. A log that moved for another reason is re-read and the batch appended after
   * it. Without `retryForMs` and `expectedSequence`, one attempt, unguarded by sequence.
   *
   * With `opts.epoch` every attempt carries the execution's fencing token: once a newer execution
   * took the run over the statement refuses it and `apply` rejects with `run.fenced` (whatever an
   * earlier attempt whose answer was lost did: the newer execution replays from the log).
   * An operation whose id (`opId`) the run's log holds already is dropped, not appended again
   * (PostgreSQL refuses it by the unique index `run_events_op_id_key`; the rest of the batch goes
   * on); a batch left with nothing resolves to the run as it is.
   *
   * The batch is checked against the organization's storage quota in its statement: past it,
   * nothing of the batch is written, the run fails (STORAGE_QUOTA_EXHAUSTED, through `failRun`) and
   * `apply` rejects with `run.terminal` (or `run.fenced`, when a newer execution holds the run).
   */
  async apply(orgId: string, runId: string, ops: readonly RuntimeOp[], opts: ApplyOptions = {}): Promise<RunRecord> {
    if (ops.length === 0) throw new Error('apply needs at least one op');
    for (let left = ops; ; ) {
      const { events, guard } = batchOf(runId, left);
      // a terminal status closes the run's open interactions (`interaction.canceled` each, same
      // append); optimistic: assume none are open, and on refusal read them and try again
      const terminal = guard.status !== undefined && isTerminal(guard.status);
      if (terminal) guard.openInteractions = 0;
      if (opts.epoch !== undefined) guard.epoch = opts.epoch;
      try {
        return await this.appendBatch(orgId, runId, events, guard, terminal, opts);
      } catch (e) {
        if (e instanceof AppError && e.code === 'org.storage_quota_exceeded') throw await this.failForQuota(orgId, runId, e, opts.epoch);
        if (!(e instanceof AppError && e.code === 'run.duplicate_operation')) throw e;
        // PostgreSQL refused an operation id the log holds (run_events_op_id_key): the recorded
        // operations are dropped, the rest appended — a replayed operation is never recorded twice
        const recorded = await this.runs.recordedOperations(orgId, runId, left.flatMap((o) => (o.opId ? [o.opId] : [])));
        const rest = left.filter((o) => !(o.opId && recorded.has(o.opId)));
        if (rest.length === left.length) throw e;
        if (rest.length === 0) {
          const run = await this.runs.get(orgId, runId);
          if (!run) throw runNotFound(runId);
          return run;
        }
        left = rest;
      }
    }
  }

  /**
   * The append of `apply`'s batch, with its retries (see `apply`): while the database is
   * unreachable (with `retryForMs`), after the log moved (re-guarded at the new sequence, or done
   * when an earlier attempt of ours is found in it), and, for a terminal batch, after the open
   * interactions changed (their cancellations re-read and put before the terminal status).
   */
  private async appendBatch(orgId: string, runId: string, events: RunEvent[], guard: AppendGuard, terminal: boolean, opts: ApplyOptions): Promise<RunRecord> {
    const retryUntil = opts.retryForMs ? Date.now() + opts.retryForMs : 0;
    // the sequence every attempt is guarded by (undefined: unguarded, no retry asked)
    let expected = opts.expectedSequence;
    // set while an attempt whose outcome is unknown may have committed: the sequence it expected
    let unsure: number | undefined;
    for (let attempt = 0, outages = 0, moves = 0; ; ) {
      let sent: number | undefined;
      let run: RunState | null;
      try {
        if (retryUntil && expected === undefined) expected = (await this.runs.get(orgId, runId))?.lastSequence ?? 0;
        // the organization's storage quota, checked by the statement (read at most STORAGE_USAGE_TTL_MS
        // ago; a reading the database cannot give now is retried like the append)
        const quota = await this.quotas.limit(orgId);
        sent = expected;
        const result = await this.appendOnce(orgId, runId, { ...guard, ...(expected !== undefined && { lastSequence: expected }), ...(quota > 0 && { quotaBytes: quota }) }, events);
        if (result) return result;
        sent = undefined;
        run = await this.runs.get(orgId, runId);
        if (!run) throw runNotFound(runId);
        // a newer execution took the run over: this one stops, whatever it recorded before
        if (guard.epoch !== undefined && run.executionEpoch !== undefined && run.executionEpoch !== guard.epoch) throw executionFenced(runId, guard.epoch, run.executionEpoch);
        if (expected !== undefined && run.lastSequence !== expected) {
          // the log moved: an earlier attempt of ours whose answer was lost, or another writer
          if (unsure !== undefined && (await this.recorded(orgId, runId, unsure, events))) {
            this.notifier.notify(run.id, run.lastSequence, run);
            return run;
          }
          // any attempt still in flight expected less than the run is at now: it cannot commit
          unsure = undefined;
          if (isTerminal(run.status)) throw refusal(run, guard);
          if (++moves > MAX_SEQUENCE_MOVES) throw runConflict(`run ${runId}: its log kept moving while an execution appended to it`, { runId });
          expected = run.lastSequence;
          continue;
        }
      } catch (e) {
        if (!retryUntil || !isDependencyUnavailable(e) || Date.now() >= retryUntil) throw e;
        if (sent !== undefined) unsure ??= sent;
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** outages++, Math.max(0, retryUntil - Date.now()))));
        continue;
      }
      attempt++;
      // retry only when what changed is the open interactions (else the refusal stands)
      const moved = run.openInteractions > 0 || (guard.interactionVersion !== undefined && guard.interactionVersion !== run.interactionVersion);
      const retry = terminal && attempt <= 3 && !isTerminal(run.status) && !(run.blockedReason !== null && guard.blocked === false) && moved;
      if (!retry) throw refusal(run, guard);
      events.splice(0, events.length, ...withOpenInteractionsCanceled(events, run));
      guard.openInteractions = undefined;
      guard.interactionVersion = run.interactionVersion;
    }
  }

  /** One guarded append of the batch; published when it committed, null when the guard refused it. */
  private async appendOnce(orgId: string, runId: string, guard: AppendGuard, events: RunEvent[]): Promise<RunRecord | null> {
    let result;
    try {
      result = await this.events.append(orgId, runId, guard, events);
    } catch (e) {
      if (e instanceof AppError && e.code === 'run.duplicate_message') throw runConflict(`run ${runId}: an agent messageId is already recorded on this run`, { runId }, e);
      throw e;
    }
    if (!result) return null;
    publish(result, this.notifier, this.relay);
    return result.run;
  }

  /**
   * Whether `events` (one batch, so contiguous) are in the run's log after sequence `after`: an
   * attempt whose answer was lost committed them. Compared by content (messages and interactions
   * carry their ids; JSON key order aside), the `interaction.canceled` events a retried terminal
   * batch adds or drops aside.
   */
  private async recorded(orgId: string, runId: string, after: number, events: readonly RunEvent[]): Promise<boolean> {
    const ours = (JSON.parse(JSON.stringify(events)) as RunEvent[]).filter((e) => e.type !== 'interaction.canceled');
    const log = (await this.events.readAfter(orgId, runId, after)).map((e) => e.event).filter((e) => e.type !== 'interaction.canceled');
    for (let i = 0; i + ours.length <= log.length; i++) {
      if (ours.every((e, k) => sameJson(e, log[i + k]))) return true;
    }
    return false;
  }

  /**
   * Expire an open InteractionRequest whose `expiresAt` passed (the sweeper calls this):
   * `interaction.expired` with the outcome the runtime declared. `fail`: the run fails in the same
   * append (its other open interactions canceled). `continue`: a blocking interaction lifts the
   * overlay, and when the run is then unblocked an execution is dispatched (trigger
   * `interaction_expired`). Null when the interaction is not open any more (answered meanwhile,
   * or another sweeper expired it) or not expired yet.
   */
  async expireInteraction(orgId: string, runId: string, interactionId: string): Promise<RunRecord | null> {
    const [ir] = await this.runs.interactions(orgId, runId, interactionId);
    if (!ir || ir.status !== 'open' || !ir.expiresAt || Date.parse(ir.expiresAt) > Date.now()) return null;
    const outcome = (ir.request.onExpire as InteractionExpiryOutcome | undefined) ?? 'fail';
    const expired: RunEvent = { type: 'interaction.expired', payload: { interactionId, blocking: ir.blocking, outcome } };
    const run = await this.runs.get(orgId, runId);
    if (!run || isTerminal(run.status) || !(run.openInteractionIds ?? []).includes(interactionId)) return null;
    let result;
    if (outcome === 'continue') {
      result = await this.events.append(
        orgId,
        runId,
        { from: ACTIVE_STATUSES, openInteractionId: interactionId, interactionVersion: run.interactionVersion, ...(ir.blocking ? { blocked: true, blockedReason: null } : {}) },
        [expired],
        { orgId, runId, trigger: 'interaction_expired' },
      );
    } else {
      const reason = `interaction ${interactionId} expired`;
      const events: RunEvent[] = [
        expired,
        ...cancelOpenInteractions(run, reason, interactionId),
        { type: 'run.status_changed', payload: { status: 'failed', blockedReason: null, reason, message: agentMessage({ parts: [{ text: `Failed: nobody answered in time (${reason})` }] }) } },
      ];
      result = await this.events.append(orgId, runId, { from: statusUpdateSources('failed'), interactionVersion: run.interactionVersion, status: 'failed', blockedReason: null }, events);
    }
    if (!result) return null;
    publish(result, this.notifier, this.relay);
    return result.run;
  }

  /**
   * Delegate to another published agent of the same organization (RunLink): one transaction
   * creates the child run (its own thread, input `draft.message` as a user message whose id
   * derives from the parent and `draft.key`, dispatched like any new run) and appends
   * `run.linked` to the parent, whose message names the child in `referenceTaskIds`. The child's
   * status changes are then mirrored to the parent (`run.link_updated`), and when the parent
   * awaits it, the child's settlement dispatches the parent (trigger `link_settled`).
   * Idempotent per (parent, key). Errors: `agent.not_published` (no such published agent),
   * `run.link_too_deep` (more than MAX_LINK_DEPTH levels), `run.terminal` /
   * `run.invalid_transition` (the parent cannot act), `run.not_found`, `run.fenced` (`opts.epoch`:
   * the delegating execution's fencing token, and a newer execution took the parent over).
   */
  async delegate(orgId: string, parentRunId: string, draft: DelegationDraft, opts: { epoch?: number } = {}): Promise<Delegation> {
    const [target, depth, parent] = await Promise.all([this.runs.publishedAgent(orgId, draft.agent), this.runs.linkDepth(orgId, parentRunId, MAX_LINK_DEPTH), this.runs.get(orgId, parentRunId)]);
    if (!parent) throw runNotFound(parentRunId);
    if (!target) throw new AppError('agent.not_published', `no published agent ${draft.agent} in this organization`, { details: { agent: draft.agent } });
    if (depth + 1 > MAX_LINK_DEPTH) {
      throw linkTooDeep(parentRunId, depth, MAX_LINK_DEPTH);
    }
    const childRunId = newRunId();
    const childThreadId = randomUUID();
    const linkId = randomUUID();
    const kind = draft.kind ?? 'delegation';
    const awaiting = draft.await ?? true;
    const input: CanonicalMessage = {
      messageId: `link:${parentRunId}:${draft.key}`,
      role: 'user',
      parts: draft.message.parts,
      metadata: { ...draft.message.metadata, parentTaskId: parentRunId, runLinkKind: kind },
    };
    // the child's execution continues the delegating execution's trace (no-op when not tracing)
    const dispatch: RunExecuteJob = injectTrace({
      orgId,
      runId: childRunId,
      trigger: 'created',
      inputMessageId: input.messageId,
      // a delegated child's `run.created` records no extensions
      context: { threadId: childThreadId, agentId: target.agentId, revisionId: target.revisionId, input, extensions: [] },
    });
    const notice: CanonicalMessage = {
      messageId: randomUUID(),
      role: 'agent',
      parts: [{ text: `Delegated to ${draft.agent} (${kind}): task ${childRunId}` }],
      referenceTaskIds: [childRunId],
      metadata: { runLink: { linkId, kind, childTaskId: childRunId, childContextId: childThreadId, agent: draft.agent, awaiting } },
    };
    const quota = await this.quotas.limit(orgId);
    let outcome: Awaited<ReturnType<EventLogRepository['createLinked']>>;
    try {
      outcome = await this.events.createLinked(
        {
          // the child belongs to the parent's owner, who can follow it on the child's agent
          run: { id: childRunId, orgId, agentId: target.agentId, revisionId: target.revisionId, threadId: childThreadId, originMessageId: input.messageId, metadata: { parentTaskId: parentRunId, runLinkKind: kind }, createdBy: parent.createdBy },
          events: [
            { type: 'run.created', payload: { runId: childRunId, threadId: childThreadId, agentId: target.agentId, revisionId: target.revisionId, status: 'submitted' } },
            { type: 'message.added', payload: { message: input } },
          ],
          dispatch,
        },
        {
          orgId,
          runId: parentRunId,
          guard: { from: ACTIVE_STATUSES, blocked: false, ...(opts.epoch !== undefined && { epoch: opts.epoch }), ...(quota > 0 && { quotaBytes: quota }) },
          events: [
            {
              type: 'run.linked',
              payload: { linkId, childRunId, childThreadId, agentId: target.agentId, agentSlug: draft.agent, kind, awaiting, ...(draft.state !== undefined && { state: draft.state }), message: notice },
            },
          ],
        },
      );
    } catch (e) {
      // the child's input and the parent's notice do not fit: neither was written
      if (e instanceof AppError && e.code === 'org.storage_quota_exceeded') throw await this.failForQuota(orgId, parentRunId, e, opts.epoch);
      throw e;
    }
    if (!outcome) {
      const run = await this.runs.get(orgId, parentRunId);
      if (!run) throw runNotFound(parentRunId);
      if (opts.epoch !== undefined && run.executionEpoch !== opts.epoch) throw executionFenced(parentRunId, opts.epoch, run.executionEpoch);
      throw refusal(run, { from: ACTIVE_STATUSES, blocked: false });
    }
    if (!outcome.child) {
      // the key made this child before: the same link
      const existing = await this.runs.findByOriginMessage(orgId, target.agentId, parent.createdBy, input.messageId);
      const link = existing ? await this.runs.linkOfChild(orgId, existing.id) : null;
      if (!existing || !link) throw new AppError('internal', `delegation ${draft.key} of run ${parentRunId} has a child but no link`);
      return { linkId: link.id, childRunId: existing.id, childThreadId: existing.threadId, created: false };
    }
    if (outcome.parent) publish(outcome.parent, this.notifier, this.relay);
    if (outcome.child.dispatch) this.relay.relay({ ...outcome.child.dispatch, job: dispatch });
    return { linkId, childRunId, childThreadId, created: true };
  }

  /**
   * A lost execution (its worker died) of a run whose runtime is resumable: instead of failing the
   * run, append `run.execution_resumed` and dispatch a new execution (trigger `resumed`, outbox,
   * same statement). Guarded by the run's last sequence, so concurrent sweepers resume it once.
   * Returns `resumed` (with the attempt), `exhausted` when `maxAttempts` lost executions were
   * resumed already (the caller fails the run; `handedOn` ones — a worker that stopped
   * gracefully — do not count and are never refused), or null when the run ended, is blocked on its caller
   * (needs no execution) or changed meanwhile (whoever changed it carries on).
   * The resumption takes the run's executions over (docs/architecture.md "The fence"): the same
   * statement adds one to the run's fencing token and clears its lease, so every write of the
   * execution it replaces is refused from then on. `opts.epoch`: the caller is an execution handing
   * its run on (a stopping worker), which may do so only while it still holds the run.
   */
  async resumeExecution(
    orgId: string,
    runId: string,
    reason: string,
    maxAttempts: number,
    opts: { handedOn?: boolean; epoch?: number } = {},
  ): Promise<{ outcome: 'resumed'; attempt: number } | { outcome: 'exhausted' } | null> {
    const run = await this.runs.get(orgId, runId);
    if (!run || isTerminal(run.status) || run.blockedReason) return null;
    if (opts.epoch !== undefined && run.executionEpoch !== opts.epoch) return null;
    // only lost executions use up the budget: a worker stopping gracefully (a deploy) hands on
    const previous = await this.runs.resumptions(orgId, runId);
    if (!opts.handedOn && previous.lost + 1 > maxAttempts) return { outcome: 'exhausted' };
    const attempt = previous.total + 1;
    const result = await this.events.append(
      orgId,
      runId,
      { from: ACTIVE_STATUSES, blocked: false, lastSequence: run.lastSequence, takeOver: true, ...(opts.epoch !== undefined && { epoch: opts.epoch }) },
      [{ type: 'run.execution_resumed', payload: { reason, attempt, ...(opts.handedOn && { handedOn: true }) } }],
      { orgId, runId, trigger: 'resumed', attempt },
    );
    if (!result) return null;
    publish(result, this.notifier, this.relay);
    return { outcome: 'resumed', attempt };
  }

  /**
   * A runtime's write the storage quota refused (nothing of it was written): the run fails through
   * `failRun` with STORAGE_QUOTA_EXHAUSTED, and the error the runtime gets is returned — `run.terminal`
   * (the run ended: stop), `run.fenced` when a newer execution holds the run, or the refusal itself
   * when the run could not be failed and is still active.
   */
  private async failForQuota(orgId: string, runId: string, refusal: AppError, epoch: number | undefined): Promise<AppError> {
    this.log.warn(`run ${runId}: ${refusal.message}; failing the run`);
    const failed = await this.failRun(orgId, runId, STORAGE_QUOTA_EXHAUSTED, epoch !== undefined ? { epoch } : {});
    if (failed) return new AppError('run.terminal', `run ${runId} is failed: ${STORAGE_QUOTA_EXHAUSTED}`, { details: { runId, status: failed.status }, cause: refusal });
    // not failed by this call: it ended meanwhile, or a newer execution holds it
    const run = await this.runs.get(orgId, runId);
    if (!run) return runNotFound(runId);
    if (epoch !== undefined && run.executionEpoch !== undefined && run.executionEpoch !== epoch) return executionFenced(runId, epoch, run.executionEpoch);
    return isTerminal(run.status) ? runTerminal(run) : refusal;
  }

  /**
   * Fail a run for a platform reason (lost worker, runtime crash, expiry). Its open interactions
   * are canceled in the same append. Null when already terminal or gone, or — `expectedSequence`:
   * a sweeper's verdict on the run at that sequence — when it moved or waits on its caller, or —
   * `epoch`: an execution failing its own run — when a newer execution took the run over.
   */
  async failRun(orgId: string, runId: string, reason: string, opts: { expectedSequence?: number; epoch?: number } = {}): Promise<RunRecord | null> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const run = await this.runs.get(orgId, runId);
      if (!run || isTerminal(run.status)) return null;
      // an execution's verdict about its own run: a newer execution took it over, which carries on
      if (opts.epoch !== undefined && run.executionEpoch !== opts.epoch) return null;
      // a verdict about the run as it was at `expectedSequence` (the sweeper's): if the run moved or
      // now waits on its caller, the verdict is stale and the run is left alone
      const judged = opts.expectedSequence !== undefined;
      if (judged && (run.lastSequence !== opts.expectedSequence || run.blockedReason !== null)) return null;
      const events = cancelOpenInteractions(run, reason);
      events.push({
        type: 'run.status_changed',
        payload: { status: 'failed', blockedReason: null, reason, message: agentMessage({ parts: [{ text: `Failed: ${reason}` }] }) },
      });
      const result = await this.events.append(orgId, runId, {
        from: statusUpdateSources('failed'),
        interactionVersion: run.interactionVersion,
        status: 'failed',
        blockedReason: null,
        ...(judged && { lastSequence: opts.expectedSequence, blocked: false }),
        ...(opts.epoch !== undefined && { epoch: opts.epoch }),
      }, events);
      if (result) {
        publish(result, this.notifier, this.relay);
        return result.run;
      }
      if (judged) return null;
    }
    throw new AppError('internal', `run ${runId} kept changing while being failed`);
  }
}

/** Deep equality of two JSON values, whatever their objects' key order. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((x, i) => sameJson(x, (b as unknown[])[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/**
 * The events and the append guard of a batch of runtime ops (RuntimeOperations.apply): each op one
 * event; the guard is the batch's (the final status and blocked reason are the last ones it sets).
 * Errors: `run.invalid_transition` for an op after a terminal status or an interaction;
 * `run.runtime_state_too_large`.
 */
function batchOf(runId: string, ops: readonly RuntimeOp[]): { events: RunEvent[]; guard: AppendGuard } {
  const events: RunEvent[] = [];
  const guard: AppendGuard = { from: ACTIVE_STATUSES };
  let closed = false;
  for (const op of ops) {
    if (closed) throw invalidTransition(`run ${runId}: no runtime operation may follow a terminal status or an interaction in one batch`, { runId });
    switch (op.op) {
      case 'status': {
        const payload: Extract<RunEvent, { type: 'run.status_changed' }>['payload'] = { status: op.status, blockedReason: null };
        if (op.message) payload.message = agentMessage(op.message);
        if (op.reason) payload.reason = op.reason;
        if (op.opId) payload.opId = op.opId;
        events.push({ type: 'run.status_changed', payload });
        // a run blocked on its caller changes status only through its interaction (answer,
        // expiry, cancel): that keeps the overlay and the open InteractionRequest in step
        guard.blocked = false;
        if (guard.status === undefined) guard.from = statusUpdateSources(op.status);
        guard.status = op.status;
        guard.blockedReason = null;
        closed = isTerminal(op.status);
        break;
      }
      case 'interaction': {
        const payload = interactionPayload(op);
        if (op.opId) payload.opId = op.opId;
        events.push({ type: 'interaction.requested', payload });
        if (guard.status === undefined) guard.status = 'working';
        guard.blocked = false;
        if (payload.blocking) {
          guard.status = 'working';
          guard.blockedReason = payload.blockedReason;
          closed = true;
        }
        break;
      }
      case 'message':
        events.push({ type: 'message.added', payload: { message: agentMessage(op.message), ...(op.opId && { opId: op.opId }) } });
        break;
      case 'state': {
        const size = Buffer.byteLength(JSON.stringify(op.state ?? null));
        if (size > RUNTIME_STATE_MAX_BYTES) throw runtimeStateTooLarge(runId, size, RUNTIME_STATE_MAX_BYTES);
        events.push({ type: 'run.runtime_state_saved', payload: { state: op.state ?? null } });
        break;
      }
      case 'artifact':
        events.push({ type: 'artifact.updated', payload: { ...ArtifactChunkSchema.parse(op.chunk), ...(op.opId && { opId: op.opId }) } });
        break;
    }
  }
  return { events, guard };
}

/**
 * The batch's events with one `interaction.canceled` per interaction open on `run` now (replacing
 * the ones it carried), right before its terminal status event.
 */
function withOpenInteractionsCanceled(events: readonly RunEvent[], run: RunState): RunEvent[] {
  const kept = events.filter((e) => e.type !== 'interaction.canceled');
  const cancels = cancelOpenInteractions(run, 'the run ended');
  const at = kept.findIndex((e) => e.type === 'run.status_changed' && isTerminal(e.payload.status));
  return [...kept.slice(0, at), ...cancels, ...kept.slice(at)];
}

/** Why the run's state refused the batch: `run.terminal`, else `run.invalid_transition`. */
function refusal(run: RunState, guard: AppendGuard): AppError {
  return isTerminal(run.status) ? runTerminal(run) : refusedByState(run, guard.status ?? null);
}

/**
 * The `interaction.requested` payload of an interaction op. The prompt always travels as an agent
 * message (A2A TaskStatus.message) whose `metadata.interaction` carries the id, kind, options,
 * blocking and expiry, so a client can answer it (A2A view: the message names the interaction).
 */
function interactionPayload(op: { kind: InteractionKind } & InteractionDraft): Extract<RunEvent, { type: 'interaction.requested' }>['payload'] {
  const interactionId = op.interactionId ?? randomUUID();
  const blocking = op.blocking ?? true;
  const options = op.options?.map((o) => InteractionOptionSchema.parse(o)) ?? (op.kind === 'confirmation' ? DEFAULT_CONFIRMATION_OPTIONS : undefined);
  const expiresAt = op.expiresInMs !== undefined ? new Date(Date.now() + Math.max(0, op.expiresInMs)).toISOString() : undefined;
  const onExpire = expiresAt ? (op.onExpire ?? 'fail') : undefined;
  const draft = op.message ?? { parts: [{ text: [op.title, op.description].filter(Boolean).join('\n') || defaultPrompt(op.kind) }] };
  const summary = {
    id: interactionId,
    kind: op.kind,
    blocking,
    ...(op.title !== undefined && { title: op.title }),
    ...(options && { options }),
    ...(expiresAt && { expiresAt, onExpire }),
  };
  const message = agentMessage({ ...draft, metadata: { ...draft.metadata, interaction: summary } });
  const metadata = op.metadata || op.details ? { ...op.details, ...op.metadata } : undefined;
  return {
    interactionId,
    kind: op.kind,
    blockedReason: blocking ? BLOCKED_REASON_BY_KIND[op.kind] : null,
    blocking,
    message,
    ...(op.title !== undefined && { title: op.title }),
    ...(op.description !== undefined && { description: op.description }),
    ...(options && { options }),
    ...(expiresAt && { expiresAt, onExpire }),
    ...(op.origin !== undefined && { origin: op.origin }),
    ...(op.state !== undefined && { state: op.state }),
    ...(metadata && { metadata }),
  };
}

function defaultPrompt(kind: InteractionKind): string {
  return kind === 'auth' ? 'Authorization is required to continue.' : kind === 'confirmation' ? 'Please confirm.' : 'More input is required.';
}
