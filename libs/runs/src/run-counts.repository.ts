import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** Delta rows folded per statement at most (a backlog is folded over several ticks). */
export const FOLD_BATCH = 20_000;

/**
 * `run_counts` (migration 20261127120000_run_counts, docs/architecture.md "Counting runs"): the
 * number of runs per (org, agent, kind, creator, status, blocked reason), kept by triggers on `runs`
 * as signed delta rows in the transaction that changes the runs. A count is the sum of a key's
 * rows, so it is exact at every snapshot; folding only keeps the rows few.
 */
@Injectable()
export class RunCountsRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Folds up to FOLD_BATCH unfolded delta rows, with the folded rows of the same keys, into one
   * folded row per key (keys that sum to 0 leave no row), in one statement, under a cluster-wide
   * advisory lock (transaction-level). Resolves to the delta rows folded, or null when another
   * process holds the lock.
   */
  fold(): Promise<number | null> {
    return this.db.transaction(async (q) => {
      const [lock] = await q<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.run-counts-fold', 0)) AS ok`, [], 'run_counts.lock');
      if (!lock!.ok) return null;
      const [row] = await q<{ n: number }>(
        `WITH delta AS (
           DELETE FROM run_counts WHERE ctid = ANY(ARRAY(SELECT ctid FROM run_counts WHERE NOT folded LIMIT $1))
           RETURNING org_id, agent_id, kind, created_by, status, blocked_reason, n),
         keys AS (SELECT DISTINCT org_id, agent_id, kind, created_by, status, blocked_reason FROM delta),
         base AS (
           DELETE FROM run_counts r USING keys k
            WHERE r.folded AND r.org_id = k.org_id AND r.agent_id = k.agent_id AND r.kind = k.kind
              AND r.created_by IS NOT DISTINCT FROM k.created_by AND r.status = k.status
              AND r.blocked_reason IS NOT DISTINCT FROM k.blocked_reason
           RETURNING r.org_id, r.agent_id, r.kind, r.created_by, r.status, r.blocked_reason, r.n),
         folded AS (
           INSERT INTO run_counts (org_id, agent_id, kind, created_by, status, blocked_reason, n, folded)
           SELECT org_id, agent_id, kind, created_by, status, blocked_reason, sum(n), true
             FROM (SELECT * FROM delta UNION ALL SELECT * FROM base) x
            GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0)
         SELECT count(*)::int AS n FROM delta`,
        [FOLD_BATCH],
        'run_counts.fold',
      );
      return row!.n;
    });
  }
}
