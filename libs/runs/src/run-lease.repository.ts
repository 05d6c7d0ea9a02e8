import { Injectable } from '@nestjs/common';
import type { RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { orgMatches } from './run-record.js';

/** The lease may be taken: none, expired, or already this owner's for this trigger ($3, $4). */
const TAKEABLE = `(lease_expires_at IS NULL OR lease_expires_at <= now() OR (lease_owner = $3 AND lease_trigger IS NOT DISTINCT FROM $4::int))`;

/** The renewing execution still holds the run: its fencing token ($6) is the run's (or it has none). */
const CURRENT = `($6::int IS NULL OR execution_epoch = $6::int)`;

/** What a heartbeat learns of its run. */
export interface LeaseRenewal {
  status: RunStatus;
  /** The run's fencing token now: newer than the execution's means a takeover fenced it. */
  epoch: number;
}

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
   * run's status and fencing token (the heartbeat doubles as the cancellation and fence check).
   * Null when the run is gone. A live lease of another execution (another owner or trigger) is left
   * alone: e.g. a short execution that only forwards more input must not take over the lease of
   * the one following the run (its end would then look like the follower's death). An execution
   * whose `epoch` is not the run's (a takeover fenced it) takes nothing: it learns the newer epoch.
   */
  async renew(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number, epoch?: number): Promise<LeaseRenewal | null> {
    const take = `${CURRENT} AND ${TAKEABLE}`;
    const rows = await this.db.query<LeaseRenewal>(
      `UPDATE runs SET
          lease_owner = CASE WHEN ${take} THEN $3 ELSE lease_owner END,
          lease_trigger = CASE WHEN ${take} THEN $4 ELSE lease_trigger END,
          lease_expires_at = CASE WHEN ${take} THEN now() + make_interval(secs => $5::double precision / 1000) ELSE lease_expires_at END
        WHERE id = $1 AND ${orgMatches(2)} RETURNING status, execution_epoch AS epoch`,
      [runId, orgId, owner, triggerSequence, ttlMs, epoch ?? null],
      'runs.lease_renew',
    );
    return rows[0] ?? null;
  }
}
