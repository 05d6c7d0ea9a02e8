import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import {
  ArtifactChunkSchema,
  BLOCKED_REASON_BY_KIND,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type InteractionKind,
  type Part,
  JOB_INLINE_INPUT_MAX_BYTES,
  type RunEvent,
  type RunExecuteJob,
  type RunStatus,
  type SequencedOutputEnvelope,
} from '#libs/contracts';
import { AppError } from '#libs/common';
import { PG_UNIQUE_VIOLATION, sqlState } from '#libs/db';
import { EventLogRepository, type AppendGuard, type AppendResult, type RunRecord } from './event-log.repository.js';
import { RunDispatcher } from './run-dispatcher.js';
import { RunNotifier } from './run-notifier.js';
import { RunRepository, type RunState, type RunView } from './run.repository.js';
import { ACTIVE_STATUSES, isSettled, isTerminal, statusUpdateSources } from './run-state.js';

/** A new task: the first user message to an agent's active revision. */
export interface CreateRunCommand {
  orgId: string;
  agentId: string;
  revisionId: string;
  /** A2A contextId given by the client; a new thread when absent. */
  threadId?: string;
  message: CanonicalMessage;
  metadata?: Record<string, unknown>;
}

/** More input on an existing task (A2A: a message carrying taskId). */
export interface ContinueRunCommand {
  orgId: string;
  agentId: string;
  runId: string;
  /** When given it must equal the run's thread (A2A contextId). */
  threadId?: string;
  message: CanonicalMessage;
}

/** The caller's answer to an open InteractionRequest (input, auth, confirmation). */
export type RespondInteractionCommand = ContinueRunCommand;

/** Statuses a runtime may set (canceling is the caller's; submitted is where runs start). */
export type RuntimeStatus = Exclude<RunStatus, 'canceled' | 'submitted'>;

/** One runtime operation, as RunService.applyRuntimeOps takes them (each becomes one event). */
export type RuntimeOp =
  | { op: 'status'; status: RuntimeStatus; message?: AgentMessageDraft; reason?: string }
  | { op: 'interaction'; kind: InteractionKind; message?: AgentMessageDraft; details?: Record<string, unknown> }
  | { op: 'message'; message: AgentMessageDraft }
  | { op: 'artifact'; chunk: ArtifactChunkInput };

/** An agent message as runtimes give it (messageId assigned when absent). */
export interface AgentMessageDraft {
  parts: Part[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}

/** The job's inline context: the run's identity and its (small) input message. */
function jobContext(run: Pick<RunRecord, 'threadId' | 'agentId' | 'revisionId'>, input: CanonicalMessage): RunExecuteJob['context'] {
  if (Buffer.byteLength(JSON.stringify(input)) > JOB_INLINE_INPUT_MAX_BYTES) return undefined;
  return { threadId: run.threadId, agentId: run.agentId, revisionId: run.revisionId, input };
}

function agentMessage(draft: AgentMessageDraft): CanonicalMessage {
  const m: CanonicalMessage = { messageId: draft.messageId ?? randomUUID(), role: 'agent', parts: draft.parts };
  if (draft.metadata) m.metadata = draft.metadata;
  return m;
}

/**
 * Run commands and runtime operations. Every change goes through EventLogRepository (the one
 * append path) and, after commit, a wake-up signal (RunNotifier). Errors are AppErrors:
 * `run.not_found`, `run.terminal`, `run.not_cancelable`, `run.invalid_transition`,
 * `run.conflict`, `run.context_mismatch`.
 */
@Injectable()
export class RunService {
  private readonly log = new Logger(RunService.name);

  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: RunRepository,
    private readonly notifier: RunNotifier,
    private readonly dispatcher: RunDispatcher,
  ) {}

  // ---------------------------------------------------------------- commands (callers)

