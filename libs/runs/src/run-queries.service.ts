import { Injectable } from '@nestjs/common';
import type { BlockedReason, CanonicalMessage, RunStatus, SequencedOutputEnvelope } from '#libs/contracts';
import { runNotFound } from './commands/command-support.js';
import { EventLogRepository, type RunRecord } from './event-log.repository.js';
import { RunNotifier } from './run-notifier.js';
import { RunRepository, type RunListFilter, type RunState, type RunView, type RunViewOptions } from './run.repository.js';
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

  count(orgId: string, filter: Omit<RunListFilter, 'before' | 'limit'>): Promise<number> {
    return this.runs.count(orgId, filter);
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
  executionInput(orgId: string, runId: string, messageId: string): Promise<{ run: RunRecord; message: CanonicalMessage | null } | null> {
    return this.runs.executionInput(orgId, runId, messageId);
  }

  /** A revision's runtime config (immutable once published). */
  revisionRuntime(orgId: string, revisionId: string): Promise<unknown | null> {
    return this.runs.revisionRuntime(orgId, revisionId);
  }

  /** Active, unblocked runs unchanged since `olderThan`, all orgs (the lost-execution sweeper's candidates). */
  staleCandidates(olderThan: Date, limit?: number) {
    return this.runs.staleCandidates(olderThan, limit);
  }

  /** The newest user message of a run and its sequence (the trigger of its current execution). */
  lastUserMessage(orgId: string, runId: string) {
    return this.runs.lastUserMessage(orgId, runId);
  }

  /**
   * Wait until the run is settled (terminal, or blocked on its caller) or `timeoutMs` passes;
   * returns the run as it is then. Woken by RunNotifier, with a poll (`pollMs`) as the safety net
   * for lost wake-ups — so it also ends on time while Redis is down.
   * Errors: `run.not_found`.
   */
  async waitUntilSettled(orgId: string, runId: string, timeoutMs: number, pollMs = 500): Promise<RunState> {
    let wake: () => void = () => undefined;
    const stop = await this.notifier.listen(runId, () => wake());
    try {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const run = await this.requireRun(orgId, runId);
        const left = deadline - Date.now();
        if (isSettled(run.status, run.blockedReason) || left <= 0) return run;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.min(pollMs, left));
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    } finally {
      stop();
    }
  }
}
