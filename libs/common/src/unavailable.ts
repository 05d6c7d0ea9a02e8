import { AppError } from './errors.js';

/** Seconds a caller is asked to wait (`Retry-After`) on a 503 for an unavailable dependency. */
export const RETRY_AFTER_SECONDS = 2;

/** `service.unavailable` (503): the answer, on every surface, to a dependency that cannot serve the request now. */
export function serviceUnavailable(cause?: unknown): AppError {
  return new AppError('service.unavailable', 'the service is temporarily unavailable (its database could not serve the request); retry shortly', { cause, retryable: true });
}

/**
 * Whether an error means a dependency of the request path (PostgreSQL, seen through pg, pg-pool or
 * Prisma; Redis, seen through ioredis) cannot do the work now — unreachable, silent, or refusing
 * for want of resources or of a writable server — as opposed to a bug or a bad request. The same
 * request may succeed shortly (on another server, once space is freed, once the standby is
 * promoted), so the edges answer 503 / UNAVAILABLE with `Retry-After` instead of 500, and an
 * execution waits and retries (`retryWhileUnavailable`, RuntimeOperations.apply) instead of failing
 * its run.
 *
 * Recognised, anywhere along the `cause` chain (at most 6 deep):
 * - socket errors (`ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, `EHOSTUNREACH`, `ENETUNREACH`,
 *   `ENOTFOUND`, `EAI_AGAIN`, `EPIPE`);
 * - PostgreSQL SQLSTATEs (Appendix A of its manual) that say "not now", never "not this request":
 *   - class 08, connection exception (but not 08P01, a protocol violation: a bug);
 *   - 25006 read_only_sql_transaction (a hot standby, or `default_transaction_read_only` on:
 *     the primary moved), 25P03 idle_in_transaction_session_timeout, 25P04 transaction_timeout;
 *   - class 53, insufficient resources: 53000, 53100 disk_full, 53200 out_of_memory, 53300
 *     too_many_connections, 53400 configuration_limit_exceeded;
 *   - 55P03 lock_not_available (a `lock_timeout` ran out);
 *   - 57000 operator_intervention, 57014 query_canceled (statement timeout), 57P01 admin_shutdown,
 *     57P02 crash_shutdown, 57P03 cannot_connect_now (starting, in recovery), 57P04
 *     database_dropped, 57P05 idle_session_timeout;
 *   - 58000 system_error, 58030 io_error;
 *   - 72000 snapshot_too_old.
 *   Not recognised, on purpose: class 40 (serialization failures and deadlocks are retried where
 *   they can happen — a deadlocked append by EventLogRepository, a replica's recovery conflict by
 *   DatabaseService.readQuery on the primary — else they are a bug), class 22 (data exceptions),
 *   23 (constraint violations: the repositories' `translated()` turns them into conflicts), 42
 *   (syntax, undefined objects), 54 (program limits: the request is too big), XX (internal error,
 *   corruption) and the rest of 25, 55 and 58;
 * - pg and pg-pool's own messages for a lost connection or a connect / query timeout;
 * - Prisma's P1001, P1002, P1008, P1017 and P2024 and its driver adapter's connection kinds (the
 *   adapter's other errors carry the SQLSTATE as `originalCode`);
 * - Redis: a reply error `READONLY` (a replica), `OOM` (maxmemory reached), `LOADING` (the dataset
 *   is being loaded), `MASTERDOWN` (a replica cut from its master), `BUSY` (a script is running),
 *   `TRYAGAIN`, `CLUSTERDOWN`, `NOREPLICAS`; ioredis' MaxRetriesPerRequestError and its messages
 *   for a closed connection, a disabled offline queue and a command timeout. No request path
 *   waits on Redis (limits fail open, wake-ups and dispatch are fire-and-forget): this keeps any
 *   that ever would retryable too.
 */
export function isDependencyUnavailable(e: unknown): boolean {
  let cur: unknown = e;
  for (let depth = 0; depth < 6 && cur !== null && typeof cur === 'object'; depth++) {
    const err = cur as { code?: unknown; kind?: unknown; message?: unknown; cause?: unknown; originalCode?: unknown; name?: unknown };
    if (typeof err.code === 'string' && (SOCKET_CODES.has(err.code) || SQLSTATE.test(err.code) || PRISMA_CODES.has(err.code))) return true;
    if (typeof err.originalCode === 'string' && SQLSTATE.test(err.originalCode)) return true;
    if (typeof err.kind === 'string' && ADAPTER_KINDS.has(err.kind)) return true;
    if (typeof err.message === 'string') {
      if (MESSAGES.test(err.message)) return true;
      if (err.name === 'ReplyError' && REDIS_REPLIES.test(err.message)) return true;
    }
    if (err.name === 'MaxRetriesPerRequestError') return true;
    cur = err.cause;
  }
  return false;
}

const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
// the SQLSTATEs listed in the docstring, and only those
const SQLSTATE = /^(08(?!P01)[0-9A-Z]{3}|25006|25P0[34]|53[0-9A-Z]{3}|55P03|57000|57014|57P0[1-5]|58000|58030|72000)$/;
const PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
const ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'DatabaseDoesNotExist']);
const MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|connection error and is not queryable|Client was closed and is not queryable|Cannot use a pool after calling end|^Connection is closed\.$|^Stream isn't writeable and enableOfflineQueue options is false$|^Command timed out$/;
// a Redis error reply starts with its code (also inside a script's error: "OOM command not allowed ... script: ...")
const REDIS_REPLIES = /^(READONLY|OOM|LOADING|MASTERDOWN|BUSY|TRYAGAIN|CLUSTERDOWN|NOREPLICAS) /;
