import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/** A push config row as stored (secrets still encrypted). */
export interface PushConfigRow {
  id: string;
  orgId: string;
  runId: string;
  agentId: string;
  configId: string;
  protocolVersion: '1.0' | '0.3';
  url: string;
  token: string | null;
  authScheme: string | null;
  authCredentials: string | null;
  webhookSecret: string;
  secretRevealed: boolean;
  createdBy: string | null;
  /** active | failing | gone | done */
  status: string;
  cursor: number;
  attempts: number;
  nextAttemptAt: Date;
  firstFailureAt: Date | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** One recorded delivery attempt. */
export interface PushDeliveryRow {
  sequence: number;
  webhookId: string;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  attemptedAt: Date;
}

const FIELDS: Array<[string, string]> = [
  ['id', 'id'], ['org_id', 'orgId'], ['run_id', 'runId'], ['agent_id', 'agentId'], ['config_id', 'configId'],
  ['protocol_version', 'protocolVersion'], ['url', 'url'], ['token', 'token'], ['auth_scheme', 'authScheme'],
  ['auth_credentials', 'authCredentials'], ['webhook_secret', 'webhookSecret'], ['secret_revealed', 'secretRevealed'], ['created_by', 'createdBy'], ['status', 'status'],
  ['cursor', 'cursor'], ['attempts', 'attempts'], ['next_attempt_at', 'nextAttemptAt'], ['first_failure_at', 'firstFailureAt'],
  ['last_error', 'lastError'], ['created_at', 'createdAt'], ['updated_at', 'updatedAt'],
];

/** The row's columns as PushConfigRow fields, qualified with `alias` when given. */
function columns(alias?: string): string {
  return FIELDS.map(([c, f]) => `${alias ? `${alias}.` : ''}${c} AS "${f}"`).join(', ');
}
const COLUMNS = columns();

/**
 * Push configs and their delivery bookkeeping. Every query of a caller is scoped by org and run
 * (and by the principal that created the config, NULL-safe); the delivery queries are the
 * worker's, by config id, and move only under the config's lease.
 */
@Injectable()
export class PushConfigRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Create a config, or update the one with the same (run, configId) of the same principal (A2A
   * "set"): url, token and authentication change, the cursor and the signing secret stay.
   * `created: false` on an update. Null when another principal holds that configId on the run.
   */
  async upsert(row: Omit<PushConfigRow, 'secretRevealed' | 'status' | 'attempts' | 'nextAttemptAt' | 'firstFailureAt' | 'lastError' | 'createdAt' | 'updatedAt'>): Promise<{ row: PushConfigRow; created: boolean } | null> {
    const rows = await this.db.query<PushConfigRow & { created: boolean }>(
      `WITH existing AS (
         SELECT id, created_by FROM push_configs WHERE run_id = $3 AND config_id = $5 AND deleted_at IS NULL FOR UPDATE
       ), upd AS (
         UPDATE push_configs pc SET url = $7, token = $8, auth_scheme = $9, auth_credentials = $10, status = 'active',
                attempts = 0, first_failure_at = NULL, last_error = NULL, next_attempt_at = now(), updated_at = now()
           FROM existing e WHERE pc.id = e.id AND e.created_by IS NOT DISTINCT FROM $12
         RETURNING ${columns('pc')}, false AS created
       ), ins AS (
         INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, token, auth_scheme, auth_credentials, webhook_secret, created_by, cursor)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 WHERE NOT EXISTS (SELECT 1 FROM existing)
         RETURNING ${COLUMNS}, true AS created
       )
       SELECT * FROM upd UNION ALL SELECT * FROM ins`,
      [row.id, row.orgId, row.runId, row.agentId, row.configId, row.protocolVersion, row.url, row.token, row.authScheme, row.authCredentials, row.webhookSecret, row.createdBy, row.cursor],
    );
    const r = rows[0];
    if (!r) return null;
    const { created, ...config } = r;
    return { row: config, created };
  }

