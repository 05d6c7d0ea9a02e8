import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';
import type { EventPartition, NewEventPartition } from './run-event-periods.js';

type Query = DatabaseService['query'];

const BOUND = /FROM \('([0-9a-f-]{36})'\) TO \('([0-9a-f-]{36})'\)/;

/** The partitions of `run_events` (catalog read), oldest range first, the DEFAULT partition last. */
export async function listEventPartitions(q: Query): Promise<EventPartition[]> {
  const rows = await q<{ name: string; bound: string }>(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'run_events'::regclass`,
    [],
    'run_events.partitions',
  );
  return rows
    .map((r) => {
      const m = BOUND.exec(r.bound);
      return { name: r.name, from: m?.[1] ?? null, to: m?.[2] ?? null };
    })
    .sort((a, b) => (a.from === null ? 1 : b.from === null ? -1 : a.from < b.from ? -1 : 1));
}

/**
 * The tables partitioned by run period, in the order their partitions are created, detached and
 * dropped — the order the append statement names them in (SQL function `run_partitioned_tables`,
 * migrations 20261127130000_projections_partitioned and 20261127140000_messages_partitioned).
 * A period partition is `<table>_p<YYYYMMDD>`; `run_events`' partitions are the reference list.
 */
export const RUN_PARTITIONED_TABLES = ['run_events', 'messages', 'artifacts', 'push_deliveries'] as const;

/** The period suffix of a `run_events` partition name (`run_events_p20261101` → `p20261101`). */
export function periodOf(partitionName: string): string {
  return partitionName.slice('run_events_'.length);
}

/**
 * Create the periods `plan` returns given the existing `run_events` partitions (each period is
 * created for every partitioned table at once), under the cluster-wide partition
 * lock (transaction-level advisory lock): `wait` false gives up (null) when another process holds
 * it, true waits for it. `lock_timeout` 2 s on each creation (see RunEventPartitionsRepository.create).
 * Resolves to the names created.
 */
export async function createEventPartitions(db: DatabaseService, plan: (existing: EventPartition[]) => NewEventPartition[], wait: boolean): Promise<string[] | null> {
  return db.transaction(async (q) => {
    await q(`SET LOCAL lock_timeout = '2s'`);
    if (wait) await q(`SELECT pg_advisory_xact_lock(hashtextextended('aaas.run-events-partitions', 0))`);
    else {
      const [lock] = await q<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.run-events-partitions', 0)) AS ok`);
      if (!lock!.ok) return null;
    }
    const created: string[] = [];
    for (const p of plan(await listEventPartitions(q))) {
      const [row] = await q<{ created: boolean }>(`SELECT run_period_add_partitions($1, $2::uuid, $3::uuid) AS created`, [periodOf(p.name), p.from, p.to], 'run_events.add_partition');
      if (row!.created) created.push(p.name);
    }
    return created;
  });
}

/**
 * Creation of run periods: for each, the partition of every partitioned table (migration
 * 20261127130000_projections_partitioned, function `run_period_add_partitions`: the partitions, and
 * the DELETE guard of the `run_events` one; its UPDATE guard is inherited).
 */
@Injectable()
export class RunEventPartitionsRepository {
  constructor(private readonly db: DatabaseService) {}

  list(): Promise<EventPartition[]> {
    return listEventPartitions(this.db.query.bind(this.db));
  }

  /**
   * Under the cluster-wide maintenance lock (a transaction-level advisory lock; null when another
   * process holds it), create the periods `plan` returns given the existing ones. Each creation
   * takes a short ACCESS EXCLUSIVE lock on each partitioned table; `lock_timeout` (2 s) keeps a creation
   * queued behind a long transaction from stalling every append behind it (it fails, the next
   * maintenance tries again). Resolves to the names created.
   */
  create(plan: (existing: EventPartition[]) => NewEventPartition[]): Promise<string[] | null> {
    return createEventPartitions(this.db, plan, false);
  }

  /** The installed pg_partman extension's version (e.g. `4.7.2`), or null (docs/deploy.md says how to hand maintenance over to it). */
  async partmanVersion(): Promise<string | null> {
    const rows = await this.db.query<{ v: string }>(`SELECT extversion AS v FROM pg_extension WHERE extname = 'pg_partman'`);
    return rows[0]?.v ?? null;
  }
}
