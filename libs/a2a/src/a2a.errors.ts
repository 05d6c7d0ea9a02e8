import { AppError, isDependencyUnavailable, RETRY_AFTER_SECONDS, serviceUnavailable, type ErrorCode } from '#libs/common';
import { ZodError } from 'zod';

/** gRPC status codes by `google.rpc.Code` name (the numbers of grpc-js `status`). */
export const GRPC_CODES = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type GrpcCodeName = keyof typeof GRPC_CODES;

/** One row of the error table: how one A2A error is answered on each of the three bindings. */
export interface A2AErrorRow {
  /** JSON-RPC `error.code` (§9.5). */
  code: number;
  /** `google.rpc.ErrorInfo.reason` (§9.5, §10.6, §11.6): the A2A error name in UPPER_SNAKE_CASE without `Error`. */
  reason: string;
  /** HTTP status on the HTTP+JSON binding (§11.6; also the `error.code` of its body). */
  http: number;
  /** gRPC status (§10.6), also the `error.status` name of the HTTP+JSON body (one `google.rpc.Status`). */
  grpc: GrpcCodeName;
  /**
   * ErrorInfo.reason on HTTP+JSON and gRPC when it differs from `reason`: the SDK has no typed
   * error for JSON-RPC's parse / invalid-request errors, its RequestMalformedError reads `INVALID_PARAMS`.
   */
  wireReason?: string;
}

/**
 * THE error table of the A2A adapter: every protocol error it can answer with, and its JSON-RPC
 * code, HTTP+JSON status and gRPC status. The three bindings read only this table (JSON-RPC:
 * `A2AError.code`; HTTP+JSON: `toRestError`; gRPC: `toGrpcError`), so they cannot drift apart.
 *
 * The nine A2A-specific rows are A2A v1.0 §5.4 "Error Code Mappings" verbatim (`docs/specification.md`
 * of the A2A repository after the 1.0.0 release; the same table as `@a2a-js/sdk@1.3.0`'s
 * `GRPC_ERROR_STATUS` / `REST_ERROR_HTTP_STATUS`): every "not supported / not possible now" error is
 * `400` + `FAILED_PRECONDITION`, TaskNotFound `404` + `NOT_FOUND`, ContentTypeNotSupported `400` +
 * `INVALID_ARGUMENT`, InvalidAgentResponse `500` + `INTERNAL` (test/a2a-error-table.test.ts checks it
 * row by row). The other rows are binding-level errors §5.4 does not list:
 * - the JSON-RPC 2.0 standard errors (§9.5), as `400 INVALID_ARGUMENT` (ParseError, InvalidRequest,
 *   InvalidParams), `404 NOT_FOUND` (MethodNotFound: no such method / route), `500 INTERNAL`;
 * - the §3.3.2 authentication / authorization errors: an implementation-defined JSON-RPC code
 *   (-32000) sent with HTTP 401 / 403, `UNAUTHENTICATED` / `PERMISSION_DENIED`.
 * An InternalError marked `unavailable` (a dependency cannot serve the request now) is 503 /
 * `UNAVAILABLE` on every binding instead of its row (see `A2AError.unavailable`).
 *
 * `@a2a-js/sdk` reads the JSON-RPC `code` (its JSON-RPC client) or the ErrorInfo `reason` (its
 * REST and gRPC clients); both are given so either works.
 */
