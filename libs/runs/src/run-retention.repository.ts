import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';
import { runIdBound } from './run-id.js';
import { RUN_PARTITIONED_TABLES, listEventPartitions, periodOf } from './run-event-partitions.repository.js';
import { LINES_OF_RUNS_SQL, type ArchiveRow } from './run-archive.repository.js';

/** An organization's retention policy: its default and its agents' overrides (days; null = keep forever). */
export interface RetentionPolicy {
  retentionDays: number | null;
  agents: Array<{ agentId: string; retentionDays: number | null }>;
}

/** The archive lines of the runs a batch is about to remove, per organization (RunArchiveLine JSON without cursor). */
export type ArchiveBeforeRemoval = (orgId: string, rows: ArchiveRow[]) => Promise<void>;

/** What one batch removed, per organization. */
export interface RemovedRuns {
  orgId: string;
  runs: number;
}

const TERMINAL = `('completed', 'failed', 'canceled', 'rejected')`;

/**
 * The expired runs of one batch: terminal, their status (the end) older than their policy's days —
 * the agent's override when it has one, else the organization's — and not the child of a run that is
 * still active (a live parent waits for its children). Locked, SKIP LOCKED: a run another
 * transaction holds is taken by a later batch.
 */
const EXPIRED_SQL = `
SELECT r.id, r.org_id
  FROM retention_policies p
  JOIN runs r ON r.org_id = p.org_id
             AND (r.agent_id = p.agent_id
                  OR (p.agent_id IS NULL AND NOT EXISTS (SELECT 1 FROM retention_policies o WHERE o.org_id = r.org_id AND o.agent_id = r.agent_id)))
 WHERE p.retention_days IS NOT NULL
   AND r.status IN ${TERMINAL}
   AND r.status_at < $1::timestamptz - make_interval(days => p.retention_days)
   AND NOT EXISTS (SELECT 1 FROM run_links l JOIN runs parent ON parent.id = l.parent_run_id
                    WHERE l.child_run_id = r.id AND l.org_id = r.org_id AND parent.status NOT IN ${TERMINAL})
 LIMIT $2
   FOR UPDATE OF r SKIP LOCKED`;

/**
 * Run `r` is removable as of $1: terminal, past its policy's days (the agent's override when it has
 * one, else the organization's), and not the child of a run that is still active. The same rule as
 * EXPIRED_SQL, as a predicate over one run.
 */
const REMOVABLE = `r.status IN ${TERMINAL}
   AND EXISTS (SELECT 1 FROM retention_policies p
                WHERE p.org_id = r.org_id AND p.retention_days IS NOT NULL
                  AND r.status_at < $1::timestamptz - make_interval(days => p.retention_days)
                  AND (p.agent_id = r.agent_id
                       OR (p.agent_id IS NULL AND NOT EXISTS (SELECT 1 FROM retention_policies o WHERE o.org_id = r.org_id AND o.agent_id = r.agent_id))))
   AND NOT EXISTS (SELECT 1 FROM run_links l JOIN runs parent ON parent.id = l.parent_run_id
                    WHERE l.child_run_id = r.id AND l.org_id = r.org_id AND parent.status NOT IN ${TERMINAL})`;

/** A partition retention dropped whole, and the runs of its range it then removed, per organization. */
export interface DroppedPartition {
  partition: string;
  removed: RemovedRuns[];
}

/**
 * A period partition is dropped only when its whole range is at least this far in the past, so no
 * run can still be created in it (run ids are UUIDv7 of their creation time: this margin covers
 * clock skew between hosts).
 */
const DROP_MARGIN_MS = 86_400_000;

/**
 * Retention policies and the removal of expired runs (docs/architecture.md "Retention"). Removal is
 * the only path that deletes from `run_events`: the append-only guard (trigger
 * `run_events_delete_guard`) lets a DELETE through only in a transaction that set `aaas.retention`.
 */
@Injectable()
export class RunRetentionRepository {
  constructor(private readonly db: DatabaseService) {}

  async policy(orgId: string): Promise<RetentionPolicy> {
    const rows = await this.db.query<{ agentId: string | null; retentionDays: number | null }>(
      `SELECT agent_id AS "agentId", retention_days AS "retentionDays" FROM retention_policies WHERE org_id = $1 ORDER BY agent_id NULLS FIRST`,
      [orgId],
      'retention.policy',
    );
    return {
      retentionDays: rows.find((r) => r.agentId === null)?.retentionDays ?? null,
      agents: rows.filter((r) => r.agentId !== null).map((r) => ({ agentId: r.agentId!, retentionDays: r.retentionDays })),
    };
  }

