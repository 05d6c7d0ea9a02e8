/**
 * The one registry of error codes (`<context>.<reason>`), each with the line that says when it is
 * raised and how every edge maps it. Services throw `AppError`s with these codes; the admin API
 * maps them to `{ error: { code, message, details }, requestId }` with `httpStatus`, the A2A adapter
 * to the JSON-RPC / HTTP errors named by `a2a` (A2A v1.0 §5.4, §9.5, §11.6).
 */
export const ERROR_CODES = {
  'request.invalid': { httpStatus: 422, a2a: 'InvalidParams', when: 'the request body, query or params failed validation' },
  'request.malformed': { httpStatus: 400, a2a: 'ParseError', when: 'the request body is not valid JSON' },
  'request.unsupported_media_type': { httpStatus: 415, a2a: 'InvalidRequest', when: 'the request content type is not accepted' },
  'auth.missing_credentials': { httpStatus: 401, a2a: 'Unauthenticated', when: 'no API key was presented where one is required' },
  'auth.invalid_credentials': { httpStatus: 401, a2a: 'Unauthenticated', when: 'the API key is unknown or revoked' },
  'auth.forbidden': { httpStatus: 403, a2a: 'Unauthorized', when: 'the API key lacks the scope for this operation' },
  'org.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'the organization does not exist (or is not the caller\'s)' },
  'org.conflict': { httpStatus: 409, a2a: 'InvalidRequest', when: 'an organization with that slug exists' },
  'api_key.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'no API key with that id in the caller\'s organization' },
  'agent.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'no agent with that id/slug in the caller\'s organization' },
  'agent.conflict': { httpStatus: 409, a2a: 'InvalidRequest', when: 'an agent with that slug exists in the organization' },
  'agent.not_published': { httpStatus: 404, a2a: 'TaskNotFound', when: 'the agent has no active published revision or enabled A2A binding' },
  'revision.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'no revision with that id for the agent' },
  'revision.immutable': { httpStatus: 409, a2a: 'InvalidRequest', when: 'a published or retired revision was to be modified' },
  'revision.not_published': { httpStatus: 409, a2a: 'InvalidRequest', when: 'only a published revision can be made active' },
  'revision.invalid_transition': { httpStatus: 409, a2a: 'InvalidRequest', when: 'the revision lifecycle does not allow that step (e.g. retiring the active revision)' },
  'binding.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'the agent has no binding for that protocol' },
  'binding.conflict': { httpStatus: 409, a2a: 'InvalidRequest', when: 'the agent already has a binding for that protocol, or the path is taken' },
  'run.not_found': { httpStatus: 404, a2a: 'TaskNotFound', when: 'no run with that id visible to the caller' },
  'run.terminal': { httpStatus: 409, a2a: 'UnsupportedOperation', when: 'the run is in a terminal status and accepts no more events or input' },
  'run.not_cancelable': { httpStatus: 409, a2a: 'TaskNotCancelable', when: 'cancel was asked of a run already in a terminal status' },
  'run.invalid_transition': { httpStatus: 409, a2a: 'InvalidRequest', when: 'the run state machine does not allow that status change' },
  'run.conflict': { httpStatus: 409, a2a: 'InvalidParams', when: 'a retried write does not match the original (e.g. messageId reused on another task)' },
  'run.context_mismatch': { httpStatus: 422, a2a: 'InvalidParams', when: 'the message contextId does not match the task\'s contextId' },
  'runtime.unknown_kind': { httpStatus: 422, a2a: 'InternalError', when: 'a revision names a runtime kind this deployment does not have' },
  'runtime.failed': { httpStatus: 500, a2a: 'InternalError', when: 'a runtime threw while executing a run' },
  'idempotency.mismatch': { httpStatus: 422, a2a: 'InvalidParams', when: 'an Idempotency-Key was reused with a different request' },
  'idempotency.in_progress': { httpStatus: 409, a2a: 'InvalidRequest', when: 'a request with the same Idempotency-Key is still being processed' },
  'a2a.method_not_found': { httpStatus: 404, a2a: 'MethodNotFound', when: 'the JSON-RPC method does not exist for the negotiated A2A version' },
  'a2a.version_not_supported': { httpStatus: 400, a2a: 'VersionNotSupported', when: 'the A2A-Version header names a version we do not serve' },
  'a2a.unsupported_operation': { httpStatus: 400, a2a: 'UnsupportedOperation', when: 'the operation exists in A2A but this agent or binding does not offer it' },
  'a2a.content_type_not_supported': { httpStatus: 415, a2a: 'ContentTypeNotSupported', when: 'a message part uses a media type the agent does not accept' },
  'internal': { httpStatus: 500, a2a: 'InternalError', when: 'anything unexpected; details are logged, never returned' },
} as const satisfies Record<string, { httpStatus: number; a2a: string; when: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** A coded, safe-to-show error. `details` must never contain secrets, SQL or stacks. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;
  readonly retryable: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: Record<string, unknown>; cause?: unknown; retryable?: boolean } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code].httpStatus;
  }
}

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}

/** Builds an AppError from a zod error: code `request.invalid`, issues as details. */
export function invalidRequest(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
  what = 'request',
): AppError {
  return new AppError('request.invalid', `invalid ${what}`, {
    details: { issues: issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })) },
  });
}
