import { z } from 'zod';
import type { A2ATaskState } from '../task-state.js';
import { LIST_TASKS_DEFAULT_PAGE_SIZE, LIST_TASKS_MAX_PAGE_SIZE, parseRfc3339, type ListTasksPage, type ListTasksQuery } from '../list-tasks.js';
import { NonNegativeInt32, OptionalId, normalizeFields } from '../proto-json.helpers.js';
import { toV1Task, type V1Task } from './v1.mapper.js';

/** a2a.proto `enum TaskState`, by number. */
const TASK_STATES = [
  'TASK_STATE_UNSPECIFIED',
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_REJECTED',
  'TASK_STATE_AUTH_REQUIRED',
] as const;

/**
 * A TaskState filter in ProtoJSON: the enum name or its number (also as a decimal string, as
 * query parameters carry it). TASK_STATE_UNSPECIFIED / 0 means "no filter" (undefined).
 * Anything else fails (the SDK parser would map it to UNRECOGNIZED; a filter that matches
 * nothing would hide the caller's mistake).
 */
const TaskStateFilterSchema = z
  .union([z.string(), z.int()], { error: 'status must be a TaskState name (e.g. TASK_STATE_WORKING) or number' })
  .transform((v, ctx): A2ATaskState | undefined => {
    const n = typeof v === 'number' ? v : /^\d{1,2}$/.test(v) ? Number(v) : undefined;
    const name = n !== undefined ? TASK_STATES[n] : TASK_STATES.find((s) => s === v);
    if (name === undefined) {
      ctx.addIssue({ code: 'custom', message: `'${String(v).slice(0, 40)}' is not a TaskState (expected one of ${TASK_STATES.join(', ')})` });
      return z.NEVER;
    }
    return name === 'TASK_STATE_UNSPECIFIED' ? undefined : name;
  })
  // the documentation of the field (the OpenAPI document is generated from this schema)
  .meta({ description: `A TaskState name or its number: ${TASK_STATES.join(', ')} (TASK_STATE_UNSPECIFIED / 0: no filter)` });

/** int32 page_size: 1..100 (a2a.proto); a decimal string is accepted as for any ProtoJSON int. */
const PageSizeSchema = z.preprocess(
  (v) => (typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v),
  z.int({ error: 'pageSize must be an integer' }).min(1, 'pageSize must be between 1 and 100').max(LIST_TASKS_MAX_PAGE_SIZE, 'pageSize must be between 1 and 100'),
);

/** google.protobuf.Timestamp in ProtoJSON: an RFC 3339 string, parsed and rounded (see parseRfc3339). */
const TimestampSchema = z.string({ error: 'statusTimestampAfter must be an RFC 3339 timestamp string' }).transform((s, ctx) => {
  const d = parseRfc3339(s);
  if (!d) {
    ctx.addIssue({ code: 'custom', message: `'${s.slice(0, 40)}' is not an RFC 3339 timestamp (e.g. 2026-01-31T12:00:00Z)` });
    return z.NEVER;
  }
  return d;
}).meta({ format: 'date-time', description: 'An RFC 3339 timestamp' });

/**
 * v1.0 `ListTasksRequest` (params of JSON-RPC `ListTasks`; the REST binding builds the same
 * object from the query string). lowerCamelCase or snake_case, `null` = not set.
 */
export const V1ListTasksRequestSchema = z.preprocess(
  normalizeFields({
    context_id: 'contextId',
    page_size: 'pageSize',
    page_token: 'pageToken',
    history_length: 'historyLength',
    status_timestamp_after: 'statusTimestampAfter',
    include_artifacts: 'includeArtifacts',
  }),
  z.object({
    tenant: z.string().optional(),
    contextId: OptionalId,
    status: TaskStateFilterSchema.optional(),
    pageSize: PageSizeSchema.optional(),
    pageToken: z.string({ error: 'pageToken must be a string' }).optional(),
    historyLength: NonNegativeInt32.optional(),
    statusTimestampAfter: TimestampSchema.optional(),
    includeArtifacts: z.boolean({ error: 'includeArtifacts must be a boolean' }).optional(),
  }),
);
export type V1ListTasksRequest = z.infer<typeof V1ListTasksRequestSchema>;

/** Parsed v1.0 ListTasksRequest → the query of A2AOperations.listTasks (defaults applied). */
export function fromV1ListTasksRequest(req: V1ListTasksRequest): ListTasksQuery {
  const q: ListTasksQuery = {
    pageSize: req.pageSize ?? LIST_TASKS_DEFAULT_PAGE_SIZE,
    includeArtifacts: req.includeArtifacts ?? false,
  };
  if (req.contextId !== undefined) q.contextId = req.contextId;
  if (req.status !== undefined) q.state = req.status;
  if (req.statusTimestampAfter !== undefined) q.statusTimestampAfter = req.statusTimestampAfter;
  if (req.pageToken !== undefined && req.pageToken !== '') q.pageToken = req.pageToken;
  if (req.historyLength !== undefined) q.historyLength = req.historyLength;
  return q;
}

/**
 * v1.0 `ListTasksResponse`. Every field is REQUIRED in a2a.proto, so all four are always
 * present, even at their default (`tasks: []`, `nextPageToken: ""` on the last page).
 */
export interface V1ListTasksResponse {
  tasks: V1Task[];
  nextPageToken: string;
  pageSize: number;
  totalSize: number;
}

export function toV1ListTasksResponse(page: ListTasksPage): V1ListTasksResponse {
  return { tasks: page.views.map(toV1Task), nextPageToken: page.nextPageToken, pageSize: page.pageSize, totalSize: page.totalSize };
}

