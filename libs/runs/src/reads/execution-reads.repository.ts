import { Injectable } from '@nestjs/common';
import type { CanonicalMessage, Part } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { orgMatches, RUN_COLUMNS, RUN_FENCE_SQL, type RunRecord } from '../run-record.js';
import { runNotFound } from '../run-errors.js';
import { cleanMessage, selectInteractions, selectLinks, selectRun, selectViews, type InteractionRecord, type RunLinkRecord, type RunState, type RunView } from './run-rows.repository.js';

/** The payload of the newest event of type $3 in run $1 of org $2 (the run found behind RUN_FENCE_SQL). */
export const LATEST_OF_TYPE_SQL = `SELECT e.payload FROM ${RUN_FENCE_SQL} JOIN run_events e ON e.org_id = r.org_id AND e.run_id = r.id
 WHERE e.type = $3 ORDER BY e.sequence DESC LIMIT 1`;

/**
 * What an execution reads (libs/execution: RunExecutor, LostExecutionPolicy; through them the
 * RuntimeContext a runtime sees): its input, its revision's runtime config, the thread so far,
 * what it saved and recorded before, the trigger it runs for. Scoped by organization; never writes
 * (an execution writes through RuntimeOperations).
 */
@Injectable()
export class ExecutionReads {
  constructor(private readonly db: DatabaseService) {}

  /** The run and its open interactions, or null (the lost-execution policy's first look). */
  run(orgId: string, runId: string): Promise<RunState | null> {
    return selectRun(this.db, orgId, runId);
  }

  /**
   * What an execution needs when its job did not carry it, in one round trip: the run (status,
   * revision, thread) and the message that triggered it (`messageId` null: the run's newest user
   * message). Null when the run is not in the org.
   */
  async input(orgId: string, runId: string, messageId: string | null): Promise<{ run: RunRecord; message: CanonicalMessage | null } | null> {
    const rows = await this.db.query<Record<string, unknown> & { message: Parameters<typeof cleanMessage>[0] | null }>(
      `SELECT ${RUN_COLUMNS},
              (SELECT json_build_object('messageId', m.message_id, 'role', m.role, 'parts', m.parts, 'metadata', m.metadata, 'extensions', m.extensions, 'referenceTaskIds', m.reference_task_ids)
                 FROM messages m WHERE m.run_id = runs.id AND m.org_id = runs.org_id AND ($3::text IS NULL AND m.role = 'user' OR m.message_id = $3)
                ORDER BY m.sequence DESC LIMIT 1) AS message
         FROM runs WHERE id = $1 AND ${orgMatches(2)}`,
      [runId, orgId, messageId],
      'runs.execution_input',
    );
    const row = rows[0];
    if (!row) return null;
    const { message, ...run } = row;
    return { run: run as unknown as RunRecord, message: message ? cleanMessage(message) : null };
  }

  /** The runtime config of a revision, null when none (immutable once published, so callers may cache it by id). */
  async revisionRuntime(orgId: string, revisionId: string): Promise<unknown | null> {
    const rows = await this.db.query<{ runtime: unknown }>(`SELECT runtime FROM agent_revisions WHERE id = $1 AND org_id = $2`, [revisionId, orgId]);
    return rows[0]?.runtime ?? null;
  }

  /**
   * The conversation of a thread (A2A contextId) of one agent so far: its messages across its runs,
   * oldest first (by commit time, then sequence), at most the newest `limit`.
   */
  async threadHistory(orgId: string, agentId: string, threadId: string, limit: number): Promise<Array<CanonicalMessage & { runId: string; sequence: number }>> {
    const rows = await this.db.query<{ runId: string; messageId: string; role: string; parts: Part[]; metadata: unknown; extensions: string[]; sequence: number }>(
      `SELECT * FROM (
         SELECT m.run_id AS "runId", m.message_id AS "messageId", m.role, m.parts, m.metadata, m.extensions, m.reference_task_ids AS "referenceTaskIds", m.sequence, m.created_at
           FROM runs r JOIN messages m ON m.run_id = r.id AND m.org_id = r.org_id
          WHERE r.org_id = $1 AND r.agent_id = $2 AND r.thread_id = $3
          ORDER BY m.created_at DESC, m.sequence DESC LIMIT $4) h
        ORDER BY h.created_at, h.sequence`,
      [orgId, agentId, threadId, limit],
      'runs.thread_history',
    );
    return rows.map((row) => ({ ...cleanMessage(row), runId: row.runId, sequence: row.sequence }));
  }

  /** The state the run's runtime saved last (`run.runtime_state_saved`), or null when none. */
  async savedState(orgId: string, runId: string): Promise<unknown> {
    const found = await this.latestOfType(orgId, runId, 'run.runtime_state_saved');
    return (found as { state?: unknown } | null)?.state ?? null;
  }