  /** Live configs of a run visible to `createdBy` (NULL-safe), oldest first. */
  list(orgId: string, runId: string, createdBy: string | null): Promise<PushConfigRow[]> {
    return this.db.query<PushConfigRow>(
      `SELECT ${COLUMNS} FROM push_configs
        WHERE org_id = $1 AND run_id = $2 AND deleted_at IS NULL AND created_by IS NOT DISTINCT FROM $3
        ORDER BY created_at, id`,
      [orgId, runId, createdBy],
    );
  }

  /** Every live config of a run (admin view), oldest first. */
  listAll(orgId: string, runId: string): Promise<PushConfigRow[]> {
    return this.db.query<PushConfigRow>(`SELECT ${COLUMNS} FROM push_configs WHERE org_id = $1 AND run_id = $2 AND deleted_at IS NULL ORDER BY created_at, id`, [orgId, runId]);
  }

  async count(runId: string): Promise<number> {
    const rows = await this.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM push_configs WHERE run_id = $1 AND deleted_at IS NULL`, [runId]);
    return rows[0]?.n ?? 0;
  }

  /**
   * Mark these configs' secrets as shown; returns the ids that had not been shown before (their
   * secrets may be returned now, once).
   */
  async reveal(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.query<{ id: string }>(
      `UPDATE push_configs SET secret_revealed = true WHERE id = ANY($1::uuid[]) AND NOT secret_revealed RETURNING id`,
      [ids],
    );
    return new Set(rows.map((r) => r.id));
  }

  /** Soft-delete; true when a live config was deleted (deliveries stop at their next step). */
  async delete(orgId: string, runId: string, configId: string, createdBy: string | null): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE push_configs SET deleted_at = now(), updated_at = now(), lease_owner = NULL, lease_until = NULL
        WHERE org_id = $1 AND run_id = $2 AND config_id = $3 AND deleted_at IS NULL AND created_by IS NOT DISTINCT FROM $4
        RETURNING 1`,
      [orgId, runId, configId, createdBy],
    );
    return rows.length > 0;
  }

  /** The newest delivery attempts of a config (admin view). */
  deliveries(configRowId: string, limit: number): Promise<PushDeliveryRow[]> {
    return this.db.query<PushDeliveryRow>(
      `SELECT sequence, webhook_id AS "webhookId", status_code AS "statusCode", error, latency_ms AS "latencyMs", attempted_at AS "attemptedAt"
         FROM push_deliveries WHERE config_id = $1 ORDER BY id DESC LIMIT $2`,
      [configRowId, limit],
    );
  }

  // ---------------------------------------------------------------- delivery (worker)

  /** Active configs of these runs (id and run id). */
  activeForRuns(runIds: readonly string[]): Promise<Array<{ id: string; runId: string }>> {
    return this.db.query(
      `SELECT id, run_id AS "runId" FROM push_configs WHERE run_id = ANY($1::uuid[]) AND deleted_at IS NULL AND status = 'active'`,
      [runIds],
    );
  }

  /**
   * Configs with something to deliver now: active, due, not leased (or the lease expired), and
   * behind their run's log or finished with it (then marked done by their loop).
   */
  due(limit: number): Promise<Array<{ id: string; runId: string }>> {
    return this.db.query(
      `SELECT pc.id, pc.run_id AS "runId" FROM push_configs pc JOIN runs r ON r.id = pc.run_id
        WHERE pc.deleted_at IS NULL AND pc.status = 'active' AND pc.next_attempt_at <= now()
          AND (pc.lease_until IS NULL OR pc.lease_until < now())
          AND (pc.cursor < r.last_sequence OR r.status IN ('completed', 'failed', 'canceled', 'rejected'))
        ORDER BY pc.next_attempt_at LIMIT $1`,
      [limit],
    );
  }

  /**
   * Take the config's lease for `ttlMs` (one delivery loop per config across all workers). Null
   * when it is leased by someone else, not due, not active or deleted.
   */
  async claim(id: string, owner: string, ttlMs: number): Promise<PushConfigRow | null> {
    const rows = await this.db.query<PushConfigRow>(
      `UPDATE push_configs SET lease_owner = $2, lease_until = now() + $3 * interval '1 millisecond'
        WHERE id = $1 AND deleted_at IS NULL AND status = 'active' AND next_attempt_at <= now()
          AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $2)
        RETURNING ${COLUMNS}`,
      [id, owner, ttlMs],
    );
    return rows[0] ?? null;
  }

  /**
   * Delivered events (2xx), or events with nothing to deliver: record the attempts (many in one
   * statement), move the cursor to `sequence`, reset the failure state and renew the lease. False
   * when the lease is no longer ours or the config was deleted (the loop stops).
   */
  async advance(id: string, owner: string, sequence: number, ttlMs: number, attempts: ReadonlyArray<Omit<PushDeliveryRow, 'attemptedAt'> & { orgId: string; runId: string }> = []): Promise<boolean> {
    const rows = await this.db.query(
      `WITH d AS (
         INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, error, latency_ms)
         SELECT $1, (a->>'orgId')::uuid, (a->>'runId')::uuid, (a->>'sequence')::int, a->>'webhookId',
                (a->>'statusCode')::int, a->>'error', (a->>'latencyMs')::int
           FROM jsonb_array_elements($5::jsonb) AS t(a)
       )
       UPDATE push_configs SET cursor = GREATEST(cursor, $3), attempts = 0, first_failure_at = NULL, last_error = NULL,
              lease_until = now() + $4 * interval '1 millisecond', updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND deleted_at IS NULL
        RETURNING 1`,
      [id, owner, sequence, ttlMs, JSON.stringify(attempts)],
      'push.advance',
    );
    return rows.length > 0;
  }

  /**
   * A failed attempt: record it, count it, schedule the next attempt after `delayMs` and release
   * the lease. `gone` (410) stops the config; a config failing for longer than `budgetMs` is
   * marked `failing` with its last error. Returns the config's status after it.
   */
  async fail(id: string, owner: string, attempt: Omit<PushDeliveryRow, 'attemptedAt'> & { orgId: string; runId: string }, delayMs: number, budgetMs: number, gone: boolean): Promise<string | null> {
    const rows = await this.db.query<{ status: string }>(
      `WITH d AS (
         INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, error, latency_ms)
         VALUES ($1, $3, $4, $5, $6, $7, $8, $9)
       )
       UPDATE push_configs SET attempts = attempts + 1, first_failure_at = COALESCE(first_failure_at, now()),
              last_error = $10, next_attempt_at = now() + $11 * interval '1 millisecond',
              status = CASE WHEN $12::boolean THEN 'gone'
                            WHEN COALESCE(first_failure_at, now()) < now() - $13 * interval '1 millisecond' THEN 'failing'
                            ELSE status END,
              lease_owner = NULL, lease_until = NULL, updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND deleted_at IS NULL
        RETURNING status`,
      [id, owner, attempt.orgId, attempt.runId, attempt.sequence, attempt.webhookId, attempt.statusCode, attempt.error, attempt.latencyMs, attempt.error ?? `HTTP ${attempt.statusCode}`, delayMs, gone, budgetMs],
    );
    return rows[0]?.status ?? null;
  }

  /** Give the lease back (and mark the config done when its run ended and all is delivered). */
  async release(id: string, owner: string, done: boolean): Promise<void> {
    await this.db.query(
      `UPDATE push_configs SET lease_owner = NULL, lease_until = NULL, status = CASE WHEN $3::boolean THEN 'done' ELSE status END, updated_at = now()
        WHERE id = $1 AND lease_owner = $2`,
      [id, owner, done],
    );
  }

  /** Drop delivery attempts older than `days`. */
  async pruneDeliveries(days: number): Promise<void> {
    await this.db.query(`DELETE FROM push_deliveries WHERE attempted_at < now() - $1 * interval '1 day'`, [days]);
  }
}
