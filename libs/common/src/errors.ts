/**
 * The one registry of error codes (`<context>.<reason>`), each with the line that says when it is
 * raised. Services throw `AppError`s with these codes; the admin API maps them to
 * `{ error: { code, message, details }, requestId }` with `httpStatus`; each protocol adapter keeps
 * its own mapping (the A2A one is libs/a2a/src/a2a.errors.ts), so the core never speaks a
 * protocol's words.
 */
export const ERROR_CODES = {
  'request.invalid': { httpStatus: 422, when: 'the request body, query or params failed validation' },
  'request.malformed': { httpStatus: 400, when: 'the request body is not valid JSON' },
  'request.too_large': { httpStatus: 413, when: 'the request body is larger than REQUEST_BODY_LIMIT_BYTES' },
  'request.timeout': { httpStatus: 408, when: 'the request (headers or body) did not arrive within the server\'s timeouts' },
  'request.rate_limited': { httpStatus: 429, when: 'the caller (API key or client address) sent more requests than its rate limit allows' },
  'request.unsupported_media_type': { httpStatus: 415, when: 'the request content type is not accepted' },
  'auth.missing_credentials': { httpStatus: 401, when: 'no API key was presented where one is required' },
  'auth.invalid_credentials': { httpStatus: 401, when: 'the API key is unknown or revoked' },
  'auth.forbidden': { httpStatus: 403, when: 'the API key lacks the scope for this operation' },
  'org.not_found': { httpStatus: 404, when: 'the organization does not exist (or is not the caller\'s)' },
  'org.conflict': { httpStatus: 409, when: 'an organization with that slug exists' },
  'extension.not_found': { httpStatus: 404, when: 'no registered extension has a specification at that path' },
  'extension.required': { httpStatus: 400, when: 'the agent declares an extension required and the request did not activate it (A2A-Extensions header)' },
  'extension.dependency': { httpStatus: 400, when: 'an activated extension needs another extension that the request did not activate' },
  'extension.rule': { httpStatus: 400, when: 'a request that activated an extension breaks one of its rules' },
  'push.not_configured': { httpStatus: 409, when: 'push notifications were asked for, but neither PUSH_ENCRYPTION_SECRET nor SIGNING_KEY_ENCRYPTION_SECRET is configured' },
  'push.url_refused': { httpStatus: 422, when: 'a push URL is not http(s), carries credentials, or resolves to a loopback, private, link-local, multicast or otherwise non-public address' },
  'push.config_not_found': { httpStatus: 404, when: 'the task has no push notification config with that id' },
  'push.too_many_configs': { httpStatus: 409, when: 'the task already has PUSH_MAX_CONFIGS_PER_TASK push notification configs, or its organization PUSH_MAX_ACTIVE_CONFIGS_PER_ORG active ones' },
  'signing.disabled': { httpStatus: 409, when: 'a signing key was asked for, but SIGNING_KEY_ENCRYPTION_SECRET is not configured' },
  'signing.unavailable': { httpStatus: 503, when: 'a card whose profile declares signedAgentCard has no stored signature for its version and this process cannot sign it (no SIGNING_KEY_ENCRYPTION_SECRET), or its organization has no active signing key' },
  'signing_key.in_use': { httpStatus: 409, when: 'the key to retire is the organization\'s last active key and a servable agent\'s card declares signedAgentCard' },
  'signing_key.not_found': { httpStatus: 404, when: 'no signing key with that id in the caller\'s organization' },
  'api_key.prefix_taken': { httpStatus: 409, when: 'a new API key drew a prefix that exists (retried with another)' },
  'api_key.not_found': { httpStatus: 404, when: 'no API key with that id in the caller\'s organization' },
  'agent.not_found': { httpStatus: 404, when: 'no agent with that id/slug in the caller\'s organization' },
  'agent.conflict': { httpStatus: 409, when: 'an agent with that slug exists in the organization' },
  'agent.not_published': { httpStatus: 404, when: 'the agent has no active published revision or enabled A2A binding' },
  'revision.not_found': { httpStatus: 404, when: 'no revision with that id for the agent' },
  'revision.immutable': { httpStatus: 409, when: 'a published or retired revision was to be modified' },
  'revision.not_published': { httpStatus: 409, when: 'only a published revision can be made active' },
  'revision.unsupported_capability': { httpStatus: 422, when: 'a revision to publish declares an A2A capability this deployment does not serve (signedAgentCard: also when the organization has no active signing key)' },
  'revision.invalid_transition': { httpStatus: 409, when: 'the revision lifecycle does not allow that step (e.g. retiring the active revision)' },
  'binding.not_found': { httpStatus: 404, when: 'the agent has no binding for that protocol' },
  'binding.conflict': { httpStatus: 409, when: 'the agent already has a binding for that protocol, or the path is taken' },
  'archive.org_not_empty': { httpStatus: 409, when: 'a run archive was to be imported into an organization that has runs' },
  'archive.conflict': { httpStatus: 409, when: 'a run archive holds a run (or message id) that exists already in this deployment' },
  'archive.write_failed': { httpStatus: 503, when: 'retention could not write a batch\'s run archive to its target (directory or S3-compatible bucket) durably; the batch\'s runs stay and the next pass retries' },
  'archive.too_large': { httpStatus: 413, when: 'a run archive import\'s body is larger than ARCHIVE_IMPORT_MAX_BODY_BYTES (by its Content-Length, or as the byte past it arrives); nothing is imported' },
  'archive.line_too_long': { httpStatus: 413, when: 'a line of a run archive import is longer than ARCHIVE_IMPORT_MAX_LINE_BYTES (details: line, maxLineBytes); nothing is imported' },
  'archive.too_deep': { httpStatus: 422, when: 'a line of a run archive import nests objects and arrays deeper than ARCHIVE_IMPORT_MAX_DEPTH (details: line, maxDepth); nothing is imported' },
  'archive.import_in_progress': { httpStatus: 409, when: 'a run archive import was started for an organization while another import into it is still running (one import per organization at a time); retry once it has answered' },
  'archive.invalid': { httpStatus: 422, when: 'a run archive line is not JSON, not of this format, names an agent revision the organization lacks, or holds a row the database refuses' },
  'run.not_found': { httpStatus: 404, when: 'no run with that id visible to the caller' },
  'run.terminal': { httpStatus: 409, when: 'the run is in a terminal status and accepts no more events or input' },
  'run.not_cancelable': { httpStatus: 409, when: 'cancel was asked of a run already in a terminal status' },
  'run.invalid_transition': { httpStatus: 409, when: 'the run state machine does not allow that status change' },
  'run.conflict': { httpStatus: 409, when: 'a retried write does not match the original (e.g. a messageId reused on another run)' },
  'org.storage_quota_exceeded': { httpStatus: 403, when: 'a new task or message, or a run archive import (all its runs\' stored bytes), would take the organization past its storage quota (bytes of messages and artifacts; organizations.storage_quota_bytes or ORG_STORAGE_QUOTA_BYTES)' },
  'run.duplicate_message': { httpStatus: 409, when: 'the append path found the messageId already recorded for the agent (command handlers resolve it to a replay or run.conflict)' },
  'run.duplicate_operation': { httpStatus: 409, when: 'the append path found a runtime operation id already in the run\'s log (RuntimeOperations drops the operation instead of recording it twice)' },
  'run.fenced': { httpStatus: 409, when: 'an execution wrote to a run a newer execution took over (its fencing token, runs.execution_epoch, is older): it stops with no further effect' },
  'run.thread_mismatch': { httpStatus: 422, when: 'the message names a thread that is not the run\'s thread' },
  'run.awaiting_interaction': { httpStatus: 409, when: 'input that is not an answer was sent to a run blocked on an InteractionRequest' },
  'interaction.not_found': { httpStatus: 404, when: 'the run has no InteractionRequest with that id' },
  'interaction.invalid_answer': { httpStatus: 422, when: 'the answer does not choose one of the interaction\'s options' },
  'run.link_too_deep': { httpStatus: 409, when: 'a delegation would nest RunLinks deeper than the platform allows' },
  'interaction.not_open': { httpStatus: 409, when: 'the InteractionRequest answered is not open (answered, expired or canceled already)' },
  'runtime.unknown_kind': { httpStatus: 422, when: 'a revision names a runtime kind this deployment does not have' },
  'runtime.failed': { httpStatus: 500, when: 'a runtime threw while executing a run' },
  'run.runtime_state_too_large': { httpStatus: 422, when: 'a runtime saved more state on a run than RUNTIME_STATE_MAX_BYTES' },
  'runtime.secret_not_allowed': { httpStatus: 422, when: 'a revision\'s runtime names a worker environment variable (`secretEnv`) outside its organization\'s namespace AAAS_RUNTIME_SECRET_<ORG>_<NAME> (<ORG>: its id, or a token RUNTIME_SECRET_ENV_NAMESPACES maps to it), or one that could belong to two organizations (draft, publish, and again when a run resolves it)' },
  'runtime.secret_not_found': { httpStatus: 422, when: 'a revision\'s runtime references a runtime secret (`secret`) its organization does not have (publish, and when a run resolves it)' },
  'runtime_secret.not_found': { httpStatus: 404, when: 'no runtime secret with that name in the caller\'s organization' },
  'runtime_secret.conflict': { httpStatus: 409, when: 'a runtime secret with that name exists in the organization (rotate it with PUT instead), or the organization has RUNTIME_SECRETS_MAX_PER_ORG secrets already' },
  'runtime_secret.not_configured': { httpStatus: 422, when: 'a runtime secret was to be stored or decrypted, but neither RUNTIME_SECRET_ENCRYPTION_SECRET nor SIGNING_KEY_ENCRYPTION_SECRET is configured (or the stored value no longer decrypts under it)' },
  'runtime.upstream_unreachable': { httpStatus: 422, when: 'publishing an a2a-runtime revision: the upstream agent card could not be fetched or is not an A2A card' },
  'runtime.upstream_card_unverified': { httpStatus: 422, when: 'an a2a-runtime revision requires a signed upstream card (`requireSignedCard`) and no signature of the card verifies with a trusted key (at publish; a run fails with this code in its status message metadata when the card changed since)' },
  'idempotency.mismatch': { httpStatus: 422, when: 'an Idempotency-Key was reused with a different request' },
  'idempotency.in_progress': { httpStatus: 409, when: 'a request with the same Idempotency-Key is still being processed' },
  'a2a.method_not_found': { httpStatus: 404, when: 'the JSON-RPC method does not exist for the negotiated A2A version' },
  'a2a.version_not_supported': { httpStatus: 400, when: 'the A2A-Version header names a version we do not serve' },
  'a2a.unsupported_operation': { httpStatus: 400, when: 'the operation exists in A2A but this agent or binding does not offer it' },
  'a2a.content_type_not_supported': { httpStatus: 415, when: 'a message part uses a media type the agent does not accept' },
  'service.unavailable': { httpStatus: 503, when: 'PostgreSQL (or Redis) could not be reached, did not answer in time, or cannot do the work now — disk full, out of memory, read-only, shutting down (isDependencyUnavailable); the answer carries Retry-After' },
  'internal': { httpStatus: 500, when: 'anything unexpected; details are logged, never returned' },
} as const satisfies Record<string, { httpStatus: number; when: string }>;

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

/** Builds an AppError from a zod error: code `request.invalid`, issues as details. */
export function invalidRequest(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
  what = 'request',
): AppError {
  return new AppError('request.invalid', `invalid ${what}`, {
    details: { issues: issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message })) },
  });
}
