import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** `status_code` of a record whose request is still running (no HTTP status is 0). */
export const IDEMPOTENCY_PENDING = 0;

export interface IdempotencyRecordRow {
  requestHash: string;
  statusCode: number;
  /** The response body as sent, serialized (a JSON string value in the jsonb column). */
  response: string | null;
  createdAt: Date;
}

/** Data access for `idempotency_records`, keyed by (org, Idempotency-Key). */
@Injectable()
export class IdempotencyRepository {
  constructor(private readonly db: DatabaseService) {}

  /** Insert a pending record; false when one exists for (org, key). */
  async claim(orgId: string, key: string, requestHash: string): Promise<boolean> {
    const rows = await this.db.query(
      `INSERT INTO idempotency_records (org_id, key, request_hash, status_code, response)
       VALUES ($1, $2, $3, ${IDEMPOTENCY_PENDING}, 'null'::jsonb)
       ON CONFLICT (org_id, key) DO NOTHING RETURNING 1`,
      [orgId, key, requestHash],
    );
    return rows.length === 1;
  }

  async find(orgId: string, key: string): Promise<IdempotencyRecordRow | null> {
    const rows = await this.db.query<{ requestHash: string; statusCode: number; response: unknown; createdAt: Date }>(
      `SELECT request_hash AS "requestHash", status_code AS "statusCode", response, created_at AS "createdAt"
         FROM idempotency_records WHERE org_id = $1 AND key = $2`,
      [orgId, key],
    );
    const row = rows[0];
    return row ? { ...row, response: typeof row.response === 'string' ? row.response : null } : null;
  }

  /** Record the response of the request that holds the pending record. */
  async complete(orgId: string, key: string, statusCode: number, serializedBody: string): Promise<void> {
    await this.db.query(
      `UPDATE idempotency_records SET status_code = $3, response = to_jsonb($4::text)
        WHERE org_id = $1 AND key = $2 AND status_code = ${IDEMPOTENCY_PENDING}`,
      [orgId, key, statusCode, serializedBody],
    );
  }

  /** Drop a pending record (its request failed: a retry may run it again). */
  async release(orgId: string, key: string): Promise<void> {
    await this.db.query(`DELETE FROM idempotency_records WHERE org_id = $1 AND key = $2 AND status_code = ${IDEMPOTENCY_PENDING}`, [orgId, key]);
  }

  /** Delete the record when it was created before `olderThan` (expired, or abandoned while pending). */
  async expire(orgId: string, key: string, olderThan: Date): Promise<boolean> {
    const rows = await this.db.query(`DELETE FROM idempotency_records WHERE org_id = $1 AND key = $2 AND created_at < $3 RETURNING 1`, [orgId, key, olderThan]);
    return rows.length === 1;
  }
}
