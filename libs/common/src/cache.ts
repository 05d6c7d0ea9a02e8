import { LRUCache } from 'lru-cache';

/**
 * The process's one kind of in-memory cache (API keys, agents, signing keys, JWKS, webhook signers,
 * compiled patterns, upstream cards, runtime secrets): bounded to `maxEntries` with least-recently-
 * used eviction (`lru-cache`), and entries that expire `ttlMs` after they were set on a monotonic
 * clock (`performance.now()`, so a wall-clock step neither keeps nor drops entries). `ttlMs` 0: no
 * expiry (bounded by size only). `now` replaces the clock (tests). Values may be promises (a
 * lookup in flight is shared); a caller drops a rejected one with `delete`.
 */
export class TtlLruCache<K extends {}, V> {
  private readonly lru: LRUCache<K, { value: V; at: number }>;

  constructor(
    maxEntries: number,
    private readonly ttlMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.lru = new LRUCache({ max: maxEntries, ...(ttlMs > 0 && { ttl: ttlMs, ttlResolution: 0, perf: { now } }) });
  }

  /**
   * The value unless it expired; `maxAgeMs` (≤ the cache's TTL) asks for a fresher one than the TTL.
   * A hit counts as a use for the LRU order.
   */
  get(key: K, maxAgeMs?: number): V | undefined {
    const entry = this.lru.get(key);
    if (!entry) return undefined;
    if (maxAgeMs !== undefined && this.now() - entry.at > maxAgeMs) return undefined;
    return entry.value;
  }

  set(key: K, value: V): void {
    this.lru.set(key, { value, at: this.now() });
  }

  delete(key: K): void {
    this.lru.delete(key);
  }

  /** Remove every entry whose value satisfies `predicate`. */
  deleteWhere(predicate: (value: V) => boolean): void {
    for (const [key, entry] of this.lru.entries()) if (predicate(entry.value)) this.lru.delete(key);
  }

  clear(): void {
    this.lru.clear();
  }

  /** Entries held (expired ones may still count until they are looked up or evicted). */
  get size(): number {
    return this.lru.size;
  }

  /** The configured time-to-live (ms; 0 = none). */
  get ttl(): number {
    return this.ttlMs;
  }
}
