import { Injectable } from '@nestjs/common';
import type { RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { ORG_MATCHES } from './event-log.repository.js';

/**
 * Execution leases on the run row (`lease_owner`, `lease_trigger`, `lease_expires_at`). A lease
 * is bookkeeping of who executes a run's current trigger, not run state: it writes no event and
 * touches no indexed column (the update stays HOT). Scoped by org.
 */
@Injectable()
export class RunLeaseRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Take or renew the lease of `runId` for `triggerSequence` until now + `ttlMs`, and read the
   * run's status (the heartbeat doubles as the cancellation check). Null when the run is gone.
   */
  async renew(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number): Promise<RunStatus | null> {
    const rows = await this.db.query<{ status: RunStatus }>(
      `UPDATE runs SET lease_owner = $3, lease_trigger = $4, lease_expires_at = now() + make_interval(secs => $5::double precision / 1000)
        WHERE id = $1 AND ${ORG_MATCHES} RETURNING status`,
      [runId, orgId, owner, triggerSequence, ttlMs],
      'runs.lease_renew',
    );
    return rows[0]?.status ?? null;
  }
}
