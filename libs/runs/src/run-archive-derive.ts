import type { RunEvent } from '#libs/contracts';
import { storedBytes } from './run-record.js';
import { foldState, isStatusEvent, isTerminal } from './run-state.js';

/** An archived event as a line carries it. */
export interface ArchivedEvent {
  sequence: number;
  type: string;
  payload: unknown;
  created_at: string;
}

/**
 * The bookkeeping columns of a run, as the append path keeps them: every one a function of the
 * run's log. An import writes these, never the archive's own values (a forged `stored_bytes`,
 * counter or status time would otherwise defeat storage quotas and steer retention).
 */
export interface DerivedRunColumns {
  status: string;
  blocked_reason: string | null;
  last_sequence: number;
  open_interactions: number;
  interaction_version: number;
  stored_bytes: number;
  created_at: string;
  updated_at: string;
  status_at: string;
  ended_at: string | null;
}

const CLOSING = new Set(['interaction.responded', 'interaction.expired', 'interaction.canceled']);

/** Events may be stamped at most this far (ms) ahead of the importing server's clock. */
const CLOCK_SKEW_MS = 5 * 60_000;

/**
 * The derived columns of a run from its whole log (`events`, sequences 1..n in order, checked by
 * the caller), by the append path's rules (append-sql.ts and `appendParts`): the run is created by
 * its first event (`run.created`: created_at, status); each append stamps its events with the
 * run's new updated_at; a status event (`isStatusEvent`: a status change, an interaction request,
 * the answer or expiry of a blocking one) sets status and blocked_reason (`foldState`) and stamps
 * status_at; a terminal status stamps ended_at; interaction events count the version, opened
 * minus closed the open ones; stored_bytes is `storedBytes` of the log (the append path's measure).
 * Returns a reason string when the log cannot be a run's log: a first event that is not
 * `run.created`, a time that is not a timestamp, that goes backwards, or lies in the future.
 */
export function deriveRunColumns(events: readonly ArchivedEvent[], now = Date.now()): DerivedRunColumns | string {
  const first = events[0];
  if (!first || first.type !== 'run.created') return 'the log must begin with run.created';
  let previous = -Infinity;
  for (const e of events) {
    const t = Date.parse(e.created_at);
    if (!Number.isFinite(t)) return `event ${e.sequence}: created_at is not a timestamp`;
    if (t < previous) return `event ${e.sequence}: created_at goes back in time`;
    if (t > now + CLOCK_SKEW_MS) return `event ${e.sequence}: created_at is in the future`;
    previous = t;
  }
  const p0 = (first.payload ?? {}) as { status?: unknown };
  if (typeof p0.status !== 'string') return 'run.created carries no status';
  const d: DerivedRunColumns = {
    status: p0.status,
    blocked_reason: null,
    last_sequence: events.length,
    open_interactions: 0,
    interaction_version: 0,
    stored_bytes: storedBytes(events as unknown as RunEvent[]),
    created_at: first.created_at,
    updated_at: events.at(-1)!.created_at,
    status_at: first.created_at,
    ended_at: isTerminal(p0.status as never) ? first.created_at : null,
  };
  for (const e of events) {
    const event = { type: e.type, payload: (e.payload ?? {}) as object };
    if (isStatusEvent(event)) {
      const state = foldState(event);
      d.status = state.status;
      d.blocked_reason = state.blockedReason;
      d.status_at = e.created_at;
      if (isTerminal(state.status)) d.ended_at = e.created_at;
    }
    if (e.type.startsWith('interaction.')) d.interaction_version += 1;
    if (e.type === 'interaction.requested') d.open_interactions += 1;
    if (CLOSING.has(e.type)) d.open_interactions -= 1;
  }
  if (d.open_interactions < 0) return 'the log closes more interactions than it opens';
  return d;
}
