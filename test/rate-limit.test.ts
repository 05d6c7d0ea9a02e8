import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { TestRedis } from './support/redis-server.js';
import { startStack, type Stack } from './support/stack.js';

/** Rate limits on Redis: 429 with Retry-After in each surface's shape; wrong keys are limited; fail open without Redis. */
describe('rate limits', () => {
  let redis: TestRedis;
  let stack: Stack;
  let ep: string;

  beforeAll(async () => {
    redis = await TestRedis.start();
    stack = await startStack({ worker: false, env: { REDIS_URL: redis.url, RATE_LIMIT_PER_KEY: '40', RATE_LIMIT_PER_IP: '15', RATE_LIMIT_AUTH_FAILURES_PER_IP: '3' } });
    const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
    ep = `${stack.baseUrl}${echo.basePath}`;
  });
  afterAll(async () => {
    await redis?.start().catch(() => undefined);
    await stack?.close();
    await redis?.stop();
  });

  const get = (h: Record<string, string> = {}) =>
    fetch(ep, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...h }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: randomUUID() } }) });

  it('per client address: 429 with Retry-After and a JSON-RPC error body on the JSON-RPC endpoint', async () => {
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 20; i++) {
      const r = await get();
      statuses.push(r.status);
      if (r.status === 429) limited ??= r;
      else await r.arrayBuffer();
    }
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(3);
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await limited!.json()) as { jsonrpc: string; error: { code: number; message: string } };
    expect(body.jsonrpc).toBe('2.0');
    expect(body.error.message).toContain('rate limit');
  });

  it('wrong-key attempts are limited per address (admin surface: 429 request.rate_limited); a valid key from that address is still served', async () => {
    // a stack of its own: wrong keys are their address's requests, and the test above spent this address's RATE_LIMIT_PER_IP
    const own = await startStack({ worker: false, env: { REDIS_URL: redis.url, RATE_LIMIT_AUTH_FAILURES_PER_IP: '3' } });
    try {
      const wrong: Array<{ status: number; body: any; headers: Headers }> = [];
      for (let i = 0; i < 6; i++) wrong.push(await adminRequest(own.baseUrl, 'aaas_wrongkey_000000000000000000000000', 'GET', '/v1/agents'));
      expect(wrong.map((r) => r.status)).toEqual([401, 401, 401, 429, 429, 429]);
      expect(wrong[3]!.body.error.code).toBe('request.rate_limited');
      expect(Number(wrong[3]!.headers.get('retry-after'))).toBeGreaterThan(0);
      // a distinct wrong key from the spent address: checked, refused with 429 rather than 401
      const other = await adminRequest(own.baseUrl, 'aaas_otherkey_111111111111111111111111', 'GET', '/v1/agents');
      expect(other.status).toBe(429);
      expect(other.headers.get('www-authenticate')).toBeNull();
      const r = await adminRequest(own.baseUrl, own.adminKey, 'GET', '/v1/agents');
      expect(r.status).toBe(200);
    } finally {
      await own.close();
    }
  });

  it('behind a trusted proxy the forwarded client address is limited, not the proxy; an untrusted X-Forwarded-For is ignored', async () => {
    const proxied = await startStack({ worker: false, env: { REDIS_URL: redis.url, RATE_LIMIT_AUTH_FAILURES_PER_IP: '3', TRUST_PROXY: '127.0.0.1' } });
    const plain = await startStack({ worker: false, env: { REDIS_URL: redis.url, RATE_LIMIT_AUTH_FAILURES_PER_IP: '3' } });
    try {
      const wrong = (base: string, from: string) =>
        fetch(`${base}/v1/agents`, { headers: { authorization: 'Bearer aaas_wrongkey_000000000000000000000000', 'x-forwarded-for': from } }).then(async (r) => (await r.arrayBuffer(), r.status));
      const a: number[] = [];
      for (let i = 0; i < 4; i++) a.push(await wrong(proxied.baseUrl, '203.0.113.7'));
      expect(a).toEqual([401, 401, 401, 429]);
      // another client behind the same proxy is not affected
      expect(await wrong(proxied.baseUrl, '198.51.100.9')).toBe(401);
      // without TRUST_PROXY the header is the client's word: everyone is the TCP peer
      const b: number[] = [];
      for (let i = 0; i < 3; i++) b.push(await wrong(plain.baseUrl, `192.0.2.${i}`));
      expect(b).toEqual([401, 401, 401]);
      expect(await wrong(plain.baseUrl, '192.0.2.200')).toBe(429);
    } finally {
      await proxied.close();
      await plain.close();
    }
  });

  it('the limit is shared by instances on one Redis: counts made on one are seen by the other after its flush', async () => {
    const env = { REDIS_URL: redis.url, REDIS_PREFIX: `aaas-test-shared-${randomUUID().slice(0, 8)}`, RATE_LIMIT_PER_IP: '10' };
    const a = await startStack({ worker: false, env });
    const b = await startStack({ worker: false, env });
    try {
      const hit = (base: string) => fetch(`${base}/v1/agents`).then(async (r) => (await r.arrayBuffer(), r.status));
      const first: number[] = [];
      for (let i = 0; i < 6; i++) first.push(await hit(a.baseUrl));
      expect(first).toEqual(Array(6).fill(401));
      // a's counts reach Redis within RATE_LIMIT_SYNC_MS; b learns the total at its own first flush
      await new Promise((r) => setTimeout(r, 300));
      await hit(b.baseUrl);
      await new Promise((r) => setTimeout(r, 300));
      const second: number[] = [];
      for (let i = 0; i < 5; i++) second.push(await hit(b.baseUrl));
      // 6 on a + 1 on b = 7 of 10: three more are served, then 429
      expect(second).toEqual([401, 401, 401, 429, 429]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('fails open while Redis is down: requests are served, nothing waits', async () => {
    await redis.stop();
    const t0 = Date.now();
    const r = await fetch(`${stack.baseUrl}${new URL(ep).pathname}/.well-known/agent-card.json`);
    expect(r.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(2_000);
    await redis.start();
  });
});

describe('concurrent streams per caller', () => {
  let stack: Stack;
  let ep: string;
  beforeAll(async () => {
    stack = await startStack({ env: { MAX_STREAMS_PER_CALLER: '2' } });
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'streamer',
      transports: ['JSONRPC', 'HTTP+JSON'],
      a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
      runtime: { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] },
    });
    ep = `${stack.baseUrl}${agent.basePath}`;
  });
  afterAll(async () => {
    await stack?.close();
  });

  const stream = (ac: AbortController) =>
    fetch(ep, {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] } } }),
    });

  it('the caller over its limit gets a protocol error (429); closing a stream frees its place', async () => {
    const acs = [new AbortController(), new AbortController()];
    const open = await Promise.all(acs.map(stream));
    for (const r of open) expect(r.headers.get('content-type')).toMatch(/text\/event-stream/);
    const third = await stream(new AbortController());
    expect(third.status).toBe(429);
    const body = (await third.json()) as { jsonrpc: string; error: { message: string } };
    expect(body.error.message).toContain('too many open streams');
    acs[0]!.abort();
    await expect
      .poll(async () => {
        const ac = new AbortController();
        const r = await stream(ac);
        ac.abort();
        return r.status;
      }, { timeout: 5_000, interval: 100 })
      .toBe(200);
    acs[1]!.abort();
  });

  it('a refused stream creates no task (issue #44): the slot is taken before the message is accepted', async () => {
    const db = stack.api.get(DatabaseService);
    const acs = [new AbortController(), new AbortController()];
    // the previous test's streams free their places once the server saw them close
    for (const ac of acs) await expect.poll(async () => (await stream(ac)).status, { timeout: 5_000, interval: 100 }).toBe(200);
    const messageId = randomUUID();
    const refused = await fetch(ep, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId, role: 'ROLE_USER', parts: [{ text: 'hold' }] } } }),
    });
    expect(refused.status).toBe(429);
    const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages WHERE message_id = $1', [messageId]);
    expect(row!.n).toBe(0);
    for (const ac of acs) ac.abort();
  });
});

