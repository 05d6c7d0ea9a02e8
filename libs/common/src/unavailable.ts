import { AppError } from './errors.js';

/** Seconds a caller is asked to wait (`Retry-After`) on a 503 for an unavailable dependency. */
export const RETRY_AFTER_SECONDS = 2;

/** `service.unavailable` (503): the answer, on every surface, to the database not answering. */
export function serviceUnavailable(cause?: unknown): AppError {
  return new AppError('service.unavailable', 'the service is temporarily unavailable (its database did not answer); retry shortly', { cause, retryable: true });
}

/**
 * Whether an error means a dependency of the request path (PostgreSQL, seen through pg, pg-pool or
 * Prisma) could not be reached or did not answer in time, as opposed to a bug or a bad request.
 * The edges answer such errors with 503 and `Retry-After` instead of 500.
 *
 * Recognised, anywhere along the `cause` chain (at most 6 deep):
 * - socket errors (`ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, `EHOSTUNREACH`, `ENETUNREACH`,
 *   `ENOTFOUND`, `EAI_AGAIN`, `EPIPE`);
 * - PostgreSQL SQLSTATEs of class 08 (connection exception, but not 08P01, a protocol violation), 57P01–57P03 (the server is shutting
 *   down or starting), 53300 (too many connections) and 57014 (statement timeout / canceled);
 * - pg and pg-pool's own messages for a lost connection or a connect / query timeout;
 * - Prisma's P1001, P1002, P1008, P1017 and P2024 and its driver adapter's connection kinds.
 */
export function isDependencyUnavailable(e: unknown): boolean {
  let cur: unknown = e;
  for (let depth = 0; depth < 6 && cur !== null && typeof cur === 'object'; depth++) {
    const err = cur as { code?: unknown; kind?: unknown; message?: unknown; cause?: unknown; originalCode?: unknown };
    if (typeof err.code === 'string' && (SOCKET_CODES.has(err.code) || SQLSTATE.test(err.code) || PRISMA_CODES.has(err.code))) return true;
    if (typeof err.originalCode === 'string' && SQLSTATE.test(err.originalCode)) return true;
    if (typeof err.kind === 'string' && ADAPTER_KINDS.has(err.kind)) return true;
    if (typeof err.message === 'string' && MESSAGES.test(err.message)) return true;
    cur = err.cause;
  }
  return false;
}

const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
// class 08 but 08P01 (protocol violation: a bug, not an outage)
const SQLSTATE = /^(08(?!P01)[0-9A-Z]{3}|57P0[123]|53300|57014)$/;
const PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
const ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'DatabaseDoesNotExist']);
const MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|connection error and is not queryable|Client was closed and is not queryable|Cannot use a pool after calling end/;
