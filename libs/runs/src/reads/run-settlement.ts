import { Injectable } from '@nestjs/common';
import { RunNotifier, type WakeupState } from '../run-notifier.js';
import { isSettled } from '../run-state.js';
import type { RunState } from './run-rows.repository.js';
import { RunViews } from './run-views.repository.js';

/**
 * The wait for settlement: a blocking SendMessage (and the tests' `waitUntilSettled`) returns once
 * its run is terminal or blocked on its caller (run-state.ts isSettled), or on its timeout. Woken
 * by RunNotifier, reading the run through RunViews only when a wake-up did not carry its state.
 */
@Injectable()
export class RunSettlement {
  constructor(
    private readonly views: RunViews,
    private readonly notifier: RunNotifier,
  ) {}

  /**
   * Wait until the run is settled (terminal, or blocked on its caller) or `timeoutMs` passes;
   * returns the run as it is then. See `awaitSettled`.
   * Errors: `run.not_found`.
   */
  async waitUntilSettled(orgId: string, runId: string, timeoutMs: number, pollMs = 500): Promise<RunState> {
    await this.awaitSettled(orgId, runId, timeoutMs, undefined, pollMs);
    return this.views.require(orgId, runId);
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
    const run = await this.views.require(orgId, runId);
    return { seq: run.lastSequence, state: { status: run.status, blockedReason: run.blockedReason } };
  }
}
