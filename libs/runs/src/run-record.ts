import type { BlockedReason, RunEvent, RunKind, RunStatus } from '#libs/contracts';

/** A run row as the append path returns it (the state after the append). */
export interface RunRecord {
  id: string;
  orgId: string;
  agentId: string;
  revisionId: string;
  threadId: string;
  /** `execution` (a runtime executes it) or `reply` (answered directly when its message arrived, recorded complete). */
  kind: RunKind;
  status: RunStatus;
  blockedReason: BlockedReason | null;
  lastSequence: number;
  originMessageId: string;
  metadata: Record<string, unknown> | null;
  createdAt: Date;
  updatedAt: Date;
  statusAt: Date;
  /** Open InteractionRequests (blocking or not). */
  openInteractions: number;
  /** Bumped by every interaction event: the optimistic guard of commands that close them. */
  interactionVersion: number;
  /** The principal that created the run (`key:<api key id>`), null when anonymous. */
  createdBy: string | null;
}

/**
 * The organization check of a run looked up by id, the org id being parameter `$<param>`. Written so that no index
 * can serve it: the lookup then always goes through the index on the run's id (`runs_id_idx`; the
 * primary key is (org_id, id)). Under Citus the router planner needs a plain `org_id = $n` (served
 * by the primary key), see docs/deploy.md "Past one PostgreSQL". Plain `org_id = $2` let
 * a generic plan cached while `runs` was nearly empty (a fresh database, a new pool connection)
 * pick an org-leading index and scan every run of the organization on each call — measured: the
 * append 0.94 -> 0.34 ms and SendMessage +55% req/s on `npm run bench`.
 */
export function orgMatches(param: number): string {
  return `(org_id = $${param}) IS TRUE`;
}

/**
 * A point read of one run's rows in a partitioned table (run_events, messages, artifacts) joins
 * this instead of naming the run id itself: `FROM ${RUN_FENCE_SQL} JOIN run_events e ON e.org_id =
 * r.org_id AND e.run_id = r.id`, $1 the run id, $2 the org id. With `e.run_id = $1`, a custom plan
 * prunes the partitions when it is made and so can look cheaper than the generic plan (which
 * prunes when it runs) every time: PostgreSQL then plans the statement anew on every call — the
 * read of a run's newest event of a type did, 0.19 ms of planning per proxied task in `npm run
 * bench` (a2a runtime: saved state, extensions). Behind the OFFSET 0 fence the run id reaches the
 * partitioned table only as the outer row's value, so both plans prune at run time, cost the same,
 * and the generic one is kept (test/run-view-plan.test.ts). Columns: `id`, `org_id`.
 */
export const RUN_FENCE_SQL = `(SELECT id, org_id FROM runs WHERE id = $1 AND ${orgMatches(2)} OFFSET 0) r`;

/**
 * `messages.sent_by` of the agent's own messages: no caller id takes this value (callers are
 * `key:…`, `jwt:…`, or '' when anonymous), so a caller's messageId never collides with the agent's.
 */
export const AGENT_SENDER = 'agent';

export const RUN_COLUMNS = `id, org_id AS "orgId", agent_id AS "agentId", revision_id AS "revisionId",
  thread_id AS "threadId", kind, status, blocked_reason AS "blockedReason", last_sequence AS "lastSequence",
  origin_message_id AS "originMessageId", metadata, created_at AS "createdAt",
  updated_at AS "updatedAt", status_at AS "statusAt", open_interactions AS "openInteractions",
  interaction_version AS "interactionVersion", created_by AS "createdBy"`;

/**
 * Bytes `events` add to a run's storage (runs.stored_bytes, the unit of storage quotas): the
 * UTF-8 JSON of each message they carry and of each artifact chunk's parts. The same measure
 * StorageQuotas admits a caller's message with (`messageBytes`).
 */
export function storedBytes(events: readonly RunEvent[]): number {
  let n = 0;
  for (const e of events) {
    const p = e.payload as { message?: unknown; parts?: unknown };
    if (p.message !== undefined) n += Buffer.byteLength(JSON.stringify(p.message));
    if (e.type === 'artifact.updated' && p.parts !== undefined) n += Buffer.byteLength(JSON.stringify(p.parts));
  }
  return n;
}

/** A run row as a statement returns it (`RUN_COLUMNS`, dates as JSON strings) as a RunRecord. */
export function toRecord(raw: Record<string, unknown>): RunRecord {
  return {
    ...(raw as unknown as RunRecord),
    createdAt: new Date(raw.createdAt as string),
    updatedAt: new Date(raw.updatedAt as string),
    statusAt: new Date(raw.statusAt as string),
  };
}