export const A2A_ERRORS = {
  ParseError: { code: -32700, reason: 'PARSE_ERROR', http: 400, grpc: 'INVALID_ARGUMENT', wireReason: 'INVALID_PARAMS' },
  InvalidRequest: { code: -32600, reason: 'INVALID_REQUEST', http: 400, grpc: 'INVALID_ARGUMENT', wireReason: 'INVALID_PARAMS' },
  MethodNotFound: { code: -32601, reason: 'METHOD_NOT_FOUND', http: 404, grpc: 'NOT_FOUND' },
  InvalidParams: { code: -32602, reason: 'INVALID_PARAMS', http: 400, grpc: 'INVALID_ARGUMENT' },
  InternalError: { code: -32603, reason: 'INTERNAL_ERROR', http: 500, grpc: 'INTERNAL' },
  TaskNotFound: { code: -32001, reason: 'TASK_NOT_FOUND', http: 404, grpc: 'NOT_FOUND' },
  TaskNotCancelable: { code: -32002, reason: 'TASK_NOT_CANCELABLE', http: 400, grpc: 'FAILED_PRECONDITION' },
  PushNotificationNotSupported: { code: -32003, reason: 'PUSH_NOTIFICATION_NOT_SUPPORTED', http: 400, grpc: 'FAILED_PRECONDITION' },
  UnsupportedOperation: { code: -32004, reason: 'UNSUPPORTED_OPERATION', http: 400, grpc: 'FAILED_PRECONDITION' },
  ContentTypeNotSupported: { code: -32005, reason: 'CONTENT_TYPE_NOT_SUPPORTED', http: 400, grpc: 'INVALID_ARGUMENT' },
  InvalidAgentResponse: { code: -32006, reason: 'INVALID_AGENT_RESPONSE', http: 500, grpc: 'INTERNAL' },
  ExtendedAgentCardNotConfigured: { code: -32007, reason: 'EXTENDED_AGENT_CARD_NOT_CONFIGURED', http: 400, grpc: 'FAILED_PRECONDITION' },
  ExtensionSupportRequired: { code: -32008, reason: 'EXTENSION_SUPPORT_REQUIRED', http: 400, grpc: 'FAILED_PRECONDITION' },
  VersionNotSupported: { code: -32009, reason: 'VERSION_NOT_SUPPORTED', http: 400, grpc: 'FAILED_PRECONDITION' },
  /** §3.3.2 "Authentication Errors": implementation-defined JSON-RPC code, sent with HTTP 401. */
  Unauthenticated: { code: -32000, reason: 'UNAUTHENTICATED', http: 401, grpc: 'UNAUTHENTICATED' },
  /** §3.3.2 "Authorization Errors": implementation-defined JSON-RPC code, sent with HTTP 403. */
  Unauthorized: { code: -32000, reason: 'PERMISSION_DENIED', http: 403, grpc: 'PERMISSION_DENIED' },
} as const satisfies Record<string, A2AErrorRow>;

export type A2AErrorType = keyof typeof A2A_ERRORS;

/** Google's ErrorInfo type URL and the A2A domain (§9.5, §11.6). */
export const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';
export const A2A_ERROR_DOMAIN = 'a2a-protocol.org';

/** A `google.rpc.ErrorInfo` as it appears in JSON-RPC `error.data` (v1.0). */
export interface ErrorInfo {
  '@type': typeof ERROR_INFO_TYPE;
  reason: string;
  domain: typeof A2A_ERROR_DOMAIN;
  metadata?: Record<string, string>;
}

/**
 * An error answered to an A2A caller. `message` is safe to show (never a stack, SQL or secret);
 * `metadata` (string values only, as in ErrorInfo) carries details such as the task id.
 */
export class A2AError extends Error {
  readonly metadata?: Record<string, string>;
  /**
   * An InternalError that is not a bug: a dependency cannot serve the request now (the database is
   * unreachable, silent, out of space or read-only: `isDependencyUnavailable`; a JWT issuer's keys
   * cannot be read; a signed card cannot be signed here). The edges send it with HTTP 503 and
   * `Retry-After`, gRPC as UNAVAILABLE with a `retry-after` trailer; its ErrorInfo carries
   * `retryAfterSeconds` (RETRY_AFTER_SECONDS, libs/common), as a rate-limited refusal's does, so
   * the hint survives where no status or header can say it (an SSE `event: error` frame, JSON-RPC).
   */
  readonly unavailable: boolean;

  constructor(
    readonly type: A2AErrorType,
    message: string,
    options: { metadata?: Record<string, string>; cause?: unknown; unavailable?: boolean } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'A2AError';
    this.unavailable = options.unavailable ?? false;
    this.metadata = this.unavailable ? { ...options.metadata, retryAfterSeconds: String(RETRY_AFTER_SECONDS) } : options.metadata;
  }

  get code(): number {
    return A2A_ERRORS[this.type].code;
  }

  get reason(): string {
    return A2A_ERRORS[this.type].reason;
  }

  toErrorInfo(): ErrorInfo {
    return {
      '@type': ERROR_INFO_TYPE,
      reason: this.reason,
      domain: A2A_ERROR_DOMAIN,
      ...(this.metadata && Object.keys(this.metadata).length > 0 ? { metadata: this.metadata } : {}),
    };
  }
}

