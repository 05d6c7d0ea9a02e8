import { Injectable } from '@nestjs/common';
import { RunNotifier, type WakeupState } from '../run-notifier.js';
import { isSettled } from '../run-state.js';
import type { SequencedOutputEnvelope } from '#libs/contracts';
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
    await this.wait(orgId, runId, timeoutMs, known, pollMs, false);
  }

  /**
   * `awaitSettled` that also keeps the envelopes the wake-ups carried (RunNotifier: each commit's
   * own, as the append returned them). Returns the log's envelopes from `known.lastSequence + 1`
   * up to the sequence at which the run was seen settled, when the wake-ups carried every one of
   * them in order; null when they did not (a commit announced without its envelopes, a lost or
   * reordered wake-up, a poll that read the run further), when the subscription was not live
   * when the wait began, or on the timeout: the caller then reads the run (RunViews.view).
   * Errors: `run.not_found`.
   */
  async awaitSettledLog(
    orgId: string,
    runId: string,
    timeoutMs: number,
    known: Pick<RunState, 'status' | 'blockedReason' | 'lastSequence'>,
  ): Promise<SequencedOutputEnvelope[] | null> {
    return this.wait(orgId, runId, timeoutMs, known, 500, true);
  }

  private async wait(
    orgId: string,
    runId: string,
    timeoutMs: number,
    known: Pick<RunState, 'status' | 'blockedReason' | 'lastSequence'> | undefined,
    pollMs: number,
    collect: boolean,
  ): Promise<SequencedOutputEnvelope[] | null> {
    let newest: { seq: number; state: WakeupState } | undefined;
    let wake: () => void = () => undefined;
    // the carried envelopes after `known`, one by one; null once one is missing
    let carried: SequencedOutputEnvelope[] | null = collect && known ? [] : null;
    let carriedTo = known?.lastSequence ?? 0;
    const stop = await this.notifier.listen(
      runId,
      (seq, state, committed) => {
        if (carried) {
          if (!committed) {
            if (seq > carriedTo) carried = null;
          } else {
            for (const e of committed.envelopes) {
              if (e.sequence <= carriedTo) continue;
              if (e.sequence !== carriedTo + 1 || committed.orgId !== orgId) {
                carried = null;
                break;
              }
              carried.push(e);
              carriedTo = e.sequence;
            }
          }
        }
        if (state && (!newest || seq > newest.seq)) newest = { seq, state };
        wake();
      },
      { envelopes: collect },
    );
    try {
      const deadline = Date.now() + timeoutMs;
      const live = known !== undefined && this.notifier.live;
      if (!live) carried = null;
      let current: { seq: number; state: WakeupState } = live ? { seq: known.lastSequence, state: known } : await this.readState(orgId, runId);
      for (;;) {
        if (newest && newest.seq > current.seq) current = newest;
        if (isSettled(current.state.status, current.state.blockedReason)) {
          const log = carried as SequencedOutputEnvelope[] | null;
          return log && carriedTo === current.seq ? log : null;
        }
        const left = deadline - Date.now();
        if (left <= 0) return null;
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