  /** Set the organization's default (agentId null) or an agent's override; `retentionDays` null = keep forever. */
  async set(orgId: string, agentId: string | null, retentionDays: number | null): Promise<void> {
    await this.db.transaction(async (q) => {
      await q(`DELETE FROM retention_policies WHERE org_id = $1 AND agent_id IS NOT DISTINCT FROM $2::uuid`, [orgId, agentId]);
      await q(`INSERT INTO retention_policies (org_id, agent_id, retention_days) VALUES ($1, $2::uuid, $3)`, [orgId, agentId, retentionDays]);
    });
  }

  /** Remove an agent's override (it follows the organization's default again). */
  async clearAgent(orgId: string, agentId: string): Promise<void> {
    await this.db.query(`DELETE FROM retention_policies WHERE org_id = $1 AND agent_id = $2`, [orgId, agentId], 'retention.clear_agent');
  }

  /**
   * Drop one period whole, if one can go — its partition of every partitioned table (`run_events`,
   * `messages`, `artifacts`, `push_deliveries`; RUN_PARTITIONED_TABLES): a period (not the DEFAULT
   * partitions) whose range ended more than DROP_MARGIN_MS before `now`, with at least one run in
   * its range and every run of its range removable (REMOVABLE: none survives this pass). With
   * `archive` given, only a partition of at most `batchSize` runs qualifies (they are archived
   * first, in memory); a bigger one loses its rows batch by batch until it does.
   * Two transactions, so the ACCESS EXCLUSIVE locks detaching takes on the partitioned tables are
   * held briefly: (1) under the retention lock: check, archive, delete the range's `message_keys`
   * rows (the user messages' keys, one narrow row each), DETACH and DROP the period's partitions,
   * in RUN_PARTITIONED_TABLES order (lock_timeout 5 s each), (2) delete the range's removable runs,
   * `batchSize` per transaction — `runs_removed` finds no events, messages, message keys, artifacts or
   * push deliveries left to delete (their range routes to no partition any more); their
   * dispatches go with them (`runs_removed`), their interactions, links and push configs
   * (unpartitioned) row by row (cascades). Should (2) not
   * happen, those runs stay, expired and without a log or messages, and a later batch removes them.
   * Resolves to what was dropped and removed, null when nothing could be dropped, 'locked' when
   * another process holds the retention lock.
   */
  async dropExpiredPartition(now: Date, batchSize: number, archive?: ArchiveBeforeRemoval): Promise<DroppedPartition | null | 'locked'> {
    const dropped = await this.db.transaction(async (q) => {
      const [lock] = await q<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.run-retention', 0)) AS ok`);
      if (!lock!.ok) return 'locked' as const;
      const before = runIdBound(now.getTime() - DROP_MARGIN_MS);
      for (const p of await listEventPartitions(q)) {
        if (p.from === null || p.to === null || p.to > before) continue;
        // stops at the first run that stays (a partition kept forever costs one row read per pass)
        const [c] = await q<{ any: boolean; stays: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM runs r WHERE r.id >= $2::uuid AND r.id < $3::uuid) AS any,
                  EXISTS (SELECT 1 FROM runs r WHERE r.id >= $2::uuid AND r.id < $3::uuid AND NOT (${REMOVABLE})) AS stays`,
          [now, p.from, p.to],
          'retention.partition_runs',
        );
        if (!c!.any || c!.stays) continue;
        if (archive) {
          const [n] = await q<{ n: number }>(`SELECT count(*)::int AS n FROM (SELECT 1 FROM runs WHERE id >= $1::uuid AND id < $2::uuid LIMIT $3 + 1) x`, [p.from, p.to, batchSize]);
          if (n!.n > batchSize) continue;
          const runs = await q<{ id: string; org_id: string }>(`SELECT id, org_id FROM runs WHERE id >= $1::uuid AND id < $2::uuid`, [p.from, p.to]);
          const byOrg = new Map<string, string[]>();
          for (const r of runs) byOrg.set(r.org_id, [...(byOrg.get(r.org_id) ?? []), r.id]);
          for (const [orgId, ids] of byOrg) await archive(orgId, await q<ArchiveRow>(LINES_OF_RUNS_SQL, [orgId, ids], 'retention.archive_lines'));
        }
        // the keys of the range's user messages (message_keys is not partitioned): gone with their
        // messages, in this transaction, and before the detaching below so its exclusive locks stay short
        await q(`DELETE FROM message_keys WHERE run_id >= $1::uuid AND run_id < $2::uuid`, [p.from, p.to], 'retention.partition_message_keys');
        await q(`SET LOCAL lock_timeout = '5s'`);
        // the period of every partitioned table, in RUN_PARTITIONED_TABLES order: the order the append statement locks them in
        for (const table of RUN_PARTITIONED_TABLES) {
          const name = `${table}_${periodOf(p.name)}`;
          const [part] = await q<{ ok: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS ok`, [name]);
          if (!part!.ok) continue;
          await q(`ALTER TABLE ${quoteIdent(table)} DETACH PARTITION ${quoteIdent(name)}`);
          await q(`DROP TABLE ${quoteIdent(name)}`);
        }
        return p;
      }
      return null;
    });
    if (dropped === null || dropped === 'locked') return dropped;
    const byOrg = new Map<string, number>();
    for (;;) {
      const rows = await this.db.transaction(async (q) => {
        await q(`SELECT set_config('aaas.retention', 'on', true)`);
        return q<{ orgId: string; runs: number }>(
          `WITH gone AS (DELETE FROM runs WHERE id = ANY(ARRAY(SELECT r.id FROM runs r WHERE r.id >= $2::uuid AND r.id < $3::uuid AND ${REMOVABLE} LIMIT $4)) RETURNING org_id)
           SELECT org_id AS "orgId", count(*)::int AS runs FROM gone GROUP BY org_id`,
          [now, dropped.from, dropped.to, batchSize],
          'retention.remove_partition_runs',
        );
      });
      for (const r of rows) byOrg.set(r.orgId, (byOrg.get(r.orgId) ?? 0) + r.runs);
      if (rows.reduce((n, r) => n + r.runs, 0) < batchSize) break;
    }
    return { partition: dropped.name, removed: [...byOrg].map(([orgId, runs]) => ({ orgId, runs })) };
  }

  /**
   * One batch: if no other process holds the retention lock (a transaction-level advisory lock, so
   * one batch at a time across the cluster), remove up to `limit` expired runs as of `now` with
   * everything that belongs to them — the log, messages and their keys, artifacts, interactions,
   * links (either side), dispatches, push configs and their deliveries (trigger `runs_removed` and
   * ON DELETE CASCADE from runs; docs/architecture.md "Removing runs") — after
   * `archive` (when given) took their archive lines; an `archive` that throws removes nothing. Resolves
   * to null when another process holds the lock, else to what was removed per organization.
   */
  async removeExpired(now: Date, limit: number, archive?: ArchiveBeforeRemoval): Promise<RemovedRuns[] | null> {
    return this.db.transaction(async (q) => {
      const [lock] = await q<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.run-retention', 0)) AS ok`);
      if (!lock!.ok) return null;
      const expired = await q<{ id: string; org_id: string }>(EXPIRED_SQL, [now, limit], 'retention.expired');
      if (expired.length === 0) return [];
      const byOrg = new Map<string, string[]>();
      for (const r of expired) byOrg.set(r.org_id, [...(byOrg.get(r.org_id) ?? []), r.id]);
      // archived inside the transaction: a run is removed only once its archive is written
      if (archive) for (const [orgId, ids] of byOrg) await archive(orgId, await q<ArchiveRow>(LINES_OF_RUNS_SQL, [orgId, ids], 'retention.archive_lines'));
      await q(`SELECT set_config('aaas.retention', 'on', true)`);
      const removed: RemovedRuns[] = [];
      for (const [orgId, ids] of byOrg) {
        const [row] = await q<{ n: number }>(
          `WITH gone AS (DELETE FROM runs WHERE org_id = $1 AND id = ANY($2::uuid[]) RETURNING 1) SELECT count(*)::int AS n FROM gone`,
          [orgId, ids],
          'retention.remove',
        );
        removed.push({ orgId, runs: row!.n });
      }
      return removed;
    });
  }
}

/** A partition name as an SQL identifier (names come from the catalog; quoted all the same). */
function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
