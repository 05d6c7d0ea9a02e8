import { Injectable } from '@nestjs/common';
import type { RunExecuteJob } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import type { RunExecutionJob } from './run-execution.queue.js';

/**
 * The relay's safety net statement (RunDispatchRepository.relayable). The candidates are picked
 * by an InitPlan (`= ANY(ARRAY(...))`), read once per statement whatever the planner's statistics
 * say: written as `id IN (SELECT ... LIMIT ... FOR UPDATE SKIP LOCKED)`, a generic plan made while
 * the table was empty (a queue table usually is when autovacuum analyzes it) re-ran the locking
 * subquery for every row of a backlog — 12.7 s for 8,000 waiting dispatches, exactly when Redis
 * had been down and the safety net matters.
 */
export const RELAYABLE_SQL = `UPDATE run_dispatches SET relayed_at = now()
  WHERE id = ANY(ARRAY(
    SELECT id FROM run_dispatches
     WHERE created_at < now() - make_interval(secs => $2::double precision / 1000)
       AND (relayed_at IS NULL OR relayed_at < now() - make_interval(secs => $3::double precision / 1000))
       AND ($4::boolean OR created_at < now() - make_interval(secs => $3::double precision / 1000))
     ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
  RETURNING id::text AS id, trigger_sequence AS "triggerSequence", job,
            (extract(epoch FROM created_at) * 1000)::float8 AS "enqueuedAt"`;

/**
 * The claim (RunDispatchRepository.claim): the dispatches' rows deleted, each with its run's
 * fencing token (`r`, read in the statement's snapshot), and the lease of each run that has not
 * changed for $4 ms taken for the claimer ($2) and the dispatch's trigger until now + $3 ms —
 * unless another execution holds a live lease there (an `a2a` follower while more input is only
 * forwarded). A run gone reads as no epoch.
 */
export const CLAIM_SQL = `WITH d AS (DELETE FROM run_dispatches WHERE id = ANY($1::bigint[]) RETURNING id, org_id, run_id, trigger_sequence),
r AS (SELECT d.id, d.run_id, d.org_id, d.trigger_sequence, r.execution_epoch,
             r.updated_at < now() - make_interval(secs => $4::double precision / 1000)
               AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= now() OR (r.lease_owner = $2 AND r.lease_trigger IS NOT DISTINCT FROM d.trigger_sequence)) AS take
        FROM d JOIN runs r ON r.id = d.run_id AND r.org_id = d.org_id),
l AS (
  UPDATE runs SET lease_owner = $2, lease_trigger = r.trigger_sequence, lease_expires_at = now() + make_interval(secs => $3::double precision / 1000)
  FROM r WHERE r.take AND runs.id = r.run_id AND runs.org_id = r.org_id
  RETURNING 1
)
SELECT d.id::text AS id, r.execution_epoch AS epoch FROM d LEFT JOIN r ON r.id = d.id`;

/**
 * The outbox table `run_dispatches` (rows are written only by the append path, in the statement
 * that creates or continues a run; deleted by the worker that claims them for execution). Across
 * orgs by design: the relay and the workers are platform processes.
 */
@Injectable()
export class RunDispatchRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * The relay's safety net: hand up to `limit` dispatches that nobody has claimed to `enqueue`
   * again, oldest first, inside one transaction that marks them (`relayed_at`) and commits only if
   * `enqueue` resolves. A row qualifies when it is older than `minAgeMs` and was not handed over in
   * the last `redeliverMs` (ms), and — unless `idle` (the queue has nothing waiting, so an
   * unclaimed row's job is gone) — is itself older than `redeliverMs`. Rows locked by another relay
   * are skipped (SKIP LOCKED). Re-enqueuing a row whose job still exists is harmless: the worker's
   * claim runs a dispatch once. Returns how many were handed over.
   */
  async relayable(limit: number, opts: { minAgeMs: number; redeliverMs: number; idle: boolean }, enqueue: (jobs: RunExecutionJob[]) => Promise<void>): Promise<number> {
    return this.db.transaction(async (q) => {
      const rows = await q<{ id: string; triggerSequence: number; job: RunExecuteJob; enqueuedAt: number }>(
        RELAYABLE_SQL,
        [limit, opts.minAgeMs, opts.redeliverMs, opts.idle],
        'outbox.relayable',
      );
      if (rows.length > 0) await enqueue(rows);
      return rows.length;
    });
  }

  /**
   * A worker claims dispatches it is about to execute (or has found nothing to do for) by deleting
   * their rows: the ids returned are its to run, each with its run's fencing token now
   * (`runs.execution_epoch`: the execution's epoch, carried by every write it makes); an id not
   * returned was claimed already (the same dispatch enqueued twice) or never existed. One statement
   * for a whole batch; the ids are distinct (a dispatch is claimed once, whatever the batch holds).
   * The claim also takes the execution lease of each run that has not changed for
   * `lease.idleForMs` (ms) — unless another execution holds a live one —, for `lease.owner` and the
   * dispatch's trigger, for `lease.ttlMs`: a run that waited long in a queue is never without a
   * live lease between its claim and its execution's first heartbeat, so a sweeper cannot take it
   * for a stale one as it starts (it did: runs queued longer than RUN_STALE_AFTER_MS were resumed
   * as they started, their backends called twice). A run that changed lately is not stale and
   * takes no write. A run that is gone reads as epoch 0 (its execution finds nothing to do).
   */
  async claim(ids: readonly string[], lease: { owner: string; ttlMs: number; idleForMs: number }): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db.query<{ id: string; epoch: number | null }>(CLAIM_SQL, [[...new Set(ids)], lease.owner, lease.ttlMs, lease.idleForMs], 'outbox.claim');
    return new Map(rows.map((r) => [r.id, r.epoch ?? 0]));
  }

  /**
   * Mark unclaimed dispatches as held by a worker that parked them (`relayed_at` = now): the
   * safety net leaves a row alone for OUTBOX_REDELIVER_MS after it was last relayed or held.
   */
  async hold(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.query('UPDATE run_dispatches SET relayed_at = now() WHERE id = ANY($1::bigint[])', [ids], 'outbox.hold');
  }

  /** Which of `ids` are still unclaimed (their execution has not started). */
  async unclaimed(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.query<{ id: string }>('SELECT id::text AS id FROM run_dispatches WHERE id = ANY($1::bigint[])', [ids], 'outbox.unclaimed');
    return new Set(rows.map((r) => r.id));
  }

  /** Unclaimed dispatches (all orgs): queued or still to be relayed. */
  async pending(): Promise<number> {
    const rows = await this.db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches');
    return Number(rows[0]?.n ?? 0);
  }
}
