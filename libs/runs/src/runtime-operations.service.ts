import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import {
  ArtifactChunkSchema,
  BLOCKED_REASON_BY_KIND,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type InteractionKind,
  type Part,
  type RunEvent,
  type RunStatus,
} from '#libs/contracts';
import { runNotFound } from './commands/command-support.js';
import { EventLogRepository, type AppendGuard, type RunRecord } from './event-log.repository.js';
import { RunLeaseRepository } from './run-lease.repository.js';
import { RunNotifier } from './run-notifier.js';
import { RunRepository, type RunState } from './run.repository.js';
import { ACTIVE_STATUSES, isTerminal, statusUpdateSources } from './run-state.js';

/** Statuses a runtime may set (canceling is the caller's; submitted is where runs start). */
export type RuntimeStatus = Exclude<RunStatus, 'canceled' | 'submitted'>;

/** An agent message as runtimes give it (messageId assigned when absent). */
export interface AgentMessageDraft {
  parts: Part[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}

/** One runtime operation, as RuntimeOperations.apply takes them (each becomes one event). */
export type RuntimeOp =
  | { op: 'status'; status: RuntimeStatus; message?: AgentMessageDraft; reason?: string }
  | { op: 'interaction'; kind: InteractionKind; message?: AgentMessageDraft; details?: Record<string, unknown> }
  | { op: 'message'; message: AgentMessageDraft }
  | { op: 'artifact'; chunk: ArtifactChunkInput };

function agentMessage(draft: AgentMessageDraft): CanonicalMessage {
  const m: CanonicalMessage = { messageId: draft.messageId ?? randomUUID(), role: 'agent', parts: draft.parts };
  if (draft.metadata) m.metadata = draft.metadata;
  return m;
}

/**
 * What an executing runtime does to its run: status changes, agent messages, artifacts and
 * interaction requests — each one event through the append path, guarded by the run state
 * machine, followed by a wake-up. Errors: `run.not_found`, `run.terminal` (the run ended, e.g.
 * canceled meanwhile: the runtime should stop), `run.invalid_transition`.
 */
@Injectable()
export class RuntimeOperations {
  constructor(
    private readonly events: EventLogRepository,
    private readonly runs: RunRepository,
    private readonly notifier: RunNotifier,
    private readonly leases: RunLeaseRepository,
  ) {}

  /**
   * An execution's heartbeat: take or renew its lease on the run for `triggerSequence` until
   * now + `ttlMs` (ms), and return the run's status (terminal: the execution should stop). Null
   * when the run is gone. Writes no event (a lease is not run state).
   */
  heartbeat(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number): Promise<RunStatus | null> {
    return this.leases.renew(orgId, runId, owner, triggerSequence, ttlMs);
  }

