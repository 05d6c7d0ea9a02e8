import { AppError, isDependencyUnavailable, serviceUnavailable, type ErrorCode } from '#libs/common';
import { ZodError } from 'zod';

/**
 * The protocol errors the A2A adapter can answer with: the JSON-RPC 2.0 standard errors and the
 * A2A-specific errors of A2A v1.0 §3.3.2 / §5.4, plus the two authentication/authorization
 * errors §3.3.2 leaves to the binding ("JSON-RPC custom error").
 *
 * `reason` is the `google.rpc.ErrorInfo.reason` put in JSON-RPC `error.data` for v1.0 (§9.5):
 * the A2A error name in UPPER_SNAKE_CASE without `Error`, as `@a2a-js/sdk` reads it. The
 * JSON-RPC client of the SDK maps the numeric `code` to its typed errors, the REST client the
 * `reason`; both are given so either works.
 */
export const A2A_ERRORS = {
  ParseError: { code: -32700, reason: 'PARSE_ERROR' },
  InvalidRequest: { code: -32600, reason: 'INVALID_REQUEST' },
  MethodNotFound: { code: -32601, reason: 'METHOD_NOT_FOUND' },
  InvalidParams: { code: -32602, reason: 'INVALID_PARAMS' },
  InternalError: { code: -32603, reason: 'INTERNAL_ERROR' },
  TaskNotFound: { code: -32001, reason: 'TASK_NOT_FOUND' },
  TaskNotCancelable: { code: -32002, reason: 'TASK_NOT_CANCELABLE' },
  PushNotificationNotSupported: { code: -32003, reason: 'PUSH_NOTIFICATION_NOT_SUPPORTED' },
  UnsupportedOperation: { code: -32004, reason: 'UNSUPPORTED_OPERATION' },
  ContentTypeNotSupported: { code: -32005, reason: 'CONTENT_TYPE_NOT_SUPPORTED' },
  InvalidAgentResponse: { code: -32006, reason: 'INVALID_AGENT_RESPONSE' },
  ExtendedAgentCardNotConfigured: { code: -32007, reason: 'EXTENDED_AGENT_CARD_NOT_CONFIGURED' },
  ExtensionSupportRequired: { code: -32008, reason: 'EXTENSION_SUPPORT_REQUIRED' },
  VersionNotSupported: { code: -32009, reason: 'VERSION_NOT_SUPPORTED' },
  /** §3.3.2 "Authentication Errors": implementation-defined JSON-RPC code, sent with HTTP 401. */
  Unauthenticated: { code: -32000, reason: 'UNAUTHENTICATED' },
  /** §3.3.2 "Authorization Errors": implementation-defined JSON-RPC code, sent with HTTP 403. */
  Unauthorized: { code: -32000, reason: 'PERMISSION_DENIED' },
} as const satisfies Record<string, { code: number; reason: string }>;

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
   * An InternalError that is not a bug: the database could not be reached or did not answer in
   * time. The edges send it with HTTP 503 and `Retry-After` (RETRY_AFTER_SECONDS, libs/common).
   */
  readonly unavailable: boolean;

  constructor(
    readonly type: A2AErrorType,
    message: string,
    options: { metadata?: Record<string, string>; cause?: unknown; unavailable?: boolean } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'A2AError';
    this.metadata = options.metadata;
    this.unavailable = options.unavailable ?? false;
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
  'api_key.not_found': 'TaskNotFound',
  'api_key.prefix_taken': 'InternalError',
  'signing.disabled': 'UnsupportedOperation',
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
 * - the database unreachable or silent (`isDependencyUnavailable`, `service.unavailable`): an
 *   InternalError marked `unavailable`, answered with 503 and `Retry-After`;
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