/**
 * How each canonical error code is answered over A2A (A2A v1.0 §3.3.2, §5.4). Core errors speak
 * of runs and threads; this adapter speaks of tasks and contexts (see `a2aMessage`).
 */
export const A2A_ERROR_FOR_CODE: Record<ErrorCode, A2AErrorType> = {
  'request.invalid': 'InvalidParams',
  'request.malformed': 'ParseError',
  'request.unsupported_media_type': 'InvalidRequest',
  'request.too_large': 'InvalidRequest',
  'request.timeout': 'InvalidRequest',
  'request.rate_limited': 'InvalidRequest',
  'auth.missing_credentials': 'Unauthenticated',
  'auth.invalid_credentials': 'Unauthenticated',
  'auth.forbidden': 'Unauthorized',
  'org.not_found': 'TaskNotFound',
  'org.conflict': 'InvalidRequest',
  'archive.org_not_empty': 'InvalidRequest',
  'archive.conflict': 'InvalidRequest',
  'archive.invalid': 'InvalidParams',
  'archive.write_failed': 'InternalError',
  'archive.too_large': 'InvalidRequest',
  'archive.line_too_long': 'InvalidRequest',
  'archive.too_deep': 'InvalidParams',
  'archive.import_in_progress': 'InvalidRequest',
  'api_key.not_found': 'TaskNotFound',
  'api_key.prefix_taken': 'InternalError',
  'signing.disabled': 'UnsupportedOperation',
  'signing.unavailable': 'InternalError',
  'signing_key.in_use': 'InternalError',
  'extension.not_found': 'TaskNotFound',
  'extension.required': 'ExtensionSupportRequired',
  'extension.dependency': 'InvalidParams',
  'extension.rule': 'InvalidParams',
  'push.not_configured': 'PushNotificationNotSupported',
  'push.url_refused': 'InvalidParams',
  'push.config_not_found': 'TaskNotFound',
  'push.too_many_configs': 'InvalidRequest',
  'signing_key.not_found': 'TaskNotFound',
  'agent.not_found': 'TaskNotFound',
  'agent.conflict': 'InvalidRequest',
  'agent.not_published': 'TaskNotFound',
  'revision.not_found': 'TaskNotFound',
  'revision.immutable': 'InvalidRequest',
  'revision.not_published': 'InvalidRequest',
  'revision.invalid_transition': 'InvalidRequest',
  'revision.unsupported_capability': 'InvalidParams',
  'binding.not_found': 'TaskNotFound',
  'binding.conflict': 'InvalidRequest',
  // §3.1.1: a task in a terminal state cannot accept further messages
  'run.not_found': 'TaskNotFound',
  'run.terminal': 'UnsupportedOperation',
  'run.not_cancelable': 'TaskNotCancelable',
  'run.invalid_transition': 'InvalidRequest',
  'run.conflict': 'InvalidParams',
  'run.duplicate_message': 'InvalidParams',
  // raised inside executions only (a worker's own appends), never on an A2A path
  'run.duplicate_operation': 'InternalError',
  'run.fenced': 'InternalError',
  // no A2A error names a quota: the request is refused as such, its message and metadata say why
  'org.storage_quota_exceeded': 'InvalidRequest',
  // §3.4.2: MUST reject messages containing a mismatching contextId
  'run.thread_mismatch': 'InvalidParams',
  'run.awaiting_interaction': 'InvalidRequest',
  'interaction.not_open': 'InvalidParams',
  'interaction.not_found': 'InvalidParams',
  'interaction.invalid_answer': 'InvalidParams',
  'run.link_too_deep': 'InvalidRequest',
  'runtime.unknown_kind': 'InternalError',
  'runtime.failed': 'InternalError',
  'run.runtime_state_too_large': 'InternalError',
  'runtime.upstream_unreachable': 'InvalidParams',
  'runtime.upstream_card_unverified': 'InvalidParams',
  // runtime secrets: admin and publish errors, listed for completeness (never raised on the A2A paths)
  'runtime.secret_not_allowed': 'InvalidParams',
  'runtime.secret_not_found': 'InvalidParams',
  'runtime_secret.not_found': 'TaskNotFound',
  'runtime_secret.conflict': 'InvalidRequest',
  'runtime_secret.not_configured': 'UnsupportedOperation',
  'idempotency.mismatch': 'InvalidParams',
  'idempotency.in_progress': 'InvalidRequest',
  'a2a.method_not_found': 'MethodNotFound',
  'a2a.version_not_supported': 'VersionNotSupported',
  'a2a.unsupported_operation': 'UnsupportedOperation',
  'a2a.content_type_not_supported': 'ContentTypeNotSupported',
  'service.unavailable': 'InternalError',
  internal: 'InternalError',
};

