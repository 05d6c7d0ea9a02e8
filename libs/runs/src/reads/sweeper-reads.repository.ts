import { Injectable } from '@nestjs/common';
import type { BlockedReason, RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';

/**
 * What the sweepers read (libs/execution RunSweeper): runs whose execution may be lost, open
 * interactions past their expiry, active children of ended parents. Across organizations by
 * design (the sweeper is a platform process; it acts per run with the run's org), except
 * `lastTrigger`, which reads one run of one org. Never writes.
 */
@Injectable()
export class SweeperReads {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Active, unblocked runs whose row has not changed since `olderThan` or whose execution lease
   * expired, and whose dispatch is not still waiting in the outbox (sweeper candidates).
   * Across orgs by design: the sweeper is a platform process, and it acts per run with its org.
   */
  async staleCandidates(
    olderThan: Date,
    limit = 100,
    after?: { updatedAt: Date; id: string },
  ): Promise<Array<{ id: string; orgId: string; lastSequence: number; status: RunStatus; blockedReason: BlockedReason | null; stale: boolean; leaseTrigger: number | null; leaseExpired: boolean; leaseLive: boolean; updatedAt: Date }>> {
    return this.db.query(
      `SELECT id, org_id AS "orgId", last_sequence AS "lastSequence", status, blocked_reason AS "blockedReason", updated_at AS "updatedAt",
              updated_at < $1 AS stale, lease_trigger AS "leaseTrigger",
              COALESCE(lease_expires_at < now(), false) AS "leaseExpired",
              COALESCE(lease_expires_at >= now(), false) AS "leaseLive"
         FROM runs WHERE status IN ('submitted', 'working') AND blocked_reason IS NULL
          AND (updated_at < $1 OR lease_expires_at < now())
          AND NOT EXISTS (SELECT 1 FROM run_dispatches d WHERE d.run_id = runs.id)
          -- waiting on purpose: for the answer to an open interaction, or for a child it awaits
          AND NOT EXISTS (SELECT 1 FROM interaction_requests ir WHERE ir.run_id = runs.id AND ir.org_id = runs.org_id AND ir.status = 'open')
          AND NOT EXISTS (SELECT 1 FROM run_links l JOIN runs c ON c.id = l.child_run_id
                           WHERE l.parent_run_id = runs.id AND l.awaiting AND c.status IN ('submitted', 'working'))
          AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3, $4::uuid))
        ORDER BY updated_at, id LIMIT $2`,
      [olderThan, limit, after?.updatedAt ?? null, after?.id ?? null],
    );
  }

  /**
   * Sequence of the event that triggered the run's current execution: its newest user message
   * (a new input or an answer), expiry that continues it, settlement of a child it awaits, or the
   * resumption of a lost execution.
   * Null when none (a run that never had input).
   */
  async lastTrigger(orgId: string, runId: string): Promise<number | null> {
    const rows = await this.db.query<{ seq: number | null }>(
      `SELECT max(e.sequence) AS seq FROM run_events e
        WHERE e.run_id = $1 AND e.org_id = $2 AND (
              (e.type IN ('message.added', 'interaction.responded') AND e.payload->'message'->>'role' = 'user')
           OR (e.type = 'interaction.expired' AND e.payload->>'outcome' = 'continue')
           OR e.type = 'run.execution_resumed'
           OR (e.type = 'run.link_updated' AND e.payload->>'status' IN ('completed', 'failed', 'canceled', 'rejected')
               AND EXISTS (SELECT 1 FROM run_links l WHERE l.org_id = e.org_id AND l.id = (e.payload->>'linkId')::uuid AND l.awaiting)))`,
      [runId, orgId],
    );
    return rows[0]?.seq ?? null;
  }

  /** Open interactions whose `expiresAt` passed, across orgs (sweeper candidates), oldest first. */
  async expiredInteractions(limit: number): Promise<Array<{ id: string; orgId: string; runId: string }>> {
    return this.db.query(
      `SELECT id, org_id AS "orgId", run_id AS "runId" FROM interaction_requests
        WHERE status = 'open' AND expires_at IS NOT NULL AND expires_at <= now()
        ORDER BY expires_at LIMIT $1`,
      [limit],
    );
  }

  /** Active children of runs that ended (their parent was canceled or failed), across orgs (sweeper). */
  async orphanedChildren(limit: number): Promise<Array<{ orgId: string; runId: string; parentRunId: string; parentStatus: RunStatus }>> {
    return this.db.query(
      `SELECT c.org_id AS "orgId", c.id AS "runId", p.id AS "parentRunId", p.status AS "parentStatus"
         FROM run_links l JOIN runs c ON c.id = l.child_run_id JOIN runs p ON p.id = l.parent_run_id
        WHERE c.status IN ('submitted', 'working') AND p.status IN ('canceled', 'failed')
        LIMIT $1`,
      [limit],
    );
  }
}
