import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { RunEvent } from '#libs/contracts';
import { EventLogRepository, type RunRecord } from '../event-log.repository.js';
import { RunNotifier } from '../run-notifier.js';
import { RunRepository } from '../run.repository.js';
import { isTerminal, statusUpdateSources } from '../run-state.js';
import { runNotFound } from './command-support.js';

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
 * CancelRunCommand: `run.status_changed` → canceled, resolving the open interaction (as canceled)
 * in the same append, then a cancellation signal so a running execution stops. A run that ends
 * between the read and the append is reported as it ended.
 * Errors: `run.not_found`; `run.not_cancelable` when the run is already terminal.
 */
@Injectable()
export class CancelRunHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: RunRepository,
    private readonly notifier: RunNotifier,
  ) {}

  async execute(cmd: CancelRunCommand): Promise<RunRecord> {
    for (let attempt = 0; ; attempt++) {
      const run = await this.runs.get(cmd.orgId, cmd.runId);
      if (!run || (cmd.agentId !== undefined && run.agentId !== cmd.agentId)) throw runNotFound(cmd.runId);
      if (isTerminal(run.status)) {
        throw new AppError('run.not_cancelable', `run ${run.id} is ${run.status} and cannot be canceled`, { details: { runId: run.id, status: run.status } });
      }
      const events: RunEvent[] = [];
      if (run.openInteractionId) {
        events.push({ type: 'interaction.resolved', payload: { interactionId: run.openInteractionId, resolution: 'canceled' } });
      }
      events.push({ type: 'run.status_changed', payload: { status: 'canceled', blockedReason: null, reason: cmd.reason ?? 'canceled by the caller' } });
      const result = await this.events.append(run.orgId, run.id, {
        from: statusUpdateSources('canceled'),
        // the interaction read above must still be the open one (else re-read: it changed)
        blocked: run.openInteractionId !== null,
        openInteractionId: run.openInteractionId ?? undefined,
        status: 'canceled',
        blockedReason: null,
      }, events);
      if (result) {
        this.notifier.notify(result.run.id, result.run.lastSequence, result.run);
        this.notifier.notifyCanceled(run.id);
        return result.run;
      }
      if (attempt >= 5) throw new AppError('internal', `run ${run.id} kept changing while being canceled`);
    }
  }
}
