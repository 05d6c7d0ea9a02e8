import type { BlockedReason, RunStatus } from '#libs/contracts';
import { isTerminal } from '#libs/runs';

/**
 * A2A v1.0 TaskState (a2a.proto `enum TaskState`), derived from the canonical status plus the
 * interaction overlay (Run.status + blockedReason) — never stored: the A2A view of a run.
 * Confirmations surface as input-required: A2A has no separate state for them.
 */
export type A2ATaskState =
  | 'TASK_STATE_SUBMITTED'
  | 'TASK_STATE_WORKING'
  | 'TASK_STATE_COMPLETED'
  | 'TASK_STATE_FAILED'
  | 'TASK_STATE_CANCELED'
  | 'TASK_STATE_INPUT_REQUIRED'
  | 'TASK_STATE_REJECTED'
  | 'TASK_STATE_AUTH_REQUIRED';

export function deriveTaskState(status: RunStatus, blockedReason: BlockedReason | null): A2ATaskState {
  if (!isTerminal(status) && blockedReason) {
    return blockedReason === 'auth_required' ? 'TASK_STATE_AUTH_REQUIRED' : 'TASK_STATE_INPUT_REQUIRED';
  }
  switch (status) {
    case 'submitted':
      return 'TASK_STATE_SUBMITTED';
    case 'working':
      return 'TASK_STATE_WORKING';
    case 'completed':
      return 'TASK_STATE_COMPLETED';
    case 'failed':
      return 'TASK_STATE_FAILED';
    case 'canceled':
      return 'TASK_STATE_CANCELED';
    case 'rejected':
      return 'TASK_STATE_REJECTED';
  }
}

