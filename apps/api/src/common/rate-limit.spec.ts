import { describe, expect, it } from 'vitest';
import { authenticatesAtEdge, EDGE_AUTH_WAIT_MS } from './rate-limit.js';

describe('authenticatesAtEdge', () => {
  const principal = { orgId: 'o', keyId: 'k', scopes: [] };
  it('a key that authenticates: true; one that does not: false', async () => {
    expect(await authenticatesAtEdge({ authenticate: async () => principal }, 'k')).toBe(true);
    expect(await authenticatesAtEdge({ authenticate: async () => Promise.reject(new Error('invalid API key')) }, 'k')).toBe(false);
  });

  it('a database that does not answer is waited on EDGE_AUTH_WAIT_MS, then the key counts as not authenticated', async () => {
    const t0 = performance.now();
    expect(await authenticatesAtEdge({ authenticate: () => new Promise(() => undefined) }, 'k')).toBe(false);
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(EDGE_AUTH_WAIT_MS - 5);
    expect(waited).toBeLessThan(EDGE_AUTH_WAIT_MS + 500);
  });
});
