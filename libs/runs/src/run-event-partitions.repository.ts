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
 * Create the partitions `plan` returns given the existing ones, under the cluster-wide partition
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
      const [row] = await q<{ created: boolean }>(`SELECT run_events_add_partition($1, $2::uuid, $3::uuid) AS created`, [p.name, p.from, p.to], 'run_events.add_partition');
      if (row!.created) created.push(p.name);
    }
    return created;
  });
}

/**
 * Creation of `run_events` partitions (migration 20261127110000_run_events_partitioned, function
 * `run_events_add_partition`: the partition and its DELETE guard; the UPDATE guard is inherited).
 */
@Injectable()
export class RunEventPartitionsRepository {
  constructor(private readonly db: DatabaseService) {}

  list(): Promise<EventPartition[]> {
    return listEventPartitions(this.db.query.bind(this.db));
  }

  /**
   * Under the cluster-wide maintenance lock (a transaction-level advisory lock; null when another
   * process holds it), create the partitions `plan` returns given the existing ones. Each creation
   * takes a short ACCESS EXCLUSIVE lock on `run_events`; `lock_timeout` (2 s) keeps a creation
   * queued behind a long transaction from stalling every append behind it (it fails, the next
   * maintenance tries again). Resolves to the names created.
   */
  create(plan: (existing: EventPartition[]) => NewEventPartition[]): Promise<string[] | null> {
    return createEventPartitions(this.db, plan, false);
  }

  /** Whether the pg_partman extension is installed (docs/deploy.md says how to hand maintenance over to it). */
  async partmanInstalled(): Promise<boolean> {
    const rows = await this.db.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_partman'`);
    return rows.length > 0;
  }
}
