import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { BlockedReason, RunStatus } from '#libs/contracts';
import { isUuid, type RunListFilter, type RunView } from '#libs/runs';
import { type A2ATaskState } from './task-state.js';
import { A2AError } from './a2a.errors.js';

/**
 * ListTasks (A2A v1.0 §3.1.4, a2a.proto `ListTasksRequest` / `ListTasksResponse`), the
 * version-neutral part: the task-state filter as SQL-able run filters, the opaque page token,
 * and the RFC 3339 timestamp filter. Tasks are listed newest status first
 * (`status_at DESC, id DESC`), keyset-paginated, always scoped to one agent of one organization.
 */

/** a2a.proto: "If unspecified, at most 50 tasks will be returned." */
export const LIST_TASKS_DEFAULT_PAGE_SIZE = 50;
/** a2a.proto: "The minimum value is 1. The maximum value is 100." */
export const LIST_TASKS_MAX_PAGE_SIZE = 100;

/** A parsed ListTasks request (see `fromV1ListTasksRequest`). */
export interface ListTasksQuery {
  /** Only tasks of this context (thread). */
  contextId?: string;
  /** Only tasks in this (derived) state; undefined = any (TASK_STATE_UNSPECIFIED). */
  state?: A2ATaskState;
  /**
   * Only tasks whose status changed at or after this instant (a2a.proto: "greater than or equal
   * to"), already rounded up to the millisecond the database stores (see `parseRfc3339`).
   */
  statusTimestampAfter?: Date;
  /** 1..100. */
  pageSize: number;
  /** `nextPageToken` of a previous page of the same query; undefined = first page. */
  pageToken?: string;
  /** Per task, as GetTask: undefined = whole history, 0 = none. */
  historyLength?: number;
  /** a2a.proto: "Defaults to false to reduce payload size." */
  includeArtifacts: boolean;
}

/** One page: the tasks' read models plus the pagination fields of ListTasksResponse. */
export interface ListTasksPage {
  views: RunView[];
  /** Empty string on the last page (a2a.proto: "empty if there are no more results"). */
  nextPageToken: string;
  /** The page size used (the requested one, or the default). */
  pageSize: number;
  /** Tasks matching the filters across all pages (the token's position is ignored). */
  totalSize: number;
}

/**
 * The run filter equivalent to a derived A2A TaskState, such that a run matches exactly when
 * `deriveTaskState(status, blockedReason)` returns `state` (libs/runs/run-state.ts):
 * the interrupted states are the interaction overlay on an active run, the active states
 * require no overlay, and terminal states ignore the overlay.
 */
export function taskStateFilter(state: A2ATaskState): Pick<RunListFilter, 'status' | 'blocked'> {
  const active: RunStatus[] = ['submitted', 'working'];
  const inputReasons: BlockedReason[] = ['input_required', 'confirmation_required'];
  switch (state) {
    case 'TASK_STATE_SUBMITTED':
      return { status: ['submitted'], blocked: 'none' };
    case 'TASK_STATE_WORKING':
      return { status: ['working'], blocked: 'none' };
    case 'TASK_STATE_INPUT_REQUIRED':
      return { status: active, blocked: inputReasons };
    case 'TASK_STATE_AUTH_REQUIRED':
      return { status: active, blocked: ['auth_required'] };
    case 'TASK_STATE_COMPLETED':
      return { status: ['completed'] };
    case 'TASK_STATE_FAILED':
      return { status: ['failed'] };
    case 'TASK_STATE_CANCELED':
      return { status: ['canceled'] };
    case 'TASK_STATE_REJECTED':
      return { status: ['rejected'] };
  }
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 timestamp (google.protobuf.Timestamp in ProtoJSON: "Z" or an offset, 0–9
 * fractional digits) as the smallest millisecond instant not before it. Rounding up keeps
 * `status_at >= result` (millisecond column) equal to `status_at >= timestamp`. Null when the
 * text is not a valid RFC 3339 date-time (bad shape, month 13, Feb 30, offset hour 24, ...).
 */
export function parseRfc3339(text: string): Date | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac = '', z, sign, oh, om] = m;
  const year = Number(y), month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (!z && (Number(oh) > 23 || Number(om) > 59)) return null;
  const base = Date.UTC(year, month - 1, day, hour, minute, second);
  const check = new Date(base);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) return null;
  const digits = frac.padEnd(9, '0');
  const ms = Number(digits.slice(0, 3));
  const subMs = Number(digits.slice(3)) > 0 ? 1 : 0;
  const offsetMs = z ? 0 : (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
  const t = base + ms + subMs - offsetMs;
  return Number.isFinite(t) && Math.abs(t) <= 8.64e15 ? new Date(t) : null;
}

