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
