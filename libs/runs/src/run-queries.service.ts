import { Injectable } from '@nestjs/common';
import type { BlockedReason, CanonicalMessage, RunKind, RunStatus, SequencedOutputEnvelope } from '#libs/contracts';
import { runNotFound } from './commands/command-support.js';
import { EventLogRepository, type RunRecord } from './event-log.repository.js';
import { RunNotifier, type WakeupState } from './run-notifier.js';
import { RunRepository, type InteractionRecord, type RunLinkRecord, type RunListFilter, type RunState, type RunView, type RunViewOptions } from './run.repository.js';
import { isSettled } from './run-state.js';

/**
 * Every read of runs, all projections of the event log, scoped by organization. Never writes.
 * Errors: `run.not_found` from the `require…` / `view` forms (also when the run belongs to another
 * agent than the one given).
 */
@Injectable()
export class RunQueries {
  constructor(
    private readonly runs: RunRepository,
    private readonly events: EventLogRepository,
    private readonly notifier: RunNotifier,
  ) {}

  /** The run and its open interaction, or null (another org's run is null too). */
  get(orgId: string, runId: string): Promise<RunState | null> {
    return this.runs.get(orgId, runId);
  }

  async requireRun(orgId: string, runId: string, agentId?: string): Promise<RunState> {
    const run = await this.runs.get(orgId, runId);
    if (!run || (agentId !== undefined && run.agentId !== agentId)) throw runNotFound(runId);
    return run;
  }

  /** The read model of a run (history limited to `historyLength` messages; artifacts unless excluded). */
  async view(orgId: string, runId: string, opts: RunViewOptions & { agentId?: string } = {}): Promise<RunView> {
    const view = await this.runs.view(orgId, runId, opts);
    if (!view || (opts.agentId !== undefined && view.run.agentId !== opts.agentId)) throw runNotFound(runId);
    return view;
  }

  /** Read models of several runs in one round trip, in the order given; unknown ids are left out. */
  views(orgId: string, runIds: readonly string[], opts: RunViewOptions = {}): Promise<RunView[]> {
    return this.runs.views(orgId, runIds, opts);
  }

  /** Runs newest status first, keyset-paginated; `limit + 1` rows at most (see RunRepository.list). */
  list(orgId: string, filter: RunListFilter): Promise<RunState[]> {
    return this.runs.list(orgId, filter);
  }

  /** Full-text search over an agent's runs' messages (see RunRepository.search). */
  search(orgId: string, agentId: string, f: { query: string; createdBy?: string | null; kind?: RunKind; before?: { statusAt: Date; id: string }; limit: number }): Promise<RunState[]> {
    return this.runs.search(orgId, agentId, f);
  }

  count(orgId: string, filter: Omit<RunListFilter, 'before' | 'limit'>): Promise<number> {
    return this.runs.count(orgId, filter);
  }

  /** The A2A extensions the run's creating request activated (its `run.created` event), [] when none. */
  async activatedExtensions(orgId: string, runId: string): Promise<string[]> {
    const found = await this.runs.latestOfType(orgId, runId, 'run.created');
    const ext = (found?.payload as { extensions?: unknown } | undefined)?.extensions;
    return Array.isArray(ext) ? ext.filter((u): u is string => typeof u === 'string') : [];
  }

  /** The state the run's runtime saved last (`run.runtime_state_saved`), or null when none. */
  async runtimeState(orgId: string, runId: string): Promise<unknown> {
    const found = await this.runs.latestOfType(orgId, runId, 'run.runtime_state_saved');
    return (found?.payload as { state?: unknown } | undefined)?.state ?? null;
  }

  /** A run's InteractionRequests (open and closed), oldest first; one when `interactionId` is given. */
  interactions(orgId: string, runId: string, interactionId?: string): Promise<InteractionRecord[]> {
    return this.runs.interactions(orgId, runId, interactionId);
  }

  /** The organization's InteractionRequests across runs, newest first (see RunRepository.listInteractions). */
  listInteractions(orgId: string, filter: { runId?: string; status?: string; limit: number }): Promise<InteractionRecord[]> {
    return this.runs.listInteractions(orgId, filter);
  }

  /** A run's RunLinks: its children and its parents, each with the other run's current status. */
  links(orgId: string, runId: string): Promise<{ children: RunLinkRecord[]; parents: RunLinkRecord[] }> {
    return this.runs.links(orgId, runId);
  }

  /** Open interactions past their expiry, across orgs (sweeper). */
  expiredInteractions(limit: number): Promise<Array<{ id: string; orgId: string; runId: string }>> {
    return this.runs.expiredInteractions(limit);
  }

  /** Active children of canceled or failed parents, across orgs (sweeper). */
  orphanedChildren(limit: number): Promise<Array<{ orgId: string; runId: string; parentRunId: string; parentStatus: RunStatus }>> {
    return this.runs.orphanedChildren(limit);
  }

