import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/**
 * Random bytes for ids, drawn 16 at a time from a pool refilled 4 KiB at a time: uuid's own `v7()`
 * asks the operating system for 16 bytes on every call (`crypto.getRandomValues`), a system call
 * per run created (what Node's `randomUUID` avoids with its own pool).
 */
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;
function random16(): Uint8Array {
  if (poolAt + 16 > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  poolAt += 16;
  return POOL.subarray(poolAt - 16, poolAt);
}

/**
 * A new run id: a UUIDv7 (RFC 9562 §5.7), time-ordered. Its first 48 bits are the creation time in
 * Unix milliseconds, so the `run_events` partition a run's log lands in follows from its id (the
 * partitions are ranges of run ids bounded by `runIdBound`). Every place that creates a run calls
 * this; other ids (threads, links, messages) stay v4.
 */
export function newRunId(): string {
  return v7({ random: random16() });
}

/**
 * The smallest UUIDv7 of millisecond `ms` (Unix time): `<48-bit ms hex>-0000-0000-0000-000000000000`
 * style, the lower bound of a `run_events` partition whose period starts at `ms`. Every v7 id
 * created at or after `ms` sorts at or above it (uuid order is byte order).
 */
export function runIdBound(ms: number): string {
  const hex = Math.trunc(ms).toString(16).padStart(12, '0');
  if (hex.length > 12 || ms < 0) throw new RangeError(`time ${ms} ms is outside UUIDv7's 48-bit range`);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
