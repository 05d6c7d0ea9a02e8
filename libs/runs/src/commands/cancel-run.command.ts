import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { RunEvent } from '#libs/contracts';
import { EventLogRepository } from '../event-log.repository.js';
import type { RunRecord } from '../run-record.js';
import { RunNotifier } from '../run-notifier.js';
import { CommandReads } from '../reads/command-reads.repository.js';
import { isTerminal, statusUpdateSources } from '../run-state.js';
import { DispatchRelay } from '../dispatch.relay.js';
import { runNotCancelable, runNotFound } from '../run-errors.js';
import { cancelOpenInteractions, publish } from './command-support.js';

/** Cancel a run (A2A: CancelTask). */
export interface CancelRunCommand {
  orgId: string;
  runId: string;
  /** When given, the run must belong to this agent (else `run.not_found`). */
  agentId?: string;
  /** Recorded on the `run.status_changed` event; default "canceled by the caller". */
  reason?: string;
}

/**
 * CancelRunCommand: `run.status_changed` → canceled, with an `interaction.canceled` for every
 * open interaction in the same append, then a cancellation signal so a running execution stops,
 * then the same for its open child runs (RunLink). A parent that awaits this run hears of it
 * (`run.link_updated`, same statement).
 * Errors: `run.not_found`; `run.not_cancelable` when the run is already terminal.
 */
@Injectable()
export class CancelRunHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly notifier: RunNotifier,
    private readonly relay: DispatchRelay,
  ) {}

  async execute(cmd: CancelRunCommand): Promise<RunRecord> {
    for (let attempt = 0; ; attempt++) {
      const run = await this.runs.get(cmd.orgId, cmd.runId);
      if (!run || (cmd.agentId !== undefined && run.agentId !== cmd.agentId)) throw runNotFound(cmd.runId);
      if (isTerminal(run.status)) {
        throw runNotCancelable(run);
      }
      const reason = cmd.reason ?? 'canceled by the caller';
      const events: RunEvent[] = cancelOpenInteractions(run, reason);
      events.push({ type: 'run.status_changed', payload: { status: 'canceled', blockedReason: null, reason } });
      const result = await this.events.append(run.orgId, run.id, {
        from: statusUpdateSources('canceled'),
        // the interactions read above must still be the open ones (else re-read: they changed)
        interactionVersion: run.interactionVersion,
        status: 'canceled',
        blockedReason: null,
      }, events);
      if (result) {
        publish(result, this.notifier, this.relay);
        this.notifier.notifyCanceled(run.id);
        await this.cancelChildren(run.orgId, run.id);
        return result.run;
      }
      if (attempt >= 5) throw new AppError('internal', `run ${run.id} kept changing while being canceled`);
    }
  }

  /**
   * Cancel the open children of a canceled run (RunLink), depth first. A child that ended
   * meanwhile is left as it is. If this process dies half way, the sweeper finishes the cascade
   * (SweeperReads.orphanedChildren).
   */
  async cancelChildren(orgId: string, runId: string): Promise<void> {
    const children = await this.runs.children(orgId, runId);
    for (const link of children) {
      if (isTerminal(link.other.status)) continue;
      try {
        await this.execute({ orgId, runId: link.childRunId, reason: `parent run ${runId} was canceled` });
      } catch (e) {
        if (!(e instanceof AppError && (e.code === 'run.not_cancelable' || e.code === 'run.not_found'))) throw e;
      }
    }
  }
}
