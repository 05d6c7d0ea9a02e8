import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';

/**
 * Who is reading and writing in the current request (the API's HTTP and gRPC edges open one per
 * request with `runAsReader`): `key` identifies the caller (a digest of its credentials, or its
 * address when anonymous); `writes`: the edge counts the request as a write (an HTTP method other
 * than GET/HEAD/OPTIONS, an RPC that is not a Get/List); `wrote`: DatabaseService saw it run a write
 * statement or transaction itself. Read-your-writes is kept per key: see DatabaseService.readQuery.
 */
export interface ReaderState {
  readonly key: string;
  writes: boolean;
  wrote: boolean;
}

const readers = new AsyncLocalStorage<ReaderState>();

/** A new request's reader state: `writes` true for a request that writes (or may). */
export function newReader(key: string, writes = false): ReaderState {
  return { key, writes, wrote: false };
}

/** Run `fn` as the request of `state` (its lag-tolerant reads keep its caller's read-your-writes). */
export function runAsReader<T>(state: ReaderState, fn: () => T): T {
  return readers.run(state, fn);
}

/**
 * The caller key of a request: a digest of its credential (API key or bearer token: the same
 * credential is the same caller on every edge), else its client address. Never the secret itself.
 */
export function readerKeyOf(credential: string | undefined, address: string): string {
  // `Authorization: Bearer <key>` and `X-API-Key: <key>` are the same caller
  const c = credential?.replace(/^\s*Bearer\s+/i, '').trim();
  return c ? `c:${createHash('sha256').update(c).digest('base64url').slice(0, 22)}` : `ip:${address}`;
}

/** The current request's reader state, if a request is being served. */
export function currentReader(): ReaderState | undefined {
  return readers.getStore();
}

/**
 * A PostgreSQL LSN (`16/B374D848`) as a number comparable with `>=`: 64-bit positions fit a
 * bigint exactly. Null for NULL (`pg_last_wal_replay_lsn()` on a server that is not a standby).
 */
export function parseLsn(lsn: string | null | undefined): bigint | null {
  if (!lsn) return null;
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  if (!m) return null;
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/** Statements that write (a data-modifying statement or CTE): a request that runs one has written. */
const WRITES = /\b(INSERT|UPDATE|DELETE|MERGE)\b/i;
const writesByText = new Map<string, boolean>();

/** Whether `text` may write; remembered per statement text (the hot paths' texts are constants). */
export function isWriteStatement(text: string): boolean {
  let w = writesByText.get(text);
  if (w === undefined) {
    w = WRITES.test(text);
    // bounded: dynamic texts (few) must not grow it without end
    if (writesByText.size < 10_000) writesByText.set(text, w);
  }
  return w;
}
