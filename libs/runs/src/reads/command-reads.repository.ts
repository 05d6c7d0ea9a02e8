import { Injectable } from '@nestjs/common';
import type { CanonicalMessage, Part } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { selectInteractions, selectLinks, selectRun, selectViews, type InteractionRecord, type RunLinkRecord, type RunState, type RunView } from './run-rows.repository.js';

/**
 * What the write side reads before it appends (the command handlers in commands/ and
 * RuntimeOperations): the run as it is now (its guard's inputs), whether a message or an origin
 * messageId is recorded already (idempotent retries), interactions, links and delegation targets.
 * Scoped by organization; never writes.
 */
@Injectable()
export class CommandReads {
  constructor(private readonly db: DatabaseService) {}

  /** The run and its open interactions, or null (another org's run is null too). */
  get(orgId: string, runId: string): Promise<RunState | null> {
    return selectRun(this.db, orgId, runId);
  }

  /**
   * Which of the operation ids `ids` the run's log holds (`payload.opId`; served by the unique
   * index run_events_op_id_key). Read only when an append met one (RuntimeOperations.apply).
   */
  async recordedOperations(orgId: string, runId: string, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.query<{ id: string }>(
      `SELECT payload->>'opId' AS id FROM run_events WHERE org_id = $2 AND run_id = $1 AND payload ? 'opId' AND payload->>'opId' = ANY($3::text[])`,
      [runId, orgId, [...ids]],
      'runs.recorded_operations',
    );
    return new Set(rows.map((r) => r.id));
  }

  /** The read model of a run (whole history, artifacts), or null when it is not in the org. */
  async view(orgId: string, runId: string): Promise<RunView | null> {
    return (await selectViews(this.db, orgId, [runId]))[0] ?? null;
  }

  /** A run's InteractionRequests, oldest first (open and closed); one when `interactionId` is given. */
  interactions(orgId: string, runId: string, interactionId?: string): Promise<InteractionRecord[]> {
    return selectInteractions(this.db, orgId, runId, interactionId);
  }

  /** The run's children (RunLinks where it is the parent), each with the child's status now. */
  async children(orgId: string, runId: string): Promise<RunLinkRecord[]> {
    return (await selectLinks(this.db, orgId, runId)).children;
  }