  /** Move a run to `status` (runtimes never cancel). */
  setStatus(orgId: string, runId: string, status: RuntimeStatus, opts: { message?: AgentMessageDraft; reason?: string } = {}): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'status', status, ...opts }]);
  }

  /** Block the run on its caller. `run.invalid_transition` when it is blocked already. */
  requestInteraction(orgId: string, runId: string, kind: InteractionKind, opts: { message?: AgentMessageDraft; details?: Record<string, unknown> } = {}): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'interaction', kind, ...opts }]);
  }

  emitMessage(orgId: string, runId: string, draft: AgentMessageDraft): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'message', message: draft }]);
  }

  emitArtifact(orgId: string, runId: string, chunk: ArtifactChunkInput): Promise<RunRecord> {
    return this.apply(orgId, runId, [{ op: 'artifact', chunk }]);
  }

  /**
   * Apply several runtime operations in order as ONE append (one statement, one commit): each op
   * becomes one event with its own sequence. The guard is the batch's: the run must be active
   * (and not blocked on its caller, when the batch changes the status or opens an interaction:
   * a blocked run moves only through its interaction); the final status / blocked reason are
   * the last ones the batch sets. Ops after a terminal status or an interaction are refused
   * (`run.invalid_transition`), as are two artifact chunks in one batch (the projection takes one
   * per statement) — callers flush before those.
   */
  async apply(orgId: string, runId: string, ops: readonly RuntimeOp[]): Promise<RunRecord> {
    if (ops.length === 0) throw new Error('apply needs at least one op');
    const events: RunEvent[] = [];
    const guard: AppendGuard = { from: ACTIVE_STATUSES };
    let closed = false;
    let artifacts = 0;
    for (const op of ops) {
      if (closed) throw new AppError('run.invalid_transition', `run ${runId}: no runtime operation may follow a terminal status or an interaction in one batch`, { details: { runId } });
      switch (op.op) {
        case 'status': {
          const payload: Extract<RunEvent, { type: 'run.status_changed' }>['payload'] = { status: op.status, blockedReason: null };
          if (op.message) payload.message = agentMessage(op.message);
          if (op.reason) payload.reason = op.reason;
          events.push({ type: 'run.status_changed', payload });
          // a run blocked on its caller changes status only through its interaction (answer,
          // expiry, cancel): that keeps the overlay and the open InteractionRequest in step
          guard.blocked = false;
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
          if (++artifacts > 1) throw new AppError('run.invalid_transition', 'one artifact chunk per batch', { details: { runId } });
          events.push({ type: 'artifact.updated', payload: ArtifactChunkSchema.parse(op.chunk) });
          break;
      }
    }
    let result;
    try {
      result = await this.events.append(orgId, runId, guard, events);
    } catch (e) {
      if (e instanceof AppError && e.code === 'run.duplicate_message') {
        throw new AppError('run.conflict', `run ${runId}: an agent messageId is already recorded`, { details: { runId }, cause: e });
      }
      throw e;
    }
    if (result) {
      this.notifier.notify(result.run.id, result.run.lastSequence, result.run);
      return result.run;
    }
    const run = await this.runs.get(orgId, runId);
    if (!run) throw runNotFound(runId);
    throw refusal(run, guard);
  }

  /**
   * Fail a run for a platform reason (lost worker, runtime crash, expiry). An open interaction is
   * resolved as canceled in the same append. Null when already terminal or gone.
   */
  async failRun(orgId: string, runId: string, reason: string): Promise<RunRecord | null> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const run = await this.runs.get(orgId, runId);
      if (!run || isTerminal(run.status)) return null;
      const events: RunEvent[] = [];
      if (run.openInteractionId) {
        events.push({ type: 'interaction.resolved', payload: { interactionId: run.openInteractionId, resolution: 'canceled' } });
      }
      events.push({
        type: 'run.status_changed',
        payload: { status: 'failed', blockedReason: null, reason, message: agentMessage({ parts: [{ text: `Failed: ${reason}` }] }) },
      });
      const result = await this.events.append(orgId, runId, {
        from: statusUpdateSources('failed'),
        blocked: run.openInteractionId !== null,
        openInteractionId: run.openInteractionId ?? undefined,
        status: 'failed',
        blockedReason: null,
      }, events);
      if (result) {
        this.notifier.notify(result.run.id, result.run.lastSequence, result.run);
        return result.run;
      }
    }
    throw new AppError('internal', `run ${runId} kept changing while being failed`);
  }
}

function refusal(run: RunState, guard: AppendGuard): AppError {
  if (isTerminal(run.status)) {
    return new AppError('run.terminal', `run ${run.id} is ${run.status}`, { details: { runId: run.id, status: run.status } });
  }
  return new AppError('run.invalid_transition', `run ${run.id} cannot do that while ${run.status}${run.blockedReason ? ` (${run.blockedReason})` : ''}`, {
    details: { runId: run.id, status: run.status, blockedReason: run.blockedReason, wanted: guard.status ?? null },
  });
}
