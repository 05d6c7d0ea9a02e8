import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** An organization's storage as the quota check reads it (bytes). */
export interface OrgStorageRow {
  /** organizations.storage_quota_bytes: the organization's own quota (null: the deployment default). */
  ownQuotaBytes: number | null;
  /** The organization's stored bytes (the sum of its `org_storage` rows); null when not asked for. */
  storedBytes: number | null;
}

/** Delta rows folded per statement at most (a backlog is folded over several ticks). */
export const STORAGE_FOLD_BATCH = 20_000;

/**
 * Reads for storage quotas: the organization's quota column and its stored bytes, the sum of its
 * `org_storage` rows (migration 20261128130000_org_storage: signed deltas of `runs.stored_bytes`
 * kept by triggers on `runs` in the transaction that changes them, folded by the worker), which is
 * also what the append statement checks a runtime's writes against (append-sql.ts, part `quota`).
 */
@Injectable()
export class StorageQuotaRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * The organization's quota and, when `withUsage` or its effective quota (own, else
   * `defaultQuotaBytes`) is limited, its stored bytes. Null when the organization does not exist.
   */
  async read(orgId: string, defaultQuotaBytes: number, withUsage: boolean): Promise<OrgStorageRow | null> {
    const rows = await this.db.query<{ ownQuotaBytes: string | null; storedBytes: string | null }>(
      `SELECT o.storage_quota_bytes AS "ownQuotaBytes",
              CASE WHEN $3::boolean OR COALESCE(o.storage_quota_bytes, $2::bigint) > 0
                   THEN (SELECT COALESCE(sum(s.bytes), 0) FROM org_storage s WHERE s.org_id = o.id) END AS "storedBytes"
         FROM organizations o WHERE o.id = $1`,
      [orgId, defaultQuotaBytes, withUsage],
      'runs.org_storage',
    );
    const row = rows[0];
    if (!row) return null;
    return {
      ownQuotaBytes: row.ownQuotaBytes === null ? null : Number(row.ownQuotaBytes),
      storedBytes: row.storedBytes === null ? null : Number(row.storedBytes),
    };
  }

  /**
   * Folds up to STORAGE_FOLD_BATCH unfolded delta rows, with the folded rows of the same
   * organizations, into one folded row per organization (a sum of 0 leaves no row), in one
   * statement, under a cluster-wide advisory lock (transaction-level). Folding changes no sum, at
   * any snapshot: it only keeps the rows the quota check reads few. Resolves to the delta rows
   * folded, or null when another process holds the lock.
   */
  fold(): Promise<number | null> {
    return this.db.transaction(async (q) => {
      const [lock] = await q<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtextextended('aaas.org-storage-fold', 0)) AS ok`, [], 'org_storage.lock');
      if (!lock!.ok) return null;
      const [row] = await q<{ n: number }>(
        `WITH delta AS (
           DELETE FROM org_storage WHERE ctid = ANY(ARRAY(SELECT ctid FROM org_storage WHERE NOT folded LIMIT $1))
           RETURNING org_id, bytes),
         orgs AS (SELECT DISTINCT org_id FROM delta),
         base AS (
           DELETE FROM org_storage s USING orgs o WHERE s.folded AND s.org_id = o.org_id
           RETURNING s.org_id, s.bytes),
         folded AS (
           INSERT INTO org_storage (org_id, bytes, folded)
           SELECT org_id, sum(bytes), true FROM (SELECT * FROM delta UNION ALL SELECT * FROM base) x
            GROUP BY org_id HAVING sum(bytes) <> 0)
         SELECT count(*)::int AS n FROM delta`,
        [STORAGE_FOLD_BATCH],
        'org_storage.fold',
      );
      return row!.n;
    });
  }
}