  /**
   * CreateRunCommand: one round trip to Postgres (run, `run.created`, `message.added` and the
   * message projection in one statement), then one to Redis (the job). A retry with the same
   * messageId returns the run it created (`created: false`) and enqueues nothing.
   */
  async createRun(cmd: CreateRunCommand): Promise<{ run: RunRecord; created: boolean }> {
    const runId = randomUUID();
    const threadId = cmd.threadId ?? randomUUID();
    const message: CanonicalMessage = { ...cmd.message, role: 'user' };
    let result: AppendResult | null;
    try {
      result = await this.events.create(
        { id: runId, orgId: cmd.orgId, agentId: cmd.agentId, revisionId: cmd.revisionId, threadId, originMessageId: message.messageId, metadata: cmd.metadata },
        [
          { type: 'run.created', payload: { runId, threadId, agentId: cmd.agentId, revisionId: cmd.revisionId, status: 'submitted' } },
          { type: 'message.added', payload: { message } },
        ],
      );
    } catch (e) {
      if (sqlState(e) === PG_UNIQUE_VIOLATION) {
        throw new AppError('run.conflict', `messageId ${message.messageId} was already used on another task`, { cause: e });
      }
      throw e;
    }
    if (!result) {
      const existing = await this.runs.findByOriginMessage(cmd.orgId, cmd.agentId, message.messageId);
      if (!existing) throw new AppError('internal', 'run vanished after an idempotent create');
      return { run: existing, created: false };
    }
    // No wake-up: nobody can follow a run whose id has not been returned yet.
    await this.dispatcher.dispatch(
      { orgId: cmd.orgId, runId, trigger: 'created', inputMessageId: message.messageId, context: jobContext(result.run, message) },
      2,
    );
    return { run: result.run, created: true };
  }

  /**
   * ContinueRunCommand: add the caller's message to a non-terminal run. When the run is blocked
   * on an InteractionRequest this is its answer (RespondInteractionCommand). A retried message
   * (same messageId on the same run) has no second effect.
   */
  async continueRun(cmd: ContinueRunCommand): Promise<RunRecord> {
    const run = await this.requireRun(cmd.orgId, cmd.runId, cmd.agentId);
    if (cmd.threadId !== undefined && cmd.threadId !== run.threadId) {
      throw new AppError('run.context_mismatch', `contextId ${cmd.threadId} is not the task's contextId`, {
        details: { taskId: run.id, contextId: run.threadId },
      });
    }
    const seenOn = await this.runs.findMessageRun(cmd.orgId, cmd.agentId, cmd.message.messageId);
    if (seenOn === run.id) return run;
    if (seenOn) throw new AppError('run.conflict', `messageId ${cmd.message.messageId} was already used on another task`);
    if (isTerminal(run.status)) {
      throw new AppError('run.terminal', `task ${run.id} is ${run.status} and accepts no more messages`, { details: { taskId: run.id, status: run.status } });
    }
    try {
      return await (run.openInteractionId ? this.respondInteraction(cmd, run) : this.appendInput(cmd, run));
    } catch (e) {
      // a concurrent retry of this very message won the race: it was recorded once, on this run
      if (e instanceof AppError && e.code === 'run.conflict' && (await this.runs.findMessageRun(cmd.orgId, cmd.agentId, cmd.message.messageId)) === run.id) {
        return this.requireRun(cmd.orgId, run.id);
      }
      throw e;
    }
  }

  /** RespondInteractionCommand: resolve the open interaction with the caller's message. */
  async respondInteraction(cmd: RespondInteractionCommand, known?: RunState): Promise<RunRecord> {
    const run = known ?? (await this.requireRun(cmd.orgId, cmd.runId, cmd.agentId));
    if (!run.openInteractionId) return this.appendInput(cmd, run);
    const message: CanonicalMessage = { ...cmd.message, role: 'user' };
    const result = await this.appendOrExplain(run, { from: ACTIVE_STATUSES, blocked: true, blockedReason: null }, [
      { type: 'message.added', payload: { message } },
      { type: 'interaction.resolved', payload: { interactionId: run.openInteractionId, resolution: 'answered', messageId: message.messageId } },
    ], 'run.terminal');
    const seq = result.envelopes[0]!.sequence;
    await this.dispatcher.dispatch({ orgId: run.orgId, runId: run.id, trigger: 'continued', inputMessageId: message.messageId, context: jobContext(run, message) }, seq);
    return result.run;
  }

  private async appendInput(cmd: ContinueRunCommand, run: RunState): Promise<RunRecord> {
    const message: CanonicalMessage = { ...cmd.message, role: 'user' };
    const result = await this.appendOrExplain(run, { from: ACTIVE_STATUSES }, [{ type: 'message.added', payload: { message } }], 'run.terminal');
    await this.dispatcher.dispatch(
      { orgId: run.orgId, runId: run.id, trigger: 'continued', inputMessageId: message.messageId, context: jobContext(run, message) },
      result.envelopes[0]!.sequence,
    );
    return result.run;
  }