  /** The A2A extensions the run's creating request activated (its `run.created` event), [] when none. */
  async extensions(orgId: string, runId: string): Promise<string[]> {
    const ext = ((await this.latestOfType(orgId, runId, 'run.created')) as { extensions?: unknown } | null)?.extensions;
    return Array.isArray(ext) ? ext.filter((u): u is string => typeof u === 'string') : [];
  }

  /** The operation ids (`opId`) the run's events carry, oldest first (RuntimeOp.opId). */
  async operationIds(orgId: string, runId: string): Promise<string[]> {
    const rows = await this.db.query<{ op_id: string }>(
      `SELECT payload->>'opId' AS op_id FROM run_events WHERE run_id = $1 AND org_id = $2 AND payload ? 'opId' ORDER BY sequence`,
      [runId, orgId],
      'runs.operation_ids',
    );
    return rows.map((r) => r.op_id);
  }

  /** One InteractionRequest of the run (open or closed), null when it has none with that id. */
  async interaction(orgId: string, runId: string, interactionId: string): Promise<InteractionRecord | null> {
    return (await selectInteractions(this.db, orgId, runId, interactionId))[0] ?? null;
  }

  /** The run's children (RunLinks where it is the parent), each with the child's status now. */
  async children(orgId: string, runId: string): Promise<RunLinkRecord[]> {
    return (await selectLinks(this.db, orgId, runId)).children;
  }

  /**
   * The run's child link `linkId` and the state the run gave it at delegation (the `state` of its
   * `run.linked` event, absent when it gave none). Null when the run has no such child link.
   */
  async childLink(orgId: string, runId: string, linkId: string): Promise<{ link: RunLinkRecord; state?: unknown } | null> {
    const link = (await this.children(orgId, runId)).find((l) => l.id === linkId);
    if (!link) return null;
    const rows = await this.db.query<{ type: string; hasState: boolean; state: unknown }>(
      `SELECT type, payload ? 'state' AS "hasState", payload->'state' AS state FROM run_events WHERE run_id = $1 AND org_id = $2 AND sequence = $3`,
      [runId, orgId, link.sequence],
    );
    const linked = rows[0];
    return linked?.type === 'run.linked' && linked.hasState ? { link, state: linked.state } : { link };
  }

  /** The read model of a run (whole history, artifacts). Errors: `run.not_found`. */
  async view(orgId: string, runId: string): Promise<RunView> {
    const [view] = await selectViews(this.db, orgId, [runId]);
    if (!view) throw runNotFound(runId);
    return view;
  }

  /**
   * The event that triggered the execution a resumption (`run.execution_resumed` at `before`)
   * replaces: the newest trigger event (a user message or answer, an expiry that continues, the
   * settlement of an awaited child) before `before`. `first`: it is the run's first user message
   * (the run's creation). Null when none.
   */
  async triggerBefore(orgId: string, runId: string, before: number): Promise<{ sequence: number; type: string; payload: Record<string, unknown>; first: boolean } | null> {
    const rows = await this.db.query<{ sequence: number; type: string; payload: Record<string, unknown>; first: boolean }>(
      `SELECT e.sequence, e.type, e.payload,
              NOT EXISTS (SELECT 1 FROM run_events p WHERE p.org_id = e.org_id AND p.run_id = e.run_id AND p.sequence < e.sequence
                            AND p.type IN ('message.added', 'interaction.responded') AND p.payload->'message'->>'role' = 'user') AS first
         FROM run_events e
        WHERE e.run_id = $1 AND e.org_id = $2 AND e.sequence < $3 AND (
              (e.type IN ('message.added', 'interaction.responded') AND e.payload->'message'->>'role' = 'user')
           OR (e.type = 'interaction.expired' AND e.payload->>'outcome' = 'continue')
           OR (e.type = 'run.link_updated' AND e.payload->>'status' IN ('completed', 'failed', 'canceled', 'rejected')
               AND EXISTS (SELECT 1 FROM run_links l WHERE l.org_id = e.org_id AND l.id = (e.payload->>'linkId')::uuid AND l.awaiting)))
        ORDER BY e.sequence DESC LIMIT 1`,
      [runId, orgId, before],
      'runs.trigger_before',
    );
    return rows[0] ?? null;
  }

  /**
   * The payload of the newest event of `type` in the run's log, null when none. The run is found
   * first behind a fence (RUN_FENCE_SQL), so the plan PostgreSQL keeps is a generic one.
   */
  private async latestOfType(orgId: string, runId: string, type: string): Promise<unknown> {
    const rows = await this.db.query<{ payload: unknown }>(LATEST_OF_TYPE_SQL, [runId, orgId, type], 'runs.latest_of_type');
    return rows[0]?.payload ?? null;
  }
}