  /**
   * The run `createdBy` (null: an anonymous caller) created with the message `messageId` (the
   * idempotency key of SendMessage, per caller). Served by the unique index on
   * (org_id, agent_id, COALESCE(created_by, ''), origin_message_id).
   */
  async findByOriginMessage(orgId: string, agentId: string, createdBy: string | null, messageId: string): Promise<RunState | null> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT id FROM runs WHERE org_id = $1 AND agent_id = $2 AND COALESCE(created_by, '') = $3 AND origin_message_id = $4`,
      [orgId, agentId, createdBy ?? '', messageId],
    );
    return rows[0] ? selectRun(this.db, orgId, rows[0].id) : null;
  }

  /**
   * The run a user message with `messageId` sent by `sentBy` (null: anonymous) belongs to, if it
   * was recorded (a user messageId is unique per sender across the agent's runs). Served by the
   * primary key of `message_keys`, (org_id, agent_id, sent_by, message_id), which the append path
   * writes with the message; the agent's own messages have no row there.
   */
  async findMessageRun(orgId: string, agentId: string, sentBy: string | null, messageId: string): Promise<string | null> {
    const rows = await this.db.query<{ runId: string }>(
      `SELECT run_id AS "runId" FROM message_keys WHERE org_id = $1 AND agent_id = $2 AND sent_by = $3 AND message_id = $4`,
      [orgId, agentId, sentBy ?? '', messageId],
    );
    return rows[0]?.runId ?? null;
  }

  /**
   * The user message `sentBy` (null: anonymous) recorded with `messageId` on the agent, and its
   * run: what a retry is compared with when the sender cannot tell two callers apart (anonymous
   * callers all send as ''). Read only on a retry (the write found the key taken), never on the
   * first write: `message_keys`' primary key, then the message by its row id (`messages` primary key,
   * its partition found from the key's run id).
   */
  async recordedMessage(orgId: string, agentId: string, sentBy: string | null, messageId: string): Promise<{ runId: string; message: CanonicalMessage } | null> {
    const rows = await this.db.query<{ runId: string; parts: Part[]; metadata: Record<string, unknown> | null; extensions: string[]; referenceTaskIds: string[] }>(
      `SELECT k.run_id AS "runId", m.parts, m.metadata, m.extensions, m.reference_task_ids AS "referenceTaskIds"
         FROM message_keys k JOIN messages m ON m.org_id = k.org_id AND m.run_id = k.run_id AND m.id = k.message_row_id
        WHERE k.org_id = $1 AND k.agent_id = $2 AND k.sent_by = $3 AND k.message_id = $4`,
      [orgId, agentId, sentBy ?? '', messageId],
      'runs.recorded_message',
    );
    const row = rows[0];
    if (!row) return null;
    const message: CanonicalMessage = { messageId, role: 'user', parts: row.parts };
    if (row.metadata) message.metadata = row.metadata;
    if (row.extensions.length) message.extensions = row.extensions;
    if (row.referenceTaskIds.length) message.referenceTaskIds = row.referenceTaskIds;
    return { runId: row.runId, message };
  }

  /** The link whose child run is `childRunId`, if any. */
  async linkOfChild(orgId: string, childRunId: string): Promise<{ id: string; parentRunId: string; kind: string } | null> {
    const rows = await this.db.query<{ id: string; parentRunId: string; kind: string }>(
      `SELECT id, parent_run_id AS "parentRunId", kind FROM run_links WHERE org_id = $1 AND child_run_id = $2`,
      [orgId, childRunId],
    );
    return rows[0] ?? null;
  }

  /** Depth of a run in its RunLink tree (0: not anyone's child), counted up to `max + 1`. */
  async linkDepth(orgId: string, runId: string, max: number): Promise<number> {
    const rows = await this.db.query<{ d: number | null }>(
      `WITH RECURSIVE up(run_id, d) AS (
         SELECT parent_run_id, 1 FROM run_links WHERE org_id = $3 AND child_run_id = $1
         UNION ALL
         SELECT l.parent_run_id, up.d + 1 FROM run_links l JOIN up ON l.org_id = $3 AND l.child_run_id = up.run_id WHERE up.d <= $2
       ) SELECT max(d) AS d FROM up`,
      [runId, max, orgId],
    );
    return rows[0]?.d ?? 0;
  }

  /** The published agent of `slug` in the org: its id and active revision (null: none). */
  async publishedAgent(orgId: string, slug: string): Promise<{ agentId: string; revisionId: string } | null> {
    const rows = await this.db.query<{ agentId: string; revisionId: string | null }>(
      `SELECT id AS "agentId", active_revision_id AS "revisionId" FROM agents WHERE org_id = $1 AND slug = $2`,
      [orgId, slug],
    );
    const row = rows[0];
    return row?.revisionId ? { agentId: row.agentId, revisionId: row.revisionId } : null;
  }

  /** How many times a run was resumed: in all, and after a lost execution (not handed on). */
  async resumptions(orgId: string, runId: string): Promise<{ total: number; lost: number }> {
    const rows = await this.db.query<{ total: number; lost: number }>(
      `SELECT count(*)::int AS total, (count(*) FILTER (WHERE (payload->>'handedOn') IS DISTINCT FROM 'true'))::int AS lost
         FROM run_events WHERE run_id = $1 AND org_id = $2 AND type = 'run.execution_resumed'`,
      [runId, orgId],
      'runs.resumptions',
    );
    return rows[0] ?? { total: 0, lost: 0 };
  }
}