/** Canonical detail keys as A2A words (ErrorInfo metadata). */
const DETAIL_KEYS: Record<string, string> = { runId: 'taskId', threadId: 'contextId' };

/** String-valued ErrorInfo metadata from an AppError's details (non-strings are dropped). */
function stringMetadata(details: Record<string, unknown> | undefined): Record<string, string> | undefined {
  if (!details) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(details)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[DETAIL_KEYS[k] ?? k] = String(v);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The A2A wording of a canonical error (task / contextId instead of run / thread). */
function a2aMessage(e: AppError): string {
  const d = (e.details ?? {}) as Record<string, unknown>;
  const id = d.runId ?? d.taskId;
  const task = typeof id === 'string' ? `task ${id}` : 'the task';
  switch (e.code) {
    case 'run.not_found':
      return `${task} not found`;
    case 'run.terminal':
      return `${task} is ${String(d.status ?? 'terminal')} and accepts no more messages`;
    case 'run.not_cancelable':
      return `${task} is ${String(d.status ?? 'terminal')} and cannot be canceled`;
    case 'run.thread_mismatch':
      return `contextId ${String(d.requestedThreadId ?? '')} is not the contextId of ${task}`.replace('contextId  is', 'the contextId is');
    case 'run.conflict':
    case 'run.duplicate_message':
      // an anonymous caller's messageId recorded with another message: nothing of that message or its task is said
      if (d.reuse === 'other_message') return `messageId ${String(d.messageId ?? '')} was already used with another message; send a new messageId (a retry must resend the same message)`;
      return `messageId ${String(d.messageId ?? '')} was already used on another task`;
    case 'run.awaiting_interaction':
      return `${task} is waiting for an answer to its interaction ${String(d.interactionId ?? '')}`.trim();
    default:
      return e.message;
  }
}

/**
 * Any error thrown while serving an A2A call, as the A2A error to answer with:
 * - `A2AError`: as is;
 * - a dependency that cannot serve the request now (`isDependencyUnavailable`: the database
 *   unreachable, silent, out of space, read-only…; `service.unavailable`): an InternalError marked
 *   `unavailable`, answered with 503 and `Retry-After`; so is `signing.unavailable`
 *   (a signed card this process cannot sign), with its own message;
 * - `AppError`: through `A2A_ERROR_FOR_CODE`, worded in A2A terms; `internal` keeps a generic
 *   message only;
 * - `ZodError`: InvalidParams, naming the first failing path;
 * - anything else: InternalError with a generic message (the cause is kept for logging).
 */
export function toA2AError(e: unknown): A2AError {
  if (e instanceof A2AError) return e;
  // an AppError is already classified (e.g. push.url_refused may carry a DNS error as its cause)
  if (e instanceof AppError ? e.code === 'service.unavailable' : isDependencyUnavailable(e)) {
    return new A2AError('InternalError', serviceUnavailable().message, { cause: e, unavailable: true });
  }
  // a signed card this process can neither find stored nor sign: another instance (or later) can
  if (e instanceof AppError && e.code === 'signing.unavailable') return new A2AError('InternalError', e.message, { cause: e, unavailable: true });
  if (e instanceof AppError) {
    const type = A2A_ERROR_FOR_CODE[e.code] ?? 'InternalError';
    if (type === 'InternalError') return new A2AError('InternalError', 'internal error', { cause: e });
    return new A2AError(type, a2aMessage(e), { metadata: stringMetadata(e.details), cause: e });
  }
  if (e instanceof ZodError) return invalidParams(e);
  return new A2AError('InternalError', 'internal error', { cause: e });
}

/** InvalidParams from zod issues: "message.parts.0: a part has exactly one of ...". */
export function invalidParams(e: ZodError, prefix = 'invalid params'): A2AError {
  const issues = e.issues.slice(0, 5).map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message));
  return new A2AError('InvalidParams', `${prefix}: ${issues.join('; ')}`, { cause: e });
}
