import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** An organization's storage as the quota check reads it (bytes). */
export interface OrgStorageRow {
  /** organizations.storage_quota_bytes: the organization's own quota (null: the deployment default). */
  ownQuotaBytes: number | null;
  /** Sum of runs.stored_bytes over the organization's runs; null when not asked for. */
  storedBytes: number | null;
}

/**
 * Reads for storage quotas: the organization's quota column and the sum of its runs'
 * `stored_bytes` (kept by the append path, EventLogRepository). The sum reads the organization's
 * runs (no index on stored_bytes, so appends stay HOT updates): StorageQuotas caches it briefly.
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
                   THEN (SELECT COALESCE(sum(r.stored_bytes), 0) FROM runs r WHERE r.org_id = o.id) END AS "storedBytes"
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
}
