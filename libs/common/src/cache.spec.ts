import { describe, expect, it } from 'vitest';
import { TtlLruCache } from './cache.js';

describe('TtlLruCache', () => {
  it('expires entries once their TTL has passed, on the clock it is given', () => {
    let now = 1_000;
    const cache = new TtlLruCache<string, number>(10, 100, () => now);
    cache.set('a', 1);
    now = 1_100;
    expect(cache.get('a')).toBe(1);
    now = 1_101;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('answers a fresher maxAge than its TTL per lookup', () => {
    let now = 5_000;
    const cache = new TtlLruCache<string, string>(10, 60_000, () => now);
    cache.set('agent', 'v1');
    now += 2_000;
    expect(cache.get('agent', 5_000)).toBe('v1');
    expect(cache.get('agent', 1_000)).toBeUndefined();
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
    expect(cache.size).toBe(1);
  });

  it('with no TTL keeps entries until the bound evicts them, and never empties itself when full', () => {
    const cache = new TtlLruCache<number, number>(100, 0);
    for (let i = 0; i < 1_000; i++) cache.set(i, i);
    expect(cache.size).toBe(100);
    expect(cache.get(999)).toBe(999);
    expect(cache.get(899)).toBeUndefined();
  });

  it('uses a monotonic clock by default: a wall-clock step changes nothing', () => {
    const cache = new TtlLruCache<string, number>(10, 60_000);
    cache.set('k', 1);
    const realNow = Date.now;
    Date.now = () => realNow() + 3_600_000;
    try {
      expect(cache.get('k')).toBe(1);
    } finally {
      Date.now = realNow;
    }
  });
});
