import { Injectable } from '@nestjs/common';
import type { RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { orgMatches } from './event-log.repository.js';

/** The lease may be taken: none, expired, or already this owner's for this trigger ($3, $4). */
const TAKEABLE = `(lease_expires_at IS NULL OR lease_expires_at <= now() OR (lease_owner = $3 AND lease_trigger IS NOT DISTINCT FROM $4::int))`;

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
   * A live lease of another execution (another owner or trigger) is left alone: e.g. a short
   * execution that only forwards more input must not take over the lease of the one following
   * the run (its end would then look like the follower's death).
   */
  async renew(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number): Promise<RunStatus | null> {
    const rows = await this.db.query<{ status: RunStatus }>(
      `UPDATE runs SET
          lease_owner = CASE WHEN ${TAKEABLE} THEN $3 ELSE lease_owner END,
          lease_trigger = CASE WHEN ${TAKEABLE} THEN $4 ELSE lease_trigger END,
          lease_expires_at = CASE WHEN ${TAKEABLE} THEN now() + make_interval(secs => $5::double precision / 1000) ELSE lease_expires_at END
        WHERE id = $1 AND ${orgMatches(2)} RETURNING status`,
      [runId, orgId, owner, triggerSequence, ttlMs],
      'runs.lease_renew',
    );
    return rows[0]?.status ?? null;
  }
}
