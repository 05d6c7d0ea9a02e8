import { z } from 'zod';
import { RunStatusListSchema } from './admin.schema.js';

/**
 * Run archives (docs/architecture.md "Archives"): JSON Lines, one line per run, in `(createdAt, id)`
 * order. A line is the run's row and everything that belongs to it, as stored:
 *
 *   { "cursor": <opaque: resume after this run>, "v": 1,
 *     "agent": { "slug", "revision": <revision number> },
 *     "run": <runs row, snake_case columns, without org_id / agent_id / revision_id / the execution lease and fencing token>,
 *     "events": [{ sequence, type, payload, created_at }]   // the whole log, sequence 1..last_sequence
 *     "messages" | "artifacts" | "interactions": [<projection rows, without org_id / agent_id / run_id>],
 *     "links": [<run_links rows where this run is the child, without org_id>] }
 *
 * Agents and revisions are named by slug and number, so an archive imports into another
 * organization (or deployment) that has the same agents; everything else keeps its identity
 * (run ids, thread ids, sequences, timestamps).
 */
export const RUN_ARCHIVE_VERSION = 1;
export const RUN_ARCHIVE_CONTENT_TYPE = 'application/x-ndjson';

/** Query of GET /v1/run-archive. `status` may list several statuses, comma-separated. */
export const ExportRunsQuerySchema = z.strictObject({
  agentId: z.uuid().optional(),
  status: RunStatusListSchema.optional(),
  /** Only runs created at or after this time (ISO 8601). */
  createdFrom: z.iso.datetime({ offset: true }).optional(),
  /** Only runs created before this time (ISO 8601). */
  createdTo: z.iso.datetime({ offset: true }).optional(),
  /** Stop after this many runs (default: all). */
  limit: z.coerce.number().int().min(1).optional(),
  /** Resume after the run whose line carried this `cursor`. */
  cursor: z.string().min(1).max(500).optional(),
});
export type ExportRunsQuery = z.infer<typeof ExportRunsQuerySchema>;

const Row = z.record(z.string(), z.unknown());

/** One line of a run archive, as import validates it (rows are checked by PostgreSQL's own types). */
export const RunArchiveLineSchema = z.object({
  cursor: z.string().optional(),
  v: z.literal(RUN_ARCHIVE_VERSION),
  agent: z.strictObject({ slug: z.string().min(1), revision: z.int().min(1) }),
  run: Row.and(z.object({ id: z.uuid(), last_sequence: z.int().min(0) })),
  events: z.array(z.strictObject({ sequence: z.int().min(1), type: z.string().min(1), payload: z.unknown(), created_at: z.string() })),
  messages: z.array(Row),
  artifacts: z.array(Row),
  interactions: z.array(Row),
  links: z.array(Row.and(z.object({ parent_run_id: z.uuid(), child_run_id: z.uuid() }))),
});
export type RunArchiveLine = z.infer<typeof RunArchiveLineSchema>;

/** Answer of POST /v1/run-archive (an import). */
export const ImportRunsResultSchema = z.object({
  runs: z.int(),
  events: z.int(),
  /** Links whose parent run was not in the archive (a filtered export): not restored. */
  linksSkipped: z.int(),
});
export type ImportRunsResult = z.infer<typeof ImportRunsResultSchema>;

// ------------------------------------------------------------------ retention

/** Body of PUT /v1/retention-policy and PUT /v1/retention-policy/agents/{agent}: days to keep terminal runs; null = forever. */
export const SetRetentionBodySchema = z.strictObject({
  retentionDays: z.int().min(1).max(36_500).nullable(),
});
export type SetRetentionBody = z.infer<typeof SetRetentionBodySchema>;

/** An organization's retention policy: its default and its agents' overrides (null = keep forever). */
export const RetentionPolicySchema = z.object({
  retentionDays: z.int().nullable(),
  agents: z.array(z.object({ agentId: z.uuid(), retentionDays: z.int().nullable() })),
});
export type RetentionPolicyResponse = z.infer<typeof RetentionPolicySchema>;
