import { Injectable } from '@nestjs/common';
import type { RunExecuteJob } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import type { RunExecutionJob } from './run-execution.queue.js';

/**
 * The outbox table `run_dispatches` (rows are written only by the append path, in the statement
 * that creates or continues a run). Across orgs by design: the relay is a platform process.
 */
@Injectable()
export class RunDispatchRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Claim up to `limit` pending dispatches, oldest first, and hand them to `enqueue` inside one
   * transaction: the rows are deleted, and the deletion commits only if `enqueue` resolves.
   * Rows claimed by another relay are skipped (FOR UPDATE SKIP LOCKED), so concurrent relays never
   * hand the same row over twice; a relay that dies mid-way releases its rows (rollback).
   * Returns how many were handed over.
   */
  async claim(limit: number, enqueue: (jobs: RunExecutionJob[]) => Promise<void>): Promise<number> {
    return this.db.transaction(async (q) => {
      const rows = await q<{ triggerSequence: number; job: RunExecuteJob }>(
        `DELETE FROM run_dispatches WHERE id IN (
           SELECT id FROM run_dispatches ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING trigger_sequence AS "triggerSequence", job`,
        [limit],
        'outbox.claim',
      );
      if (rows.length > 0) await enqueue(rows);
      return rows.length;
    });
  }

  /**
   * Claim like `claim`, but only rows older than `minAgeMs`: the relay's safety net, which leaves
   * fresh rows to the fast path of the process that wrote them.
   */
  async claimOlderThan(minAgeMs: number, limit: number, enqueue: (jobs: RunExecutionJob[]) => Promise<void>): Promise<number> {
    return this.db.transaction(async (q) => {
      const rows = await q<{ triggerSequence: number; job: RunExecuteJob }>(
        `DELETE FROM run_dispatches WHERE id IN (
           SELECT id FROM run_dispatches WHERE created_at < now() - make_interval(secs => $2::double precision / 1000)
            ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING trigger_sequence AS "triggerSequence", job`,
        [limit, minAgeMs],
        'outbox.claim_older',
      );
      if (rows.length > 0) await enqueue(rows);
      return rows.length;
    });
  }

  /** Delete dispatches the relay has enqueued (its fast path: it knew them from the commit). */
  async deleteRelayed(ids: readonly string[]): Promise<void> {
    await this.db.query('DELETE FROM run_dispatches WHERE id = ANY($1::bigint[])', [ids], 'outbox.delete_relayed');
  }

  /** Pending dispatches (all orgs): what the relay still has to hand over. */
  async pending(): Promise<number> {
    const rows = await this.db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches');
    return Number(rows[0]?.n ?? 0);
  }
}
