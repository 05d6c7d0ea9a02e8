import { Injectable } from '@nestjs/common';
import type { RunEvent, SequencedOutputEnvelope } from '#libs/contracts';
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
 * The log entries that set a run's (status, blockedReason), as libs/runs' RunViews reads them for
 * `stateAt` (the predicate of libs/runs' `isStatusEvent`, in SQL, on alias `e`).
 */
const STATUS_EVENT_SQL = `(e.type IN ('run.status_changed', 'interaction.requested')
  OR (e.type IN ('interaction.responded', 'interaction.expired') AND COALESCE((e.payload->>'blocking')::boolean, true)))`;

/** A config claimed for delivery, with the log after its cursor (see `claimBatch`). */
export interface ClaimedPushConfig {
  row: PushConfigRow;
  /** The run's log after `row.cursor`, in order, at most the page asked for. */
  events: SequencedOutputEnvelope[];
  /**
   * The newest status-setting entry at or before the cursor (fold it with libs/runs' `foldState`;
   * null: none, i.e. the run was just created), or `undefined` when the caller said it knows
   * the state at this cursor and it was not read.
   */
  stateEvent?: { type: string; payload: object } | null;
}

/** What one claim of a config came to, recorded by `recordBatch`. */
export interface PushOutcome {
  /** push_configs.id */
  id: string;
  /** The new cursor (≥ the claimed one; the last entry delivered or skipped). */
  cursor: number;
  /** The cursor moved or a delivery succeeded: the failure state resets. */
  progressed: boolean;
  /** A failed attempt ended this claim: schedule the next one after `delayMs`. */
  failure?: { error: string; delayMs: number; gone: boolean };
  /** The run ended and its log is fully delivered. */
  done: boolean;
  /** Keep the lease (renewed for the batch's `ttlMs`) instead of freeing it; ignored on a failure or `done`. */
  keep?: boolean;
}

/** One delivery attempt to record. */
export type PushAttemptRow = Omit<PushDeliveryRow, 'attemptedAt'> & { configRowId: string; orgId: string; runId: string };

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
         SELECT id, created_by FROM push_configs WHERE org_id = $2 AND run_id = $3 AND config_id = $5 AND deleted_at IS NULL FOR UPDATE
       ), upd AS (
         UPDATE push_configs pc SET url = $7, token = $8, auth_scheme = $9, auth_credentials = $10, status = 'active',
                attempts = 0, first_failure_at = NULL, last_error = NULL, next_attempt_at = now(), updated_at = now()
           FROM existing e WHERE pc.org_id = $2 AND pc.id = e.id AND e.created_by IS NOT DISTINCT FROM $12
         RETURNING ${columns('pc')}, false AS created
       ), ins AS (
         INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, token, auth_scheme, auth_credentials, webhook_secret, created_by, cursor)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 WHERE NOT EXISTS (SELECT 1 FROM existing)
         RETURNING ${COLUMNS}, true AS created
       )
       SELECT * FROM upd UNION ALL SELECT * FROM ins`,
      [row.id, row.orgId, row.runId, row.agentId, row.configId, row.protocolVersion, row.url, row.token, row.authScheme, row.authCredentials, row.webhookSecret, row.createdBy, row.cursor],
      'push.upsert',
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

  /**
   * The live configs of a run (`task`; 0 for null, a task not created yet), and those of the organization still in delivery (`active`:
   * status active, the ones the workers deliver) counted up to `activeMax` (a bounded count: at most that many index
   * entries are read), in one statement.
   */
  async count(orgId: string, runId: string | null, activeMax: number): Promise<{ task: number; active: number }> {
    const rows = await this.db.query<{ task: number; active: number }>(
      `SELECT (SELECT count(*)::int FROM push_configs WHERE org_id = $1 AND run_id = $2::uuid AND deleted_at IS NULL) AS task,
              (SELECT count(*)::int FROM (SELECT 1 FROM push_configs WHERE org_id = $1 AND deleted_at IS NULL AND status = 'active' LIMIT $3) x) AS active`,
      [orgId, runId, activeMax],
      'push.count',
    );
    return rows[0] ?? { task: 0, active: 0 };
  }

  /**
   * Mark these configs' secrets as shown; returns the ids that had not been shown before (their
   * secrets may be returned now, once).
   */
  async reveal(orgId: string, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.query<{ id: string }>(
      `UPDATE push_configs SET secret_revealed = true WHERE org_id = $1 AND id = ANY($2::uuid[]) AND NOT secret_revealed RETURNING id`,
      [orgId, ids],
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

  /**
   * The newest delivery attempts of a config of run `runId` (admin view). The run id confines the
   * read to the run's partition of `push_deliveries` (partitioned by run period).
   */
  deliveries(orgId: string, runId: string, configRowId: string, limit: number): Promise<PushDeliveryRow[]> {
    return this.db.query<PushDeliveryRow>(
      `SELECT sequence, webhook_id AS "webhookId", status_code AS "statusCode", error, latency_ms AS "latencyMs", attempted_at AS "attemptedAt"
         FROM push_deliveries WHERE org_id = $1 AND run_id = $2 AND config_id = $3 ORDER BY id DESC LIMIT $4`,
      [orgId, runId, configRowId, limit],
    );
  }

  // ---------------------------------------------------------------- delivery (worker)

  /** Active configs of these runs (id and run id). */
  activeForRuns(runIds: readonly string[]): Promise<Array<{ id: string; runId: string }>> {
    return this.db.query(
      `SELECT id, run_id AS "runId" FROM push_configs WHERE run_id = ANY($1::uuid[]) AND deleted_at IS NULL AND status = 'active'`,
      [runIds],
      'push.active_for_runs',
    );
  }

  /**
   * Configs with something to deliver now: active, due, not leased (or the lease expired, or
   * `owner` holds it), and behind their run's log or finished with it (then marked done).
   */
  due(limit: number, owner: string | null = null): Promise<Array<{ id: string; runId: string }>> {
    return this.db.query(
      `SELECT pc.id, pc.run_id AS "runId" FROM push_configs pc JOIN runs r ON r.id = pc.run_id
        WHERE pc.deleted_at IS NULL AND pc.status = 'active' AND pc.next_attempt_at <= now()
          AND (pc.lease_until IS NULL OR pc.lease_until < now() OR pc.lease_owner = $2)
          AND (pc.cursor < r.last_sequence OR r.status IN ('completed', 'failed', 'canceled', 'rejected'))
        ORDER BY pc.next_attempt_at LIMIT $1`,
      [limit, owner],
    );
  }

  /** Free the leases `owner` holds on these configs (a worker shutting down). */
  async releaseMany(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length === 0) return;
    await this.db.query(`UPDATE push_configs SET lease_owner = NULL, lease_until = NULL WHERE id = ANY($1::uuid[]) AND lease_owner = $2`, [ids, owner]);
  }

  /**
   * Take the leases of many configs for `ttlMs` and read, in the same statement, each one's log
   * after its cursor (at most `page` entries, joined to the run for the thread id) and the
   * status-setting entry at or before the cursor (the projection's starting state) — unless
   * `knownStates` holds that config id at that very cursor (the caller still knows the state).
   * Configs leased by another owner, not due, not active or deleted are left out. Errors: the
   * database's, as thrown by DatabaseService.
   */
  async claimBatch(ids: readonly string[], owner: string, ttlMs: number, page: number, knownStates: ReadonlyMap<string, number> = new Map()): Promise<ClaimedPushConfig[]> {
    if (ids.length === 0) return [];
    const knownIds = [...knownStates.keys()].filter((id) => ids.includes(id));
    // one config (a wake-up's claim, the usual case): `id = $1`, whose generic plan PostgreSQL
    // keeps; the array form's generic plan assumes ten configs, so it was planned on most calls (1 ms)
    const one = ids.length === 1;
    const rows = await this.db.query<PushConfigRow & { threadId: string; readState: boolean; stateEvent: { type: string; payload: object } | null; events: Array<{ sequence: number; type: RunEvent['type']; payload: unknown; createdAt: string }> }>(
      `WITH c AS (
         UPDATE push_configs SET lease_owner = $2, lease_until = now() + $3 * interval '1 millisecond'
          WHERE ${one ? 'id = $1::uuid' : 'id = ANY($1::uuid[])'} AND deleted_at IS NULL AND status = 'active' AND next_attempt_at <= now()
            AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $2)
         RETURNING *
       ), k AS (
         SELECT * FROM unnest($5::uuid[], $6::int[]) AS k(id, cursor)
       )
       SELECT ${columns('c')}, r.thread_id AS "threadId", s.read AS "readState",
              CASE WHEN s.read AND c.cursor > 0 THEN
                (SELECT json_build_object('type', e.type, 'payload', e.payload) FROM run_events e
                  WHERE e.run_id = c.run_id AND e.org_id = c.org_id AND e.sequence <= c.cursor AND ${STATUS_EVENT_SQL}
                  ORDER BY e.sequence DESC LIMIT 1) END AS "stateEvent",
              COALESCE((SELECT json_agg(json_build_object('sequence', e.sequence, 'type', e.type, 'payload', e.payload, 'createdAt', e.created_at) ORDER BY e.sequence)
                 FROM (SELECT e.sequence, e.type, e.payload, e.created_at FROM run_events e
                        WHERE e.run_id = c.run_id AND e.org_id = c.org_id AND e.sequence > c.cursor
                        ORDER BY e.sequence LIMIT $4) e), '[]'::json) AS events
         FROM c JOIN runs r ON r.id = c.run_id AND r.org_id = c.org_id
         CROSS JOIN LATERAL (SELECT NOT EXISTS (SELECT 1 FROM k WHERE k.id = c.id AND k.cursor = c.cursor) AS read) s`,
      [one ? ids[0] : ids, owner, ttlMs, page, knownIds, knownIds.map((id) => knownStates.get(id)!)],
      one ? 'push.claim_one' : 'push.claim_batch',
    );
    return rows.map(({ threadId, readState, stateEvent, events, ...row }) => ({
      row,
      events: events.map((e) => ({ runId: row.runId, threadId, sequence: e.sequence, occurredAt: new Date(e.createdAt).toISOString(), event: { type: e.type, payload: e.payload } as RunEvent })),
      ...(readState && { stateEvent: stateEvent ?? null }),
    }));
  }

  /**
   * Record what many claims came to, in one statement: every attempt (successes and failures)
   * into push_deliveries; per config the cursor (never backwards), the failure state (reset on
   * progress; on a failure counted, `next_attempt_at` = now + delay, 410 → `gone`, failing since
   * longer than `budgetMs` → `failing`), `done` when the run ended and all was delivered, and the
   * lease released — or, with `keep` (no failure, not done), renewed for `ttlMs`. Only configs
   * whose lease `owner` still holds (and not deleted) change; the result lists those, with their
   * status after it.
   */
  async recordBatch(owner: string, outcomes: readonly PushOutcome[], attempts: readonly PushAttemptRow[], budgetMs: number, ttlMs: number): Promise<Array<{ id: string; status: string }>> {
    if (outcomes.length === 0 && attempts.length === 0) return [];
    return this.db.query<{ id: string; status: string }>(
      `WITH i AS (
         SELECT *, keep AND NOT failed AND NOT done AS held FROM jsonb_to_recordset($2::jsonb) AS t(id uuid, cursor int, progressed boolean, failed boolean, gone boolean, error text, delay_ms int, done boolean, keep boolean)
       ), d AS (
         INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, error, latency_ms)
         SELECT (a->>'configRowId')::uuid, (a->>'orgId')::uuid, (a->>'runId')::uuid, (a->>'sequence')::int, a->>'webhookId',
                (a->>'statusCode')::int, a->>'error', (a->>'latencyMs')::int
           FROM jsonb_array_elements($3::jsonb) AS t(a)
       )
       UPDATE push_configs pc SET
              cursor = GREATEST(pc.cursor, i.cursor),
              attempts = CASE WHEN i.failed AND i.progressed THEN 1 WHEN i.failed THEN pc.attempts + 1 WHEN i.progressed THEN 0 ELSE pc.attempts END,
              first_failure_at = CASE WHEN i.failed AND i.progressed THEN now() WHEN i.failed THEN COALESCE(pc.first_failure_at, now())
                                      WHEN i.progressed THEN NULL ELSE pc.first_failure_at END,
              last_error = CASE WHEN i.failed THEN i.error WHEN i.progressed THEN NULL ELSE pc.last_error END,
              next_attempt_at = CASE WHEN i.failed THEN now() + i.delay_ms * interval '1 millisecond' ELSE pc.next_attempt_at END,
              status = CASE WHEN i.failed AND i.gone THEN 'gone'
                            WHEN i.failed AND NOT i.progressed AND COALESCE(pc.first_failure_at, now()) < now() - $4 * interval '1 millisecond' THEN 'failing'
                            WHEN NOT i.failed AND i.done THEN 'done'
                            ELSE pc.status END,
              lease_owner = CASE WHEN i.held THEN pc.lease_owner END,
              lease_until = CASE WHEN i.held THEN now() + $5 * interval '1 millisecond' END, updated_at = now()
         FROM i WHERE pc.id = i.id AND pc.lease_owner = $1 AND pc.deleted_at IS NULL
       RETURNING pc.id, pc.status`,
      [
        owner,
        JSON.stringify(outcomes.map((o) => ({ id: o.id, cursor: o.cursor, progressed: o.progressed, failed: o.failure !== undefined, gone: o.failure?.gone ?? false, error: o.failure?.error ?? null, delay_ms: o.failure?.delayMs ?? 0, done: o.done, keep: o.keep ?? false }))),
        JSON.stringify(attempts),
        budgetMs,
        ttlMs,
      ],
      'push.record_batch',
    );
  }
}
