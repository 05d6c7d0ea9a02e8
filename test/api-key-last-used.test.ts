import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DatabaseService } from '#libs/db';
import { ApiKeyRepository } from '../libs/registry/src/api-key.repository.js';
import { LAST_USED_RECORD_INTERVAL_MS } from '../libs/registry/src/api-key.service.js';
import { adminRequest } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * An API key's `lastUsedAt` (key hygiene): null until the key authenticates a request, then the
 * time of that request, written off the request path and at most once per
 * LAST_USED_RECORD_INTERVAL_MS per key (in each process, and in the database across processes).
 * Failed authentications and revoked keys never touch it; a failing write never fails a request.
 */

interface KeyBody {
  id: string;
  key: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

let stack: Stack;
let db: DatabaseService;

const root = (method: string, path: string, body?: unknown) => adminRequest(stack.baseUrl, stack.adminKey, method, path, body);
const withKey = (key: string) => adminRequest(stack.baseUrl, key, 'GET', '/v1/organization');

async function newKey(name: string): Promise<KeyBody> {
  const res = await root('POST', '/v1/api-keys', { name, scopes: ['admin'] });
  expect(res.status).toBe(201);
  return res.body as KeyBody;
}

/** The key as the admin API lists it. */
async function listed(id: string): Promise<KeyBody> {
  const res = await root('GET', '/v1/api-keys');
  expect(res.status).toBe(200);
  const key = (res.body.apiKeys as KeyBody[]).find((k) => k.id === id);
  expect(key, `key ${id} listed`).toBeDefined();
  return key!;
}

/** Polls the admin API (every 25 ms, up to `timeoutMs`) until the key's lastUsedAt is set; returns it and when it was seen. */
async function untilUsed(id: string, timeoutMs = 2_000): Promise<{ lastUsedAt: string; seenAt: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { lastUsedAt } = await listed(id);
    if (lastUsedAt !== null) return { lastUsedAt, seenAt: Date.now() };
    if (Date.now() > deadline) throw new Error(`lastUsedAt of key ${id} still null after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Waits until a use recorded after this moment has landed: a fresh witness key is used once and
 * its lastUsedAt awaited. Any write a request before this one started has had as long to land.
 */
async function settle(): Promise<void> {
  const witness = await newKey(`witness-${randomBytes(3).toString('hex')}`);
  expect((await withKey(witness.key)).status).toBe(200);
  await untilUsed(witness.id);
}

async function storedLastUsed(id: string): Promise<Date | null> {
  const [row] = await db.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_keys WHERE id = $1', [id]);
  return row!.last_used_at;
}

beforeAll(async () => {
  stack = await startStack({ worker: false });
  db = stack.api.get(DatabaseService);
});

afterAll(async () => {
  vi.restoreAllMocks();
  await stack?.close();
});

describe('API key lastUsedAt', () => {
  it('is null for a new key; one authenticated call sets it to a time within the call; a call right after does not move it', async () => {
    const key = await newKey('fresh');
    expect(key.lastUsedAt).toBeNull();
    expect(await listed(key.id)).toEqual({ id: key.id, name: 'fresh', prefix: key.prefix, scopes: ['admin'], createdAt: key.createdAt, revokedAt: null, lastUsedAt: null });

    const before = Date.now();
    expect((await withKey(key.key)).status).toBe(200);
    // written after the answer: it may land a little later, so the upper bound is when it was seen
    const { lastUsedAt, seenAt } = await untilUsed(key.id);
    const used = Date.parse(lastUsedAt);
    expect(used).toBeGreaterThanOrEqual(before);
    expect(used).toBeLessThanOrEqual(seenAt + 1); // the column keeps milliseconds, rounded
    expect((await storedLastUsed(key.id))?.toISOString()).toBe(lastUsedAt);

    // throttled: used again at once (the second answer from the authentication cache), nothing moves
    expect((await withKey(key.key)).status).toBe(200);
    expect((await withKey(key.key)).status).toBe(200);
    await settle();
    expect((await listed(key.id)).lastUsedAt).toBe(lastUsedAt);
  });

  it('a failed authentication with a wrong secret for the prefix does not set it', async () => {
    const key = await newKey('guessed');
    const wrong = `aaas_${key.prefix}_${'x'.repeat(32)}`;
    expect(wrong).not.toBe(key.key);
    const res = await withKey(wrong);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('auth.invalid_credentials');
    await settle();
    expect((await listed(key.id)).lastUsedAt).toBeNull();
    expect(await storedLastUsed(key.id)).toBeNull();
  });

  it('a revoked key is never touched: its calls fail before, and the write itself skips revoked keys', async () => {
    const key = await newKey('to-revoke');
    expect((await withKey(key.key)).status).toBe(200);
    const { lastUsedAt } = await untilUsed(key.id);
    expect((await root('DELETE', `/v1/api-keys/${key.id}`)).status).toBe(204);
    expect((await withKey(key.key)).status).toBe(401);
    await settle();
    expect((await listed(key.id)).lastUsedAt).toBe(lastUsedAt);

    // another process could still hold the key in its authentication cache for a few seconds: the
    // statement itself leaves a revoked key alone, even when its last use is old enough to rewrite
    const old = new Date(Date.now() - 2 * LAST_USED_RECORD_INTERVAL_MS);
    await db.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [key.id, old]);
    await stack.api.get(ApiKeyRepository, { strict: false }).recordUse(key.id, LAST_USED_RECORD_INTERVAL_MS);
    expect(await storedLastUsed(key.id)).toEqual(old);
  });

  it('the database throttles writes from every process: a recent use is kept, an old one is rewritten', async () => {
    const repo = stack.api.get(ApiKeyRepository, { strict: false });
    const key = await newKey('shared');
    expect((await withKey(key.key)).status).toBe(200);
    const first = new Date((await untilUsed(key.id)).lastUsedAt);

    // as a second process would (its own in-memory throttle is empty): too recent, kept
    await repo.recordUse(key.id, LAST_USED_RECORD_INTERVAL_MS);
    expect(await storedLastUsed(key.id)).toEqual(first);

    const old = new Date(Date.now() - LAST_USED_RECORD_INTERVAL_MS - 1_000);
    await db.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [key.id, old]);
    const before = Date.now();
    await repo.recordUse(key.id, LAST_USED_RECORD_INTERVAL_MS);
    const rewritten = (await storedLastUsed(key.id))!;
    expect(rewritten.getTime()).toBeGreaterThanOrEqual(before);
    expect(rewritten.getTime()).toBeLessThanOrEqual(Date.now() + 1);
  });

  it('a failing write never fails the request: the call succeeds, one warning is logged, nothing is written', async () => {
    const key = await newKey('unrecordable');
    // observed, not replaced: the real logger still runs
    const warn = vi.spyOn(Logger.prototype, 'warn');
    const about = () => warn.mock.calls.filter((c) => String(c[0]).includes(key.id));
    // every write of last_used_at now fails (existing rows are not checked: NOT VALID)
    await db.query('ALTER TABLE api_keys ADD CONSTRAINT test_no_last_used CHECK (last_used_at IS NULL) NOT VALID');
    try {
      expect((await withKey(key.key)).status).toBe(200);
      const deadline = Date.now() + 2_000;
      while (about().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(about()).toHaveLength(1);
      expect(String(about()[0]![0])).toMatch(/^recording the use of API key [0-9a-f-]{36} failed: .*test_no_last_used/);
      // within the interval the write is not retried (nor warned about again); the request is fine
      expect((await withKey(key.key)).status).toBe(200);
    } finally {
      await db.query('ALTER TABLE api_keys DROP CONSTRAINT test_no_last_used');
    }
    // a retried write would have landed by now (and succeeded, the constraint being gone)
    await settle();
    expect(about()).toHaveLength(1);
    warn.mockRestore();
    expect(await storedLastUsed(key.id)).toBeNull();
  });
});