/**
 * The auth-failure limiter never blocks a valid credential: behind a trusted proxy (so each test
 * address is its own client) an address over its failure budget still gets its valid keys'
 * answers, every wrong guess from it gets 429 with Retry-After (on both the admin API and an A2A
 * binding, in each one's shape), and one credential failing again and again is refused on its
 * own (credential, address) pair before the address's budget is spent.
 */
describe('auth failures never lock out a valid key', () => {
  let stack: Stack;
  let ep: string;
  let a2aKey: string;
  const BUDGET = 8;

  beforeAll(async () => {
    stack = await startStack({ worker: false, env: { RATE_LIMIT_AUTH_FAILURES_PER_IP: String(BUDGET), TRUST_PROXY: '127.0.0.1' } });
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'keyed', security: { scheme: 'apiKey' } });
    ep = `${stack.baseUrl}${agent.basePath}`;
    const created = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] });
    expect(created.status).toBe(201);
    a2aKey = created.body.key;
    expect(a2aKey).toMatch(/^aaas_/);
  });
  afterAll(async () => {
    await stack?.close();
  });

  const wrongKey = () => `aaas_${randomUUID().replace(/-/g, '').slice(0, 8)}_${randomUUID().replace(/-/g, '')}`;
  const admin = (key: string, from: string) => adminRequest(stack.baseUrl, key, 'GET', '/v1/agents', undefined, { 'x-forwarded-for': from });
  const rpc = (key: string, from: string, id: number) =>
    fetch(ep, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': key, 'x-forwarded-for': from },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'ListTasks', params: {} }),
    });

  it('an address over its failure budget: valid keys get 200, every wrong key 429 with Retry-After; guessing gets no more 401s', async () => {
    const from = '203.0.113.50';
    const guesses: number[] = [];
    for (let i = 0; i < BUDGET; i++) guesses.push((await admin(wrongKey(), from)).status);
    expect(guesses).toEqual(Array(BUDGET).fill(401));

    // past the budget: distinct guesses are all 429 with Retry-After, none is 401
    const over = await Promise.all(Array.from({ length: 12 }, () => admin(wrongKey(), from)));
    expect(over.map((r) => r.status)).toEqual(Array(12).fill(429));
    for (const r of over) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      expect(r.body.error.code).toBe('request.rate_limited');
      expect(r.body.error.message).toContain('too many failed authentications from this address');
    }

    // the valid keys from the same address are served, on both surfaces, as often as asked
    for (let i = 0; i < 3; i++) {
      expect((await admin(stack.adminKey, from)).status).toBe(200);
      const ok = await rpc(a2aKey, from, i);
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as any).result.tasks).toEqual([]);
    }

    // a wrong key on the JSON-RPC binding: 429 as a JSON-RPC error carrying the request's id
    const bad = await rpc(wrongKey(), from, 77);
    expect(bad.status).toBe(429);
    expect(Number(bad.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await bad.json()) as { jsonrpc: string; id: number; error: { code: number; message: string } };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 77, error: { code: -32600, message: expect.stringContaining('too many failed authentications') } });

    // another address is not affected
    expect((await admin(wrongKey(), '198.51.100.50')).status).toBe(401);
  });

  it('one credential failing repeatedly is refused on its own (credential, address) pair; other credentials from the address are still checked', async () => {
    const from = '203.0.113.60';
    const same = wrongKey();
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await admin(same, from)).status);
    // 5 failures per credential and address (below this stack's address budget of 8)
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    const refused = await admin(same, from);
    expect(refused.body.error.message).toContain('with this credential from this address');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // the address has 5 failures of 8: a new wrong key is still answered 401, the valid key 200
    expect((await admin(wrongKey(), from)).status).toBe(401);
    expect((await admin(stack.adminKey, from)).status).toBe(200);
    // the same wrong key from another address starts its own count
    expect((await admin(same, '198.51.100.60')).status).toBe(401);
  });

  it('each failed JSON-RPC authentication counts once: the budget of wrong keys is answered 401, then 429', async () => {
    const from = '203.0.113.80';
    const statuses: number[] = [];
    for (let i = 0; i < BUDGET + 1; i++) {
      const r = await rpc(wrongKey(), from, i);
      statuses.push(r.status);
      const body = (await r.json()) as { id: number; error: { message: string } };
      expect(body.id).toBe(i);
      // the answer's body goes with its status: a 401 says why, a 429 says rate limit
      expect(body.error.message).toContain(r.status === 401 ? 'not valid' : 'too many failed authentications');
    }
    expect(statuses).toEqual([...Array(BUDGET).fill(401), 429]);
  });

  it('requests without a credential are not counted as guesses', async () => {
    const from = '203.0.113.70';
    for (let i = 0; i < BUDGET + 2; i++) expect((await adminRequest(stack.baseUrl, null, 'GET', '/v1/agents', undefined, { 'x-forwarded-for': from })).status).toBe(401);
    expect((await admin(wrongKey(), from)).status).toBe(401);
  });
});

