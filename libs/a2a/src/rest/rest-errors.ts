import { A2A_ERROR_DOMAIN, ERROR_INFO_TYPE, type A2AError, type A2AErrorType, type ErrorInfo } from '../a2a.errors.js';

/**
 * Errors of the HTTP+JSON binding (A2A v1.0 §11.6): a `google.rpc.Status` in JSON,
 * `{"error":{"code":<HTTP status>,"status":"<google.rpc.Code name>","message":"…","details":[ErrorInfo]}}`,
 * with the A2A error named by `details[0].reason` (domain `a2a-protocol.org`).
 *
 * HTTP status and status name per A2A error follow A2A v1.0 §5.4's table (e.g. TaskNotCancelable 409,
 * ContentTypeNotSupported 415, InvalidAgentResponse 502, UNIMPLEMENTED 501 for unsupported operations,
 * push and versions); the `reason` is the one of the official SDK's REST server
 * (`@a2a-js/sdk@1.3.0`, `src/errors/rest.ts`: `REST_ERROR_HTTP_STATUS`, `REST_ERROR_STATUS_NAME`,
 * `toRestErrorBody`), so its REST client raises the same typed errors it would against the SDK
 * server (the client picks the class by `details[].reason`, and reports the HTTP status as
 * `statusCode`). Binding-level errors that the A2A error set lacks are mapped as follows:
 * - ParseError / InvalidRequest / InvalidParams → 400 INVALID_ARGUMENT with reason `INVALID_PARAMS`
 *   (the SDK's RequestMalformedError, which its REST server also uses for malformed JSON);
 * - MethodNotFound (no such route under the agent's path) → 404 NOT_FOUND, reason `METHOD_NOT_FOUND`;
 * - Unauthenticated → 401 UNAUTHENTICATED, Unauthorized → 403 PERMISSION_DENIED (§3.3.2);
 * - InternalError → 500 INTERNAL; one marked `unavailable` (the database did not answer) →
 *   503 UNAVAILABLE, reason INTERNAL_ERROR.
 */
export interface RestErrorMapping {
  /** HTTP status of the response (also `error.code`). */
  httpStatus: number;
  /** `google.rpc.Code` name (`error.status`). */
  status: string;
  /** ErrorInfo.reason; the A2A error's own reason unless the binding renames it. */
  reason?: string;
}

export const REST_ERROR_MAPPING: Readonly<Record<A2AErrorType, RestErrorMapping>> = {
  ParseError: { httpStatus: 400, status: 'INVALID_ARGUMENT', reason: 'INVALID_PARAMS' },
  InvalidRequest: { httpStatus: 400, status: 'INVALID_ARGUMENT', reason: 'INVALID_PARAMS' },
  InvalidParams: { httpStatus: 400, status: 'INVALID_ARGUMENT' },
  MethodNotFound: { httpStatus: 404, status: 'NOT_FOUND' },
  InternalError: { httpStatus: 500, status: 'INTERNAL' },
  TaskNotFound: { httpStatus: 404, status: 'NOT_FOUND' },
  TaskNotCancelable: { httpStatus: 409, status: 'FAILED_PRECONDITION' },
  PushNotificationNotSupported: { httpStatus: 501, status: 'UNIMPLEMENTED' },
  UnsupportedOperation: { httpStatus: 501, status: 'UNIMPLEMENTED' },
  ContentTypeNotSupported: { httpStatus: 415, status: 'INVALID_ARGUMENT' },
  InvalidAgentResponse: { httpStatus: 502, status: 'INTERNAL' },
  ExtendedAgentCardNotConfigured: { httpStatus: 400, status: 'FAILED_PRECONDITION' },
  ExtensionSupportRequired: { httpStatus: 400, status: 'FAILED_PRECONDITION' },
  VersionNotSupported: { httpStatus: 501, status: 'UNIMPLEMENTED' },
  Unauthenticated: { httpStatus: 401, status: 'UNAUTHENTICATED' },
  Unauthorized: { httpStatus: 403, status: 'PERMISSION_DENIED' },
};

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
