import { Injectable } from '@nestjs/common';
import type { RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { isDependencyUnavailable } from '#libs/common';
import { GroupCommit } from './group-commit.js';

/** Lease renewals per statement, at most. */
const LEASE_BATCH_MAX = 500;

/** One renewal of a batch (RENEW_BATCH_SQL's input, as JSON). */
interface LeaseRequest {
  orgId: string;
  runId: string;
  owner: string;
  triggerSequence: number | null;
  ttlMs: number;
  epoch: number | null;
}

/**
 * The lease statement, for one run or many: $1 a JSON array of LeaseRequest sorted by run id (the
 * rows are locked in that order, as the append statement locks them: the two cannot deadlock), one
 * row back per run found (its id, status and fencing token). A lease is taken when the request's
 * epoch is the run's (or it has none) and the lease is free, expired, or already this owner's for
 * this trigger.
 */
const RENEW_BATCH_SQL = `WITH input AS MATERIALIZED (
  SELECT x.ord, x.v->>'orgId' AS org_id, (x.v->>'runId')::uuid AS run_id, x.v->>'owner' AS owner,
         (x.v->>'triggerSequence')::int AS trig, (x.v->>'ttlMs')::double precision AS ttl_ms, (x.v->>'epoch')::int AS epoch
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(v, ord)
), locked AS MATERIALIZED (
  SELECT r.id, i.owner, i.trig, i.ttl_ms,
         (i.epoch IS NULL OR r.execution_epoch = i.epoch)
           AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= now() OR (r.lease_owner = i.owner AND r.lease_trigger IS NOT DISTINCT FROM i.trig)) AS take
    FROM input i JOIN runs r ON r.id = i.run_id AND (r.org_id = i.org_id::uuid) IS TRUE
   ORDER BY i.ord
     FOR NO KEY UPDATE OF r
)
UPDATE runs r SET
    lease_owner = CASE WHEN l.take THEN l.owner ELSE r.lease_owner END,
    lease_trigger = CASE WHEN l.take THEN l.trig ELSE r.lease_trigger END,
    lease_expires_at = CASE WHEN l.take THEN now() + make_interval(secs => l.ttl_ms / 1000) ELSE r.lease_expires_at END
  FROM locked l WHERE r.id = l.id
RETURNING r.id AS "runId", r.status, r.execution_epoch AS epoch`;

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
  /**
   * The renewals of one event-loop turn (and those arriving while one is in flight) go out as one
   * statement: a worker holding thousands of waiting executions renews their leases in a few
   * statements per heartbeat, not one each (which took the pool from their appends). One run per
   * batch (two executions of one run renew in successive statements).
   */
  private readonly batches: GroupCommit<LeaseRequest, LeaseRenewal | null>;

  constructor(private readonly db: DatabaseService) {
    this.batches = new GroupCommit((batch) => this.renewBatch(batch), { maxInFlight: 1, maxBatch: LEASE_BATCH_MAX, key: (r) => r.runId });
  }

  /**
   * Take or renew the lease of `runId` for `triggerSequence` until now + `ttlMs`, and read the
   * run's status and fencing token (the heartbeat doubles as the cancellation and fence check).
   * Null when the run is gone. A live lease of another execution (another owner or trigger) is left
   * alone: e.g. a short execution that only forwards more input must not take over the lease of
   * the one following the run (its end would then look like the follower's death). An execution
   * whose `epoch` is not the run's (a takeover fenced it) takes nothing: it learns the newer epoch.
   * Renewals submitted together share one statement (group commit; rows locked in run id order, as
   * the append statement locks them); errors as a single renewal's.
   */
  renew(orgId: string, runId: string, owner: string, triggerSequence: number | null, ttlMs: number, epoch?: number): Promise<LeaseRenewal | null> {
    return this.batches.submit({ orgId, runId, owner, triggerSequence, ttlMs, epoch: epoch ?? null });
  }

  /** One statement for `batch` (distinct runs); a failure of the whole (a deadlock, a bad id) falls back to one statement each. */
  private async renewBatch(batch: readonly LeaseRequest[]): Promise<Array<PromiseSettledResult<LeaseRenewal | null>>> {
    try {
      return (await this.renewRows(batch)).map((value) => ({ status: 'fulfilled', value }));
    } catch (e) {
      if (batch.length === 1 || isDependencyUnavailable(e)) throw e;
      return Promise.allSettled(batch.map(async (r) => (await this.renewRows([r]))[0]!));
    }
  }

  /** RENEW_BATCH_SQL for `batch` (distinct runs): each request's renewal, in `batch`'s order (null: its run is gone). */
  private async renewRows(batch: readonly LeaseRequest[]): Promise<Array<LeaseRenewal | null>> {
    const sorted = [...batch].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    const rows = await this.db.query<LeaseRenewal & { runId: string }>(RENEW_BATCH_SQL, [JSON.stringify(sorted)], 'runs.lease_renew');
    const byRun = new Map(rows.map((r) => [r.runId, { status: r.status, epoch: r.epoch }]));
    return batch.map((r) => byRun.get(r.runId) ?? null);
  }
}
