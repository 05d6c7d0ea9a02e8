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

/**
 * True when `e` sets the run's (status, blockedReason): status changes, interaction requests (the
 * runtime's guard makes the run working), and the answer or expiry of a blocking interaction
 * (which lifts the overlay). A non-blocking interaction's answer or expiry, cancellations (a
 * status change follows) and link events leave the state alone. The read side's SQL twin of this
 * predicate is STATUS_EVENT_SQL (reads/run-rows.repository.ts); the two must agree.
 */
export function isStatusEvent(e: { type: string; payload: object }): boolean {
  if (e.type === 'run.status_changed' || e.type === 'interaction.requested') return true;
  if (e.type === 'interaction.responded' || e.type === 'interaction.expired') return (e.payload as { blocking?: boolean }).blocking !== false;
  return false;
}

/**
 * The state a status-affecting event (see isStatusEvent) leaves the run in; no event: just
 * created (`submitted`). Folding the newest such event of a log gives the run's state at its end.
 */
export function foldState(e: { type: string; payload: object } | undefined): { status: RunStatus; blockedReason: BlockedReason | null } {
  if (!e) return { status: 'submitted', blockedReason: null };
  const p = e.payload as { status?: RunStatus; blockedReason?: BlockedReason | null };
  switch (e.type) {
    case 'run.status_changed':
      return { status: p.status!, blockedReason: p.blockedReason ?? null };
    case 'interaction.requested':
      return { status: 'working', blockedReason: p.blockedReason ?? null };
    default:
      return { status: 'working', blockedReason: null };
  }
}
