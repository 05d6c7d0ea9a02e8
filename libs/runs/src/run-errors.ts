import { AppError } from '#libs/common';
import type { BlockedReason, RunStatus } from '#libs/contracts';

/**
 * The errors of runs and their interactions, in one place: each builds the coded `AppError` (codes
 * and their HTTP statuses in libs/common's registry) with the canonical wording and the details a
 * caller needs. Adapters reword them (libs/a2a maps the codes to A2A errors); none leaks SQL.
 */

/** `run.not_found`: no run with that id in the organization (or not of the agent asked about). */
export function runNotFound(runId: string): AppError {
  return new AppError('run.not_found', `run ${runId} not found`, { details: { runId } });
}

/** `run.terminal`: the run is in a terminal status; `what` ends the message (e.g. "accepts no more input"). */
export function runTerminal(run: { id: string; status: RunStatus }, what?: string): AppError {
  return new AppError('run.terminal', `run ${run.id} is ${run.status}${what ? ` and ${what}` : ''}`, { details: { runId: run.id, status: run.status } });
}

/** `run.not_cancelable`: cancel was asked of a run already terminal. */
export function runNotCancelable(run: { id: string; status: RunStatus }): AppError {
  return new AppError('run.not_cancelable', `run ${run.id} is ${run.status} and cannot be canceled`, { details: { runId: run.id, status: run.status } });
}

/** `run.invalid_transition`: the state machine (or one batch's rules) refuses the change. */
export function invalidTransition(message: string, details: Record<string, unknown>): AppError {
  return new AppError('run.invalid_transition', message, { details });
}

/** `run.invalid_transition` for a guarded append the run's state refused (`wanted`: the status asked for, if any). */
export function refusedByState(run: { id: string; status: RunStatus; blockedReason: BlockedReason | null }, wanted: RunStatus | null): AppError {
  return invalidTransition(`run ${run.id} cannot do that while ${run.status}${run.blockedReason ? ` (${run.blockedReason})` : ''}`, {
    runId: run.id,
    status: run.status,
    blockedReason: run.blockedReason,
    wanted,
  });
}

/** `run.conflict`: a retried or concurrent write does not match what the log holds. */
export function runConflict(message: string, details: Record<string, unknown>, cause?: unknown): AppError {
  return new AppError('run.conflict', message, { details, cause });
}

/** `run.conflict`: the messageId is recorded on another run. */
export function messageConflict(messageId: string): AppError {
  return runConflict(`messageId ${messageId} was already used on another run`, { messageId });
}

/**
 * `run.conflict`: an anonymous caller sent a messageId that is recorded with another message
 * (anonymous callers share one sender, so only the message itself tells a retry from another
 * caller's message). Says nothing of the recorded message or its task.
 */
export function messageReused(messageId: string): AppError {
  return runConflict(`messageId ${messageId} was already used with another message`, { messageId, reuse: 'other_message' });
}

/** `run.duplicate_message`: the append path found the messageId recorded for its sender (handlers resolve it). */
export function duplicateMessage(cause: unknown): AppError {
  return new AppError('run.duplicate_message', 'a message with this messageId is already recorded', { cause });
}

/**
 * `run.duplicate_operation`: the append path found an operation id (`payload.opId`) of the batch in
 * the run's log already (the unique index `run_events_op_id_key`); RuntimeOperations drops the
 * recorded operations and appends the rest.
 */
export function duplicateOperation(cause: unknown): AppError {
  return new AppError('run.duplicate_operation', 'an operation with this id is already recorded on the run', { cause });
}

/**
 * `run.fenced`: an execution's write was refused because a newer execution took the run over (its
 * fencing token `epoch` is older than the run's `current`, docs/architecture.md "The fence"). The
 * execution stops with no further effect.
 */
export function executionFenced(runId: string, epoch: number, current: number | undefined): AppError {
  return new AppError('run.fenced', `run ${runId}: a newer execution took it over (epoch ${epoch}, the run's ${current ?? 'unknown'})`, { details: { runId, epoch, current: current ?? null } });
}

/** `run.thread_mismatch`: the input names a thread that is not the run's. */
export function threadMismatch(run: { id: string; threadId: string }, requestedThreadId: string): AppError {
  return new AppError('run.thread_mismatch', `thread ${requestedThreadId} is not the thread of run ${run.id}`, {
    details: { runId: run.id, threadId: run.threadId, requestedThreadId },
  });
}

/** `run.awaiting_interaction`: input that is not an answer was sent to a run blocked on an interaction. */
export function awaitingInteraction(run: { id: string; openInteractionId: string | null; blockedReason: BlockedReason | null }): AppError {
  return new AppError('run.awaiting_interaction', `run ${run.id} is waiting on interaction ${run.openInteractionId}`, {
    details: { runId: run.id, interactionId: run.openInteractionId ?? '', blockedReason: run.blockedReason ?? '' },
  });
}

/** `run.link_too_deep`: a delegation would nest RunLinks deeper than `max`. */
export function linkTooDeep(runId: string, depth: number, max: number): AppError {
  return new AppError('run.link_too_deep', `run ${runId} is ${depth} delegations deep; at most ${max} are allowed`, { details: { runId, depth } });
}

/** `run.runtime_state_too_large`: a runtime saved more than `max` bytes of state. */
export function runtimeStateTooLarge(runId: string, size: number, max: number): AppError {
  return new AppError('run.runtime_state_too_large', `runtime state of ${size} bytes exceeds ${max}`, { details: { runId, size } });
}

/** `interaction.not_found`: the run has no interaction with that id. */
export function interactionNotFound(runId: string, interactionId: string): AppError {
  return new AppError('interaction.not_found', `run ${runId} has no interaction ${interactionId}`, { details: { runId, interactionId } });
}

/** `interaction.not_open`: the interaction answered is closed already. */
export function interactionNotOpen(runId: string, interactionId: string): AppError {
  return new AppError('interaction.not_open', `interaction ${interactionId} of run ${runId} is not open`, { details: { runId, interactionId } });
}

/** `interaction.invalid_answer`: the answer chooses none of the interaction's options. */
export function invalidAnswer(interactionId: string, optionIds: string[]): AppError {
  return new AppError('interaction.invalid_answer', `the answer must choose one of the options: ${optionIds.join(', ')}`, {
    details: { interactionId, options: optionIds },
  });
}