  /**
   * Cancel a run (A2A CancelTask). An open interaction is resolved as canceled in the same append.
   * Errors: `run.not_found`; `run.not_cancelable` when the run is already terminal.
   */
  async cancelRun(orgId: string, runId: string, agentId?: string): Promise<RunRecord> {
    const run = await this.requireRun(orgId, runId, agentId);
    if (isTerminal(run.status)) {
      throw new AppError('run.not_cancelable', `task ${run.id} is ${run.status} and cannot be canceled`, { details: { taskId: run.id, status: run.status } });
    }
    const events: RunEvent[] = [];
    if (run.openInteractionId) {
      events.push({ type: 'interaction.resolved', payload: { interactionId: run.openInteractionId, resolution: 'canceled' } });
    }
    events.push({ type: 'run.status_changed', payload: { status: 'canceled', blockedReason: null, reason: 'canceled by the caller' } });
    const result = await this.appendOrExplain(run, { from: statusUpdateSources('canceled'), status: 'canceled', blockedReason: null }, events, 'run.not_cancelable');
    this.notifier.notifyCanceled(run.id);
    return result.run;
  }

  // ---------------------------------------------------------------- runtime operations

  /** Move a run to `status` (runtimes never cancel). Errors: `run.terminal`, `run.invalid_transition`. */
  async setStatus(orgId: string, runId: string, status: RuntimeStatus, opts: { message?: AgentMessageDraft; reason?: string } = {}): Promise<RunRecord> {
    return this.applyRuntimeOps(orgId, runId, [{ op: 'status', status, ...opts }]);
  }

  /** Block the run on its caller. Errors: `run.terminal`, `run.invalid_transition` (already blocked). */
  async requestInteraction(orgId: string, runId: string, kind: InteractionKind, opts: { message?: AgentMessageDraft; details?: Record<string, unknown> } = {}): Promise<RunRecord> {
    return this.applyRuntimeOps(orgId, runId, [{ op: 'interaction', kind, ...opts }]);
  }

  async emitMessage(orgId: string, runId: string, draft: AgentMessageDraft): Promise<RunRecord> {
    return this.applyRuntimeOps(orgId, runId, [{ op: 'message', message: draft }]);
  }

  async emitArtifact(orgId: string, runId: string, chunk: ArtifactChunkInput): Promise<RunRecord> {
    return this.applyRuntimeOps(orgId, runId, [{ op: 'artifact', chunk }]);
  }

  /**
   * Apply several runtime operations in order as ONE append (one statement, one commit): each op
   * becomes one event with its own sequence. The guard is the batch's: the run must be active
   * (and not blocked, when the batch opens an interaction); the final status / blocked reason are
   * the last ones the batch sets. Ops after a terminal status or an interaction are refused
   * (`run.invalid_transition`), as are two artifact chunks in one batch (the projection takes one
   * per statement) — callers flush before those.
   * Errors: `run.terminal`, `run.invalid_transition`, `run.not_found`.
   */
  async applyRuntimeOps(orgId: string, runId: string, ops: readonly RuntimeOp[]): Promise<RunRecord> {
    if (ops.length === 0) throw new Error('applyRuntimeOps needs at least one op');
    const events: RunEvent[] = [];
    const guard: AppendGuard = { from: ACTIVE_STATUSES };
    let closed = false;
    let artifacts = 0;
    for (const op of ops) {
      if (closed) throw new AppError('run.invalid_transition', `task ${runId}: no runtime operation may follow a terminal status or an interaction in one batch`);
      switch (op.op) {
        case 'status': {
          const payload: Extract<RunEvent, { type: 'run.status_changed' }>['payload'] = { status: op.status, blockedReason: null };
          if (op.message) payload.message = agentMessage(op.message);
          if (op.reason) payload.reason = op.reason;
          events.push({ type: 'run.status_changed', payload });
          if (guard.status === undefined) guard.from = statusUpdateSources(op.status);
          guard.status = op.status;
          guard.blockedReason = null;
          closed = isTerminal(op.status);
          break;
        }
        case 'interaction': {
          const blockedReason = BLOCKED_REASON_BY_KIND[op.kind];
          const payload: Extract<RunEvent, { type: 'interaction.requested' }>['payload'] = { interactionId: randomUUID(), kind: op.kind, blockedReason };
          if (op.message) payload.message = agentMessage(op.message);
          if (op.details) payload.details = op.details;
          events.push({ type: 'interaction.requested', payload });
          guard.blocked = false;
          guard.status = 'working';
          guard.blockedReason = blockedReason;
          closed = true;
          break;
        }
        case 'message':
          events.push({ type: 'message.added', payload: { message: agentMessage(op.message) } });
          break;
        case 'artifact':
          if (++artifacts > 1) throw new AppError('run.invalid_transition', 'one artifact chunk per batch');
          events.push({ type: 'artifact.updated', payload: ArtifactChunkSchema.parse(op.chunk) });
          break;
      }
    }
    return (await this.appendGuarded(orgId, runId, guard, events)).run;
  }