  /** The log after `afterSequence`, in order, at most `limit` envelopes. */
  readEvents(orgId: string, runId: string, afterSequence: number, limit?: number): Promise<SequencedOutputEnvelope[]> {
    return this.events.readAfter(orgId, runId, afterSequence, limit);
  }

  /** (status, blockedReason) of a run as of `sequence` (see RunRepository.stateAt). */
  stateAt(orgId: string, runId: string, sequence: number): Promise<{ status: RunStatus; blockedReason: BlockedReason | null }> {
    return this.runs.stateAt(orgId, runId, sequence);
  }

  /**
   * The conversation of a thread so far: messages of every run of `agentId` in `threadId`, oldest
   * first, at most the newest `limit` (default 100).
   */
  threadHistory(orgId: string, agentId: string, threadId: string, limit = 100): Promise<Array<CanonicalMessage & { runId: string; sequence: number }>> {
    return this.runs.threadHistory(orgId, agentId, threadId, limit);
  }

  /** What an execution needs when its job did not carry it: the run and its triggering message. */
  executionInput(orgId: string, runId: string, messageId: string | null): Promise<{ run: RunRecord; message: CanonicalMessage | null } | null> {
    return this.runs.executionInput(orgId, runId, messageId);
  }

  /** A revision's runtime config (immutable once published). */
  revisionRuntime(orgId: string, revisionId: string): Promise<unknown | null> {
    return this.runs.revisionRuntime(orgId, revisionId);
  }

  /** Active, unblocked runs unchanged since `olderThan`, all orgs (the lost-execution sweeper's candidates). */
  staleCandidates(olderThan: Date, limit?: number, after?: { updatedAt: Date; id: string }) {
    return this.runs.staleCandidates(olderThan, limit, after);
  }

  /** Sequence of the trigger of the run's current execution (see RunRepository.lastTrigger). */
  lastTrigger(orgId: string, runId: string): Promise<number | null> {
    return this.runs.lastTrigger(orgId, runId);
  }

  /** The trigger event of the execution the resumption at `before` replaces (see RunRepository.triggerBefore). */
  triggerBefore(orgId: string, runId: string, before: number) {
    return this.runs.triggerBefore(orgId, runId, before);
  }

  /** The operation ids the run's log holds, oldest first (see RunRepository.operationIds). */
  operationIds(orgId: string, runId: string): Promise<string[]> {
    return this.runs.operationIds(orgId, runId);
  }

  /**
   * Wait until the run is settled (terminal, or blocked on its caller) or `timeoutMs` passes;
   * returns the run as it is then. See `awaitSettled`.
   * Errors: `run.not_found`.
   */
  async waitUntilSettled(orgId: string, runId: string, timeoutMs: number, pollMs = 500): Promise<RunState> {
    await this.awaitSettled(orgId, runId, timeoutMs, undefined, pollMs);
    return this.requireRun(orgId, runId);
  }

  /**
   * Resolve once the run is settled (terminal, or blocked on its caller) or `timeoutMs` (ms)
   * passes. Woken by RunNotifier; a wake-up carries the run's state, so the wait reads nothing
   * while wake-ups flow. `known` is the run as the caller's own command left it (skips the first
   * read when the wake-up subscription is live). A poll every `pollMs` is the safety net for lost
   * wake-ups, so it also ends on time while Redis is down. Wake-ups older than the newest state
   * seen are ignored. Errors: `run.not_found`.
   */
  async awaitSettled(
    orgId: string,
    runId: string,
    timeoutMs: number,
    known?: Pick<RunState, 'status' | 'blockedReason' | 'lastSequence'>,
    pollMs = 500,
  ): Promise<void> {
    let newest: { seq: number; state: WakeupState } | undefined;
    let wake: () => void = () => undefined;
    const stop = await this.notifier.listen(runId, (seq, state) => {
      if (state && (!newest || seq > newest.seq)) newest = { seq, state };
      wake();
    });
    try {
      const deadline = Date.now() + timeoutMs;
      let current: { seq: number; state: WakeupState } =
        known && this.notifier.live ? { seq: known.lastSequence, state: known } : await this.readState(orgId, runId);
      for (;;) {
        if (newest && newest.seq > current.seq) current = newest;
        if (isSettled(current.state.status, current.state.blockedReason)) return;
        const left = deadline - Date.now();
        if (left <= 0) return;
        const woke = await new Promise<boolean>((resolve) => {
          const t = setTimeout(() => resolve(false), Math.min(pollMs, left));
          wake = () => {
            clearTimeout(t);
            resolve(true);
          };
        });
        wake = () => undefined;
        // a poll, or a wake-up that carried no newer state: read the run
        if (!woke || !newest || newest.seq <= current.seq) current = await this.readState(orgId, runId);
      }
    } finally {
      stop();
    }
  }

  private async readState(orgId: string, runId: string): Promise<{ seq: number; state: WakeupState }> {
    const run = await this.requireRun(orgId, runId);
    return { seq: run.lastSequence, state: { status: run.status, blockedReason: run.blockedReason } };
  }
}
