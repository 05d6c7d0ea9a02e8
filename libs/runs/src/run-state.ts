import type { BlockedReason, RunStatus } from '#libs/contracts';

/**
 * The run state machine (pure). Canonical statuses only; "input-required" and "auth-required"
 * are not statuses but the InteractionRequest overlay (`blockedReason`) on a `working` run.
 *
 * ```
 *   submitted ──► working ──► completed | failed | rejected
 *       │            │  ▲
 *       │            ▼  │  (blockedReason set / cleared: overlay, status stays working)
 *       │         working+blocked
 *       └────────────┴──► canceled | failed | rejected | completed
 * ```
 */
export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'canceled', 'rejected'];
export const ACTIVE_STATUSES: readonly RunStatus[] = ['submitted', 'working'];

const TRANSITIONS: Record<RunStatus, readonly RunStatus[]> = {
  submitted: ['working', 'completed', 'failed', 'canceled', 'rejected'],
  working: ['completed', 'failed', 'canceled', 'rejected'],
  completed: [],
  failed: [],
  canceled: [],
  rejected: [],
};

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** True when a run in `from` may move to `to`. A status never "changes" to itself. */
export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Every status from which `to` is reachable in one step (used as the append path's guard). */
export function statusesLeadingTo(to: RunStatus): RunStatus[] {
  return (Object.keys(TRANSITIONS) as RunStatus[]).filter((from) => canTransition(from, to));
}

/**
 * Statuses from which a `run.status_changed` to `to` may be appended. Besides real transitions,
 * a working run may restate `working` (A2A allows repeated working updates, e.g. carrying a
 * progress message).
 */
export function statusUpdateSources(to: RunStatus): RunStatus[] {
  const from = statusesLeadingTo(to);
  return to === 'working' ? [...from, 'working'] : from;
}

/**
 * A run is settled when it cannot progress without its caller: terminal, or blocked on an
 * InteractionRequest (`blockedReason` set). Blocking waits end there.
 */
export function isSettled(status: RunStatus, blockedReason: BlockedReason | null): boolean {
  return isTerminal(status) || blockedReason !== null;
}
