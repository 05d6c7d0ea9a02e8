import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CanonicalMessage, Part } from '#libs/contracts';
import { EventLogRepository, type CreatedRun } from '../event-log.repository.js';
import type { RunRecord } from '../run-record.js';
import { CommandReads } from '../reads/command-reads.repository.js';
import { StorageQuotas } from '../storage-quotas.service.js';
import { messageConflict, runConflict } from '../run-errors.js';
import { isAnonymousSender, prepareNewRun, requireSameAnonymousMessage, sameMessage } from './command-support.js';

/**
 * A direct reply: the caller's first message to an agent, answered by the runtime on the spot with
 * `reply` (A2A: SendMessage without taskId answered with a Message, A2A v1.0 §3.1.1).
 */
export interface RecordReplyCommand {
  orgId: string;
  agentId: string;
  revisionId: string;
  /** The thread (A2A contextId) the exchange joins; a new thread when absent. */
  threadId?: string;
  /** The caller's message; its messageId makes the command idempotent per (org, agent, createdBy). */
  message: CanonicalMessage;
  /** The runtime's answer (`messageId` assigned when absent). */
  reply: { parts: Part[]; messageId?: string; metadata?: Record<string, unknown> };
  metadata?: Record<string, unknown>;
  /** The principal sending (`key:<api key id>`, `jwt:<iss>|<sub>`); absent = anonymous. Part of the idempotency key. */
  createdBy?: string | null;
  /** A2A extensions the request activated (recorded in `run.created`). */
  extensions?: string[];
}

/** The agent's reply as the log holds it: the message and the sequence of the event carrying it. */
export interface RecordedReply {
  message: CanonicalMessage;
  /** Its event's sequence in the run's log (the A2A stream's event id). */
  sequence: number;
}

export interface RecordReplyResult {
  run: RunRecord;
  /**
   * The reply (for a retry: the one recorded first). Null when the caller's messageId had created
   * an `execution` run earlier (the agent's rules changed meanwhile): `run` is that run.
   */
  reply: RecordedReply | null;
  /** false: a retry — nothing was written. */
  created: boolean;
}

/**
 * RecordReplyCommand: the exchange is a run of kind `reply`, recorded complete in ONE statement,
 * group-committed with the creations in flight (EventLogRepository.create, the same statement as
 * CreateRunCommand's): the run row (status completed, `ended_at` set), `run.created` (1, kind
 * reply), the user's `message.added` (2), `run.status_changed` → completed carrying the agent's
 * reply (3), and their message projection. No dispatch (nothing executes it), no wake-up (nobody
 * can follow a run whose id was never returned); the run is terminal, so the append guard refuses
 * anything after it. Its messages are in the thread's history like any run's.
 *
 * Idempotent per caller, like CreateRunCommand (unique run on (org, agent, createdBy, messageId)):
 * the same message again returns the reply recorded first, with its thread (`created: false`, one
 * read); a run of kind `execution` created by that messageId is returned as it is (`reply: null`).
 * Errors: `run.conflict` when the messageId was recorded with other content (parts, metadata,
 * extensions, referenced tasks) or in another thread than `threadId` — for an anonymous caller
 * whatever the kind of the run it created — when the caller already used it on another run (e.g.
 * as a follow-up message); `org.storage_quota_exceeded` when the caller's
 * message does not fit in the organization's storage quota (the agent's reply is output, never
 * refused; a retry of a recorded exchange still returns it). The agent's reply messageId is unique
 * within its run only, so it never conflicts (the run is new).
 */
@Injectable()
export class RecordReplyHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly quotas: StorageQuotas,
  ) {}

  async execute(cmd: RecordReplyCommand): Promise<RecordReplyResult> {
    const { input, retried } = await prepareNewRun(this.quotas, cmd, (message) => this.recorded(cmd, message));
    if (retried) return retried;
    const { runId, threadId, message } = input;
    const reply: CanonicalMessage = { messageId: cmd.reply.messageId ?? randomUUID(), role: 'agent', parts: cmd.reply.parts };
    if (cmd.reply.metadata) reply.metadata = cmd.reply.metadata;
    let created: CreatedRun | null;
    try {
      created = await this.events.create({
        run: { id: runId, orgId: cmd.orgId, agentId: cmd.agentId, revisionId: cmd.revisionId, threadId, originMessageId: message.messageId, metadata: cmd.metadata, createdBy: cmd.createdBy ?? null, kind: 'reply' },
        events: [
          { type: 'run.created', payload: { runId, threadId, agentId: cmd.agentId, revisionId: cmd.revisionId, status: 'submitted', kind: 'reply', ...(cmd.extensions?.length ? { extensions: cmd.extensions } : {}) } },
          { type: 'message.added', payload: { message } },
          { type: 'run.status_changed', payload: { status: 'completed', blockedReason: null, message: reply } },
        ],
      });
    } catch (e) {
      if (!(e instanceof AppError && e.code === 'run.duplicate_message')) throw e;
      // the caller's messageId is on another run: the only key a new reply run can collide on (the
      // agent's reply is unique per run, and this run is new; docs/architecture.md "The log's partitions")
      throw messageConflict(message.messageId);
    }
    if (!created) {
      const existing = await this.recorded(cmd, message);
      if (!existing) throw new AppError('internal', 'run vanished after an idempotent create');
      return existing;
    }
    return { run: created.run, reply: { message: reply, sequence: created.run.lastSequence }, created: true };
  }

  /**
   * What the caller's messageId recorded before, checked against this command: the reply of a
   * `reply` run (conflict when the content or the thread differ), or the `execution` run as it is.
   * Null when nothing was recorded.
   */
  private async recorded(cmd: RecordReplyCommand, message: CanonicalMessage): Promise<RecordReplyResult | null> {
    const run = await this.runs.findByOriginMessage(cmd.orgId, cmd.agentId, cmd.createdBy ?? null, message.messageId);
    if (!run) return null;
    // anonymous callers share one owner: the same message, or another caller's (either kind of run)
    if (isAnonymousSender(cmd.createdBy ?? null)) {
      await requireSameAnonymousMessage(this.runs, { orgId: cmd.orgId, agentId: cmd.agentId, runId: run.id, runThreadId: run.threadId }, message, cmd.threadId);
    }
    if (run.kind !== 'reply') return { run, reply: null, created: false };
    const view = await this.runs.view(cmd.orgId, run.id);
    const sent = view?.history.find((m) => m.role === 'user' && m.messageId === message.messageId);
    if (!view?.statusMessage || !sent) throw new AppError('internal', `reply run ${run.id} has no recorded exchange`);
    if (!sameMessage(sent, message) || (cmd.threadId !== undefined && cmd.threadId !== run.threadId)) {
      throw runConflict(`messageId ${message.messageId} was already used with other content`, { messageId: message.messageId });
    }
    return { run, reply: { message: view.statusMessage, sequence: run.lastSequence }, created: false };
  }
}