/** Separates the page token's fields; appears in none of them (digits, a UUID, base64url). */
const SEP = '~';
const TOKEN_VERSION = 'p1';
const MAC_DOMAIN = 'a2a.ListTasks.pageToken/v1\n';

/**
 * The filters a page token is bound to: the agent and every filter of the query (not
 * pageSize, historyLength or includeArtifacts, which may change from page to page).
 */
export function listFingerprint(agentId: string, q: Pick<ListTasksQuery, 'contextId' | 'state' | 'statusTimestampAfter'>): string {
  const key = JSON.stringify([agentId, q.contextId ?? null, q.state ?? null, q.statusTimestampAfter?.getTime() ?? null]);
  return createHash('sha256').update(key).digest('base64url').slice(0, 16);
}

/** HMAC-SHA256 (truncated to 128 bits) of the payload under the server's PAGE_TOKEN_SECRET. */
function mac(secret: string, payload: string): string {
  return createHmac('sha256', secret).update(MAC_DOMAIN + payload).digest('base64url').slice(0, 22);
}

/**
 * The page token after `last` (the last task of a page): base64url of
 * `p1~<statusAt ms>~<task id>~<filter fingerprint>~<hmac>`. Opaque to clients. The HMAC, keyed
 * with the server's `secret` (PAGE_TOKEN_SECRET), makes a forged or edited token fail to decode.
 */
export function encodePageToken(last: { statusAt: Date | string; id: string }, fingerprint: string, secret: string): string {
  const statusAt = (last.statusAt instanceof Date ? last.statusAt : new Date(last.statusAt)).getTime();
  const payload = [TOKEN_VERSION, String(statusAt), last.id, fingerprint].join(SEP);
  return Buffer.from(`${payload}${SEP}${mac(secret, payload)}`, 'utf8').toString('base64url');
}

/**
 * The keyset position a page token stands for. Errors: InvalidParams (-32602 / HTTP 400) when
 * the token is not one `encodePageToken` made (malformed, truncated, edited), or was made for a
 * query with other filters (`fingerprint` differs).
 */
export function decodePageToken(token: string, fingerprint: string, secret: string): { statusAt: Date; id: string } {
  const invalid = () => new A2AError('InvalidParams', 'pageToken is not a token returned by ListTasks', { metadata: { field: 'pageToken' } });
  if (token.length > 256 || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalid();
  const text = Buffer.from(token, 'base64url').toString('utf8');
  if (Buffer.from(text, 'utf8').toString('base64url') !== token) throw invalid();
  const fields = text.split(SEP);
  if (fields.length !== 5) throw invalid();
  const [version, ms, id, fp, check] = fields as [string, string, string, string, string];
  const payload = [version, ms, id, fp].join(SEP);
  const expected = Buffer.from(mac(secret, payload));
  const given = Buffer.from(check);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalid();
  if (version !== TOKEN_VERSION || !/^-?\d{1,16}$/.test(ms) || !isUuid(id)) throw invalid();
  if (fp !== fingerprint) {
    throw new A2AError('InvalidParams', 'pageToken was returned for a query with other filters (contextId, status, statusTimestampAfter); start again without it', {
      metadata: { field: 'pageToken' },
    });
  }
  return { statusAt: new Date(Number(ms)), id };
}
