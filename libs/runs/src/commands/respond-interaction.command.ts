import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CanonicalMessage } from '#libs/contracts';
import { DispatchRelay } from '../dispatch.relay.js';
import { EventLogRepository, type RunRecord } from '../event-log.repository.js';
import { RunNotifier } from '../run-notifier.js';
import { RunRepository } from '../run.repository.js';
import { ACTIVE_STATUSES } from '../run-state.js';
import { commitInput, userMessage } from './command-support.js';
import { replayOrRefuse } from './continue-run.command.js';

/** The caller's answer to an open InteractionRequest (input, auth, confirmation). */
export interface RespondInteractionCommand {
  orgId: string;
  agentId: string;
  runId: string;
  /** The InteractionRequest answered; it must be open on the run. */
  interactionId: string;
  /** When given it must be the run's thread (A2A contextId). */
  threadId?: string;
  /** The answer; its messageId makes the command idempotent. */
  message: CanonicalMessage;
}

/**
 * RespondInteractionCommand. One guarded statement: the run must be active, of this agent (and
 * thread), and the interaction open; it records the answer (`message.added`), resolves the
 * interaction (`interaction.resolved`, resolution `answered`, clearing `blockedReason`) and the
 * dispatch of the execution that continues with it. A duplicate answer (same messageId) has no
 * second effect.
 * Errors: `run.not_found`, `run.thread_mismatch`, `run.terminal`, `interaction.not_open`,
 * `run.conflict`.
 */
@Injectable()
export class RespondInteractionHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: RunRepository,
    private readonly notifier: RunNotifier,
    private readonly relay: DispatchRelay,
  ) {}

  async execute(cmd: RespondInteractionCommand): Promise<RunRecord> {
    const message = userMessage(cmd.message);
    const committed = await commitInput(
      () =>
        this.events.append(
          cmd.orgId,
          cmd.runId,
          { from: ACTIVE_STATUSES, blocked: true, openInteractionId: cmd.interactionId, threadId: cmd.threadId, agentId: cmd.agentId, blockedReason: null },
          [
            { type: 'message.added', payload: { message } },
            { type: 'interaction.resolved', payload: { interactionId: cmd.interactionId, resolution: 'answered', messageId: message.messageId } },
          ],
          { orgId: cmd.orgId, runId: cmd.runId, trigger: 'continued' },
        ),
      this.notifier,
      this.relay,
    );
    if (committed) return committed;
    return replayOrRefuse(this.runs, cmd, (run) =>
      new AppError('interaction.not_open', `interaction ${cmd.interactionId} of run ${run.id} is not open`, {
        details: { runId: run.id, interactionId: cmd.interactionId },
      }),
    );
  }
}
