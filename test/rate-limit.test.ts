import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

  it('wrong-key attempts are limited per address; the admin surface answers 429 request.rate_limited', async () => {
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) codes.push((await adminRequest(stack.baseUrl, 'aaas_wrongkey_000000000000000000000000', 'GET', '/v1/agents')).status);
    expect(codes.slice(0, 3)).toEqual([401, 401, 401]);
    expect(codes.slice(3)).toEqual([429, 429, 429]);
    const r = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', '/v1/agents');
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe('request.rate_limited');
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
});
