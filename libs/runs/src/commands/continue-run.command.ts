import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CanonicalMessage } from '#libs/contracts';
import { DispatchRelay } from '../dispatch.relay.js';
import { EventLogRepository } from '../event-log.repository.js';
import { storedBytes, type RunRecord } from '../run-record.js';
import { RunNotifier } from '../run-notifier.js';
import { CommandReads } from '../reads/command-reads.repository.js';
import type { RunState } from '../reads/run-rows.repository.js';
import { ACTIVE_STATUSES } from '../run-state.js';
import { StorageQuotas } from '../storage-quotas.service.js';
import { awaitingInteraction, messageConflict, runNotFound } from '../run-errors.js';
import { admitInput, commitInput, isAnonymousSender, refuseInput, requireSameAnonymousMessage, userMessage } from './command-support.js';

/** More input on a run that is not waiting on an interaction (A2A: a message carrying taskId). */
export interface ContinueRunCommand {
  orgId: string;
  agentId: string;
  runId: string;
  /** When given it must be the run's thread (A2A contextId). */
  threadId?: string;
  message: CanonicalMessage;
  /**
   * Who sends it (`key:<api key id>`, `jwt:<iss>|<sub>`; null = anonymous): its messageId is
   * unique per sender. Absent: the run's owner.
   */
  sentBy?: string | null;
}

/**
 * ContinueRunCommand. One guarded statement: the run must be active, of this agent (and thread),
 * and not blocked on an InteractionRequest; the user's `message.added` and the dispatch of a new
 * execution are recorded with it. A retried message (same sender and messageId, already on this
 * run) has no second effect and returns the run as it is; another sender's same messageId is its
 * own message. Anonymous callers are one sender (''): for them a retry must be the same message.
 * Errors: `run.not_found`, `run.thread_mismatch`, `run.terminal`, `run.awaiting_interaction`
 * (answer it with RespondInteractionCommand), `run.conflict` (messageId used on another run, or —
 * anonymous — on this one with another message or naming another contextId),
 * `org.storage_quota_exceeded` (the message does not fit in the organization's storage quota).
 */
@Injectable()
export class ContinueRunHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly notifier: RunNotifier,
    private readonly relay: DispatchRelay,
    private readonly quotas: StorageQuotas,
  ) {}

  async execute(cmd: ContinueRunCommand): Promise<RunRecord> {
    const message = userMessage(cmd.message);
    const retried = await admitInput(
      () => this.quotas.admit(cmd.orgId, storedBytes([{ type: 'message.added', payload: { message } }])),
      () => recordedOn(this.runs, cmd),
    );
    if (retried) return retried;
    const committed = await commitInput(
      () =>
        this.events.append(
          cmd.orgId,
          cmd.runId,
          { from: ACTIVE_STATUSES, blocked: false, threadId: cmd.threadId, agentId: cmd.agentId },
          [{ type: 'message.added', payload: { message } }],
          { orgId: cmd.orgId, runId: cmd.runId, trigger: 'continued' },
          cmd.sentBy,
        ),
      this.notifier,
      this.relay,
    );
    if (committed) return committed;
    return replayOrRefuse(this.runs, cmd, awaitingInteraction);
  }
}

/**
 * The run when this very message (same sender and messageId) is already on it, else null.
 * `sentBy` absent: the run's owner sent it.
 */
export async function recordedOn(
  runs: CommandReads,
  cmd: { orgId: string; agentId?: string; runId: string; message: CanonicalMessage; sentBy?: string | null },
): Promise<RunRecord | null> {
  const run = await runs.get(cmd.orgId, cmd.runId);
  if (!run || (cmd.agentId !== undefined && run.agentId !== cmd.agentId)) return null;
  return (await seenOn(runs, run, cmd)) === run.id ? run : null;
}

/**
 * The run this sender's messageId is recorded on (null: none). For an anonymous sender, when it
 * is this run, it must be the same message (requireSameAnonymousMessage, `run.conflict` otherwise):
 * anonymous callers share the sender '', so the key alone cannot tell a retry from another caller.
 */
async function seenOn(
  runs: CommandReads,
  run: RunState,
  cmd: { orgId: string; threadId?: string; message: CanonicalMessage; sentBy?: string | null },
): Promise<string | null> {
  const sender = cmd.sentBy !== undefined ? cmd.sentBy : run.createdBy;
  const runId = await runs.findMessageRun(cmd.orgId, run.agentId, sender, cmd.message.messageId);
  if (runId === run.id && isAnonymousSender(sender)) {
    await requireSameAnonymousMessage(runs, { orgId: cmd.orgId, agentId: run.agentId, runId: run.id, runThreadId: run.threadId }, cmd.message, cmd.threadId);
  }
  return runId;
}

/**
 * After a refused or duplicate input: the run as it is when this very message (same sender and
 * messageId) is already on it (a retry: no second effect), else the reason it was refused.
 * `sentBy` absent: the run's owner sent it (as the append path records it).
 */
export async function replayOrRefuse(
  runs: CommandReads,
  cmd: { orgId: string; agentId: string; runId: string; threadId?: string; message: CanonicalMessage; sentBy?: string | null },
  blocked: (run: NonNullable<Awaited<ReturnType<CommandReads['get']>>>) => AppError,
): Promise<RunRecord> {
  const run = await runs.get(cmd.orgId, cmd.runId);
  if (!run || run.agentId !== cmd.agentId) throw runNotFound(cmd.runId);
  const seen = await seenOn(runs, run, cmd);
  if (seen === run.id) return run;
  if (seen) throw messageConflict(cmd.message.messageId);
  throw refuseInput(run, cmd.threadId, () => blocked(run));
}
