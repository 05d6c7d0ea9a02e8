import { describe, expect, it } from 'vitest';
import { API_KEY_PATTERN, generateApiKey, hashSecret, parseApiKey, randomAlnum, secretMatches, TtlLruCache } from './api-key.js';

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

describe('TtlLruCache', () => {
  it('expires entries after the TTL', () => {
    let now = 0;
    const cache = new TtlLruCache<string, number>(10, 100, () => now);
    cache.set('a', 1);
    now = 99;
    expect(cache.get('a')).toBe(1);
    now = 100;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new TtlLruCache<string, number>(2, 1000);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    cache.deleteWhere((v) => v === 3);
    expect(cache.get('c')).toBeUndefined();
  });
});
