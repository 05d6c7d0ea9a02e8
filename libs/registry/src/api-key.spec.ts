import { describe, expect, it } from 'vitest';
import { API_KEY_PATTERN, generateApiKey, hashSecret, parseApiKey, randomAlnum, secretMatches } from './api-key.js';

describe('API key material', () => {
  it('generates aaas_<8>_<32> keys whose parts parse back', () => {
    const keys = Array.from({ length: 200 }, generateApiKey);
    for (const k of keys) {
      expect(k.key).toMatch(/^aaas_[A-Za-z0-9]{8}_[A-Za-z0-9]{32}$/);
      expect(parseApiKey(k.key)).toEqual({ prefix: k.prefix, secret: k.secret });
    }
    expect(new Set(keys.map((k) => k.prefix)).size).toBe(200);
  });

  it('rejects anything else', () => {
    for (const bad of ['', 'aaas__x', `aaas_short_${'a'.repeat(32)}`, `aaas_ABCDEFGH_${'a'.repeat(23)}`, `aaas_ABCDEFGH_${'a'.repeat(31)}!`, `Bearer aaas_ABCDEFGH_${'a'.repeat(32)}`]) {
      expect(parseApiKey(bad)).toBeNull();
    }
    expect(API_KEY_PATTERN.test(`aaas_ABCDEFGH_${'a'.repeat(24)}`)).toBe(true);
  });

  it('compares secrets against the stored sha256 hex', () => {
    const stored = hashSecret('s3cret');
    expect(stored).toMatch(/^[0-9a-f]{64}$/);
    expect(secretMatches('s3cret', stored)).toBe(true);
    expect(secretMatches('s3cres', stored)).toBe(false);
    expect(secretMatches('s3cret', 'abcd')).toBe(false);
  });

  it('draws every alphanumeric', () => {
    expect(new Set(randomAlnum(20_000)).size).toBe(62);
  });
});
