import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API key material: `aaas_<prefix>_<secret>`, `prefix` 8 alphanumerics (stored in clear to find
 * the key), `secret` alphanumerics (32 for generated keys; 24..128 accepted, as the
 * BOOTSTRAP_ADMIN_KEY setting allows 24). Only `sha256(secret)` is stored.
 */
export const API_KEY_PATTERN = /^aaas_([A-Za-z0-9]{8})_([A-Za-z0-9]{24,128})$/;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `n` uniformly random alphanumerics (rejection sampling: no modulo bias). */
export function randomAlnum(n: number): string {
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      // 248 = 4 * 62: bytes at or above it would favour the first characters
      if (b < 248) out += ALPHABET[b % 62];
      if (out.length === n) break;
    }
  }
  return out;
}

export interface ApiKeyMaterial {
  key: string;
  prefix: string;
  secret: string;
}

/** A fresh key: 8-character prefix, 32-character secret (~190 bits). */
export function generateApiKey(): ApiKeyMaterial {
  const prefix = randomAlnum(8);
  const secret = randomAlnum(32);
  return { key: `aaas_${prefix}_${secret}`, prefix, secret };
}

/** Split a presented key; null when it does not have the key format. */
export function parseApiKey(presented: string): { prefix: string; secret: string } | null {
  const m = API_KEY_PATTERN.exec(presented);
  return m ? { prefix: m[1]!, secret: m[2]! } : null;
}

/** Hex SHA-256 of a secret, as stored in `api_keys.secret_hash`. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHashHex: string): boolean {
  const a = createHash('sha256').update(secret, 'utf8').digest();
  const b = Buffer.from(storedHashHex, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A small LRU map with a time-to-live: `get` drops expired entries and refreshes recency; `set`
 * evicts the least recently used entry beyond `maxEntries`. (A Map iterates in insertion order,
 * so re-inserting on access keeps the oldest entry first.)
 */
export class TtlLruCache<K, V> {
  private readonly entries = new Map<K, { value: V; expiresAt: number }>();

  constructor(
    private readonly maxEntries: number,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt <= this.now()) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as K;
      this.entries.delete(oldest);
    }
  }

  /** Remove every entry whose value satisfies `predicate`. */
  deleteWhere(predicate: (value: V) => boolean): void {
    for (const [key, entry] of this.entries) if (predicate(entry.value)) this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}