  /** Fail a run for a platform reason (lost worker, runtime crash). No-op when already terminal. */
  async failRun(orgId: string, runId: string, reason: string): Promise<RunRecord | null> {
    try {
      return await this.setStatus(orgId, runId, 'failed', { reason, message: { parts: [{ text: `The task failed: ${reason}` }] } });
    } catch (e) {
      if (e instanceof AppError && (e.code === 'run.terminal' || e.code === 'run.not_found')) return null;
      throw e;
    }
  }

  // ---------------------------------------------------------------- reads

  getRun(orgId: string, runId: string): Promise<RunState | null> {
    return this.runs.get(orgId, runId);
  }

  /** Errors: `run.not_found` (also when the run belongs to another agent than `agentId`). */
  async requireRun(orgId: string, runId: string, agentId?: string): Promise<RunState> {
    const run = await this.runs.get(orgId, runId);
    if (!run || (agentId !== undefined && run.agentId !== agentId)) {
      throw new AppError('run.not_found', `task ${runId} not found`, { details: { taskId: runId } });
    }
    return run;
  }

  async view(orgId: string, runId: string, opts: { historyLength?: number; includeArtifacts?: boolean; agentId?: string } = {}): Promise<RunView> {
    const view = await this.runs.view(orgId, runId, opts);
    if (!view || (opts.agentId !== undefined && view.run.agentId !== opts.agentId)) {
      throw new AppError('run.not_found', `task ${runId} not found`, { details: { taskId: runId } });
    }
    return view;
  }

  /** (status, blockedReason) of a run as of `sequence` (see RunRepository.stateAt). */
  stateAt(orgId: string, runId: string, sequence: number) {
    return this.runs.stateAt(orgId, runId, sequence);
  }

  readEvents(orgId: string, runId: string, afterSequence: number, limit?: number): Promise<SequencedOutputEnvelope[]> {
    return this.events.readAfter(orgId, runId, afterSequence, limit);
  }

  /**
   * Wait until the run is settled (terminal, or blocked on its caller) or `timeoutMs` passes;
   * returns the run as it is then. Woken by RunNotifier, with a poll as the safety net for lost
   * wake-ups.
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

  // ---------------------------------------------------------------- internals

  private async appendGuarded(orgId: string, runId: string, guard: AppendGuard, events: RunEvent[]): Promise<AppendResult> {
    const result = await this.events.append(orgId, runId, guard, events);
    if (result) {
      this.committed(result);
      return result;
    }
    const run = await this.requireRun(orgId, runId);
    throw this.explain(run, guard, 'run.terminal');
  }

  private async appendOrExplain(run: RunState, guard: AppendGuard, events: RunEvent[], terminalCode: 'run.terminal' | 'run.not_cancelable'): Promise<AppendResult> {
    try {
      const result = await this.events.append(run.orgId, run.id, guard, events);
      if (result) {
        this.committed(result);
        return result;
      }
    } catch (e) {
      // a concurrent retry of the same message won the race: the message is recorded once
      if (sqlState(e) === PG_UNIQUE_VIOLATION) throw new AppError('run.conflict', 'messageId was already used', { cause: e });
      throw e;
    }
    const now = await this.requireRun(run.orgId, run.id);
    throw this.explain(now, guard, terminalCode);
  }

  private explain(run: RunState, guard: AppendGuard, terminalCode: 'run.terminal' | 'run.not_cancelable'): AppError {
    if (isTerminal(run.status)) {
      return new AppError(terminalCode, `task ${run.id} is ${run.status}`, { details: { taskId: run.id, status: run.status } });
    }
    return new AppError('run.invalid_transition', `task ${run.id} cannot do that while ${run.status}${run.blockedReason ? ` (${run.blockedReason})` : ''}`, {
      details: { taskId: run.id, status: run.status, blockedReason: run.blockedReason, wanted: guard.status ?? null },
    });
  }

  private committed(result: AppendResult): void {
    this.notifier.notify(result.run.id, result.run.lastSequence);
  }
}
