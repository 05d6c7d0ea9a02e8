import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { JOB_INLINE_EXTENSIONS_MAX, JOB_INLINE_INPUT_MAX_BYTES, type CanonicalMessage, type RunExecuteJob } from '#libs/contracts';
import { injectTrace } from '#libs/telemetry';
import { DispatchRelay } from '../dispatch.relay.js';
import { EventLogRepository, type CreatedRun } from '../event-log.repository.js';
import type { RunRecord } from '../run-record.js';
import type { RunState } from '../reads/run-rows.repository.js';
import { CommandReads } from '../reads/command-reads.repository.js';
import { StorageQuotas } from '../storage-quotas.service.js';
import { messageConflict } from '../run-errors.js';
import { isAnonymousSender, prepareNewRun, requireSameAnonymousMessage } from './command-support.js';

/** A new run: the first user message to an agent's active revision (A2A: SendMessage without taskId). */
export interface CreateRunCommand {
  orgId: string;
  agentId: string;
  revisionId: string;
  /** The thread (A2A contextId) the run joins; a new thread when absent. */
  threadId?: string;
  /** The caller's message; its messageId makes the command idempotent per (org, agent, createdBy). */
  message: CanonicalMessage;
  metadata?: Record<string, unknown>;
  /**
   * The principal creating it (`key:<api key id>`, `jwt:<iss>|<sub>`): the task's owner; absent =
   * anonymous. Part of the idempotency key: another caller's same messageId creates its own run.
   */
  createdBy?: string | null;
  /** A2A extensions the request activated (recorded in `run.created`). */
  extensions?: string[];
}

export interface CreateRunResult {
  run: RunRecord;
  /** false: a retry — the run this caller's messageId created earlier, unchanged. */
  created: boolean;
  /** When created: the user's message as appended (`message.added`, sequence 2; its history so far). */
  message?: CanonicalMessage;
}

/**
 * CreateRunCommand. One statement (group-committed with concurrent creations): the run in
 * `submitted`, `run.created` (1), the user's `message.added` (2), the message projection and the
 * run's dispatch in the outbox. The committed dispatch is handed to the relay; nothing waits on Redis.
 * No wake-up is published: nobody can follow a run whose id has not been returned yet.
 * Idempotent per caller: the same (org, agent, createdBy, messageId) returns the run it created
 * (`created: false`); the same messageId from another caller is another run. Anonymous callers
 * share one owner (''), so for them a retry must be the same message too (requireSameAnonymousMessage).
 * Errors: `run.conflict` when the caller already used the messageId on another run of the agent
 * (e.g. as a follow-up message), or — anonymous — with another message or naming another contextId;
 * `org.storage_quota_exceeded` when the message does not fit in the organization's storage quota
 * (a retry of a created run still returns it).
 */
@Injectable()
export class CreateRunHandler {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: CommandReads,
    private readonly relay: DispatchRelay,
    private readonly quotas: StorageQuotas,
  ) {}

  async execute(cmd: CreateRunCommand): Promise<CreateRunResult> {
    const { input, retried } = await prepareNewRun(this.quotas, cmd, (message) => this.retried(cmd, message));
    if (retried) return { run: retried, created: false };
    const { runId, threadId, message, bytes } = input;
    const inline = bytes <= JOB_INLINE_INPUT_MAX_BYTES;
    // with the trace context when tracing: the outbox row and the relay's fast path carry the same job
    const dispatch: RunExecuteJob = injectTrace({
      orgId: cmd.orgId,
      runId,
      trigger: 'created',
      inputMessageId: message.messageId,
      // the extensions `run.created` records ride along ([] for none), so a runtime that asks needs no read
      ...(inline ? { context: { threadId, agentId: cmd.agentId, revisionId: cmd.revisionId, input: message, ...inlineExtensions(cmd.extensions) } } : {}),
    });
    let created: CreatedRun | null;
    try {
      created = await this.events.create({
        run: { id: runId, orgId: cmd.orgId, agentId: cmd.agentId, revisionId: cmd.revisionId, threadId, originMessageId: message.messageId, metadata: cmd.metadata, createdBy: cmd.createdBy ?? null },
        events: [
          { type: 'run.created', payload: { runId, threadId, agentId: cmd.agentId, revisionId: cmd.revisionId, status: 'submitted', ...(cmd.extensions?.length ? { extensions: cmd.extensions } : {}) } },
          { type: 'message.added', payload: { message } },
        ],
        dispatch,
      });
    } catch (e) {
      if (e instanceof AppError && e.code === 'run.duplicate_message') throw messageConflict(message.messageId);
      throw e;
    }
    if (!created) {
      const existing = await this.retried(cmd, message);
      if (!existing) throw new AppError('internal', 'run vanished after an idempotent create');
      return { run: existing, created: false };
    }
    if (created.dispatch) this.relay.relay({ ...created.dispatch, job: dispatch });
    return { run: created.run, created: true, message };
  }

  /** The run this caller's messageId created, if any; an anonymous caller's only when it is the same message (else `run.conflict`). */
  private async retried(cmd: CreateRunCommand, message: CanonicalMessage): Promise<RunState | null> {
    const run = await this.runs.findByOriginMessage(cmd.orgId, cmd.agentId, cmd.createdBy ?? null, message.messageId);
    if (run && isAnonymousSender(cmd.createdBy ?? null)) {
      await requireSameAnonymousMessage(this.runs, { orgId: cmd.orgId, agentId: cmd.agentId, runId: run.id, runThreadId: run.threadId }, message, cmd.threadId);
    }
    return run;
  }
}

/** The activated extensions as a job's `context` carries them: all of them, or none when too many (the worker reads them). */
function inlineExtensions(extensions: readonly string[] | undefined): { extensions?: string[] } {
  const list = extensions ?? [];
  return list.length <= JOB_INLINE_EXTENSIONS_MAX ? { extensions: [...list] } : {};
}
