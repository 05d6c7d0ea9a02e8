import { runIdBound } from './run-id.js';

/** Pure arithmetic of `run_events` periods and partitions (docs/architecture.md "The log's partitions"). */

/**
 * One partition of `run_events`: its name and run-id range [from, to) (UUIDv7 bounds, lowercase
 * text, so string order is uuid order); both null for the DEFAULT partition (`run_events_legacy`).
 */
export interface EventPartition {
  name: string;
  from: string | null;
  to: string | null;
}

/** A partition to create: `run_events_p<YYYYMMDD>` and its range [from, to). */
export type NewEventPartition = EventPartition & { from: string; to: string };

export type PartitionInterval = 'month' | 'week' | 'day';

const DAY_MS = 86_400_000;

/** The first UTC millisecond of the period holding `ms`: a calendar month, an ISO week (Monday), a day. */
export function periodStart(ms: number, interval: PartitionInterval): number {
  const d = new Date(ms);
  if (interval === 'month') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const day = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return interval === 'day' ? day : day - ((d.getUTCDay() + 6) % 7) * DAY_MS;
}

/** The first UTC millisecond of the period after the one starting at `start`. */
export function nextPeriod(start: number, interval: PartitionInterval): number {
  if (interval === 'month') {
    const d = new Date(start);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
  return start + (interval === 'day' ? DAY_MS : 7 * DAY_MS);
}

/**
 * The partitions to create so that the `ahead` periods from the one holding `now` (included) are
 * covered: `run_events_p<YYYYMMDD>` (the period's first UTC day), bounds the UUIDv7s of the period's
 * first millisecond and the next period's. A period that existing partitions cover in part (the
 * interval was changed) is trimmed to the part no partition covers; one they cover whole is skipped.
 * Pure: the existing partitions are an input.
 */
export function planPartitions(existing: readonly EventPartition[], now: number, interval: PartitionInterval, ahead: number): NewEventPartition[] {
  const ranges = existing.filter((p): p is NewEventPartition => p.from !== null && p.to !== null);
  const plan: NewEventPartition[] = [];
  let start = periodStart(now, interval);
  for (let k = 0; k < ahead; k++) {
    const end = nextPeriod(start, interval);
    let from = runIdBound(start);
    let to = runIdBound(end);
    // trim against covered ranges (sorted by from): move `from` past the ones covering it, stop `to` at the next one
    for (const r of [...ranges, ...plan].sort((a, b) => (a.from < b.from ? -1 : 1))) {
      if (r.from <= from && r.to > from) from = r.to;
      else if (r.from > from && r.from < to) to = r.from;
    }
    if (from < to) plan.push({ name: `run_events_p${new Date(start).toISOString().slice(0, 10).replaceAll('-', '')}`, from, to });
    start = end;
  }
  return plan;
}