/**
 * Issue #43 row 10: a key's 8-character prefix used to be enough to lock the key out (the
 * per-key limit counted the presented prefix before authentication). A key now counts only once
 * it authenticated; a wrong secret counts against its address (the per-address request limit and
 * the failed-authentication limits), and the key stays served.
 */
describe('a key counts only once it authenticated', () => {
  let stack: Stack;
  let ep: string;
  let a2aKey: string;
  const PER_KEY = 300;
  const PER_IP = 350;

  beforeAll(async () => {
    stack = await startStack({ worker: false, env: { RATE_LIMIT_PER_KEY: String(PER_KEY), RATE_LIMIT_PER_IP: String(PER_IP), TRUST_PROXY: '127.0.0.1' } });
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'keyed-limit', security: { scheme: 'apiKey' } });
    ep = `${stack.baseUrl}${agent.basePath}`;
    a2aKey = (await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] }, { 'x-forwarded-for': '198.51.100.1' })).body.key;
  });
  afterAll(async () => {
    await stack?.close();
  });

  const forged = (key: string) => `${key.slice(0, 14)}${randomUUID().replace(/-/g, '')}`;
  const admin = (key: string | null, from: string) => adminRequest(stack.baseUrl, key, 'GET', '/v1/agents', undefined, { 'x-forwarded-for': from });
  const rpc = (key: string, from: string) =>
    fetch(ep, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': key, 'x-forwarded-for': from },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} }),
    }).then(async (r) => (await r.arrayBuffer(), r.status));

  it(`${PER_KEY + 100} wrong secrets with a key's prefix (admin API and JSON-RPC) leave the key served; they spend their address's budget`, async () => {
    const from = '203.0.113.90';
    const statuses = new Map<number, number>();
    for (let i = 0; i < PER_KEY + 100; i++) {
      // one key's prefix on both surfaces
      const status = i % 2 === 0 ? (await admin(forged(a2aKey), from)).status : await rpc(forged(a2aKey), from);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    // 401 until the address's failure budget (30), then 429: never a 2xx
    expect([...statuses.keys()].sort()).toEqual([401, 429]);
    // the real key, from that address and from another: served
    expect(await rpc(a2aKey, from)).toBe(200);
    expect((await adminRequest(stack.baseUrl, a2aKey, 'GET', '/v1/agents', undefined, { 'x-forwarded-for': from })).status).toBe(403);
    expect(await rpc(a2aKey, '198.51.100.2')).toBe(200);
    // the wrong secrets were the address's requests: past RATE_LIMIT_PER_IP a request from it
    // without a key is refused per client address, from another address it is not
    const keyless = await admin(null, from);
    expect(keyless.status).toBe(429);
    expect(keyless.body.error.message).toContain('per client address');
    expect((await admin(null, '198.51.100.3')).status).toBe(401);
  }, 60_000);

  it('the key itself is still limited: past RATE_LIMIT_PER_KEY its requests are 429 per API key', async () => {
    let limited: number | undefined;
    for (let i = 0; i < PER_KEY + 5 && limited === undefined; i++) {
      const status = await rpc(a2aKey, `198.51.100.${10 + (i % 50)}`);
      if (status === 429) limited = i;
    }
    expect(limited).toBeDefined();
    expect(limited!).toBeGreaterThan(PER_KEY - 10);
  }, 60_000);
});
