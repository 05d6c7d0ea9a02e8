import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CanonicalMessage } from '#libs/contracts';
import { DispatchRelay } from '../dispatch.relay.js';
import { EventLogRepository, type RunRecord } from '../event-log.repository.js';
import { RunNotifier } from '../run-notifier.js';
import { RunRepository } from '../run.repository.js';
import { ACTIVE_STATUSES } from '../run-state.js';
import { commitInput, messageConflict, refuseInput, runNotFound, userMessage } from './command-support.js';

/** More input on a run that is not waiting on an interaction (A2A: a message carrying taskId). */
export interface ContinueRunCommand {
  orgId: string;
  agentId: string;
  runId: string;
  /** When given it must be the run's thread (A2A contextId). */
  threadId?: string;
  message: CanonicalMessage;
}

/**
 * ContinueRunCommand. One guarded statement: the run must be active, of this agent (and thread),
 * and not blocked on an InteractionRequest; the user's `message.added` and the dispatch of a new
 * execution are recorded with it. A retried message (same messageId, already on this run) has no
 * second effect and returns the run as it is.
 * Errors: `run.not_found`, `run.thread_mismatch`, `run.terminal`, `run.awaiting_interaction`
 * (answer it with RespondInteractionCommand), `run.conflict` (messageId used on another run).
 */
@Injectable()
export class ContinueRunHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: RunRepository,
    private readonly notifier: RunNotifier,
    private readonly relay: DispatchRelay,
  ) {}

  async execute(cmd: ContinueRunCommand): Promise<RunRecord> {
    const message = userMessage(cmd.message);
    const committed = await commitInput(
      () =>
        this.events.append(
          cmd.orgId,
          cmd.runId,
          { from: ACTIVE_STATUSES, blocked: false, threadId: cmd.threadId, agentId: cmd.agentId },
          [{ type: 'message.added', payload: { message } }],
          { orgId: cmd.orgId, runId: cmd.runId, trigger: 'continued' },
        ),
      this.notifier,
      this.relay,
    );
    if (committed) return committed;
    return replayOrRefuse(this.runs, cmd, (run) =>
      new AppError('run.awaiting_interaction', `run ${run.id} is waiting on interaction ${run.openInteractionId}`, {
        details: { runId: run.id, interactionId: run.openInteractionId ?? '', blockedReason: run.blockedReason ?? '' },
      }),
    );
  }
}

/**
 * After a refused or duplicate input: the run as it is when this very message is already on it
 * (a retry: no second effect), else the reason it was refused.
 */
export async function replayOrRefuse(
  runs: RunRepository,
  cmd: { orgId: string; agentId: string; runId: string; threadId?: string; message: CanonicalMessage },
  blocked: (run: NonNullable<Awaited<ReturnType<RunRepository['get']>>>) => AppError,
): Promise<RunRecord> {
  const [run, seenOn] = await Promise.all([runs.get(cmd.orgId, cmd.runId), runs.findMessageRun(cmd.orgId, cmd.agentId, cmd.message.messageId)]);
  if (!run || run.agentId !== cmd.agentId) throw runNotFound(cmd.runId);
  if (seenOn === run.id) return run;
  if (seenOn) throw messageConflict(cmd.message.messageId);
  throw refuseInput(run, cmd.threadId, () => blocked(run));
}
