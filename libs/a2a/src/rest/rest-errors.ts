import { A2A_ERROR_DOMAIN, A2A_ERRORS, ERROR_INFO_TYPE, type A2AError, type A2AErrorRow, type A2AErrorType, type ErrorInfo } from '../a2a.errors.js';

/**
 * Errors of the HTTP+JSON binding (A2A v1.0 §11.6): a `google.rpc.Status` in JSON,
 * `{"error":{"code":<HTTP status>,"status":"<google.rpc.Code name>","message":"…","details":[ErrorInfo]}}`,
 * with the A2A error named by `details[0].reason` (domain `a2a-protocol.org`).
 *
 * HTTP status, status name and reason per A2A error come from the one error table `A2A_ERRORS`
 * (A2A v1.0 §5.4, shared with the JSON-RPC and gRPC edges); the reason is the one the official
 * SDK's REST client reads (`details[].reason` picks its typed error, the HTTP status is its
 * `statusCode`). An InternalError marked `unavailable` (a dependency cannot serve the
 * request now) is 503 UNAVAILABLE, reason INTERNAL_ERROR (the edge adds `Retry-After`).
 */
export interface RestErrorMapping {
  /** HTTP status of the response (also `error.code`). */
  httpStatus: number;
  /** `google.rpc.Code` name (`error.status`). */
  status: string;
  /** ErrorInfo.reason; the A2A error's own reason unless the binding renames it. */
  reason?: string;
}

/** `A2A_ERRORS` as the HTTP+JSON binding reads it (derived, never edited by hand). */
export const REST_ERROR_MAPPING: Readonly<Record<A2AErrorType, RestErrorMapping>> = Object.fromEntries(
  (Object.entries(A2A_ERRORS) as [A2AErrorType, A2AErrorRow][]).map(([type, row]) => [type, { httpStatus: row.http, status: row.grpc, reason: row.wireReason }]),
) as Record<A2AErrorType, RestErrorMapping>;

const UNAVAILABLE_MAPPING: RestErrorMapping = { httpStatus: 503, status: 'UNAVAILABLE' };

/** `google.rpc.Status` as JSON, wrapped in `error` (§11.6). */
export interface RestErrorBody {
  error: {
    code: number;
    status: string;
    message: string;
    details: ErrorInfo[];
  };
}

/**
 * The HTTP status and body answering `error` on the HTTP+JSON binding. `httpStatus` overrides
 * the mapped status where the binding knows better (415 for a request Content-Type that is not
 * JSON); `error.code` always equals the status sent. `message` is the A2AError's (safe) message.
 */
export function toRestError(error: A2AError, httpStatus?: number): { httpStatus: number; body: RestErrorBody } {
  const mapping = error.unavailable ? UNAVAILABLE_MAPPING : REST_ERROR_MAPPING[error.type];
  const status = httpStatus ?? mapping.httpStatus;
  const info: ErrorInfo = {
    '@type': ERROR_INFO_TYPE,
    reason: mapping.reason ?? error.reason,
    domain: A2A_ERROR_DOMAIN,
    ...(error.metadata && Object.keys(error.metadata).length > 0 ? { metadata: error.metadata } : {}),
  };
  return { httpStatus: status, body: { error: { code: status, status: mapping.status, message: error.message, details: [info] } } };
}
