import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/** Security headers, the docs switch, card URLs that no Host header can choose, http(s)-only links. */
let stack: Stack;
let cardPath: string;

beforeAll(async () => {
  stack = await startStack({ worker: false });
  const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
  cardPath = new URL(echo.cardUrl).pathname;
});
afterAll(async () => {
  await stack?.close();
});

/** GET with an explicit Host header (fetch does not let a caller set it). */
function getWithHost(path: string, host: string): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const { port } = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: Number(port), path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('edge security', () => {
  it('an untrusted Host header never reaches the card; a trusted one (loopback by default) does', async () => {
    const evil = await getWithHost(cardPath, 'evil.example.com');
    expect(evil.status).toBe(200);
    expect(evil.body).not.toContain('evil.example.com');
    expect(JSON.parse(evil.body).supportedInterfaces[0].url).toMatch(/^http:\/\/localhost:\d+\/a2a\//);
    const { port } = new URL(stack.baseUrl);
    const ok = await getWithHost(cardPath, `127.0.0.1:${port}`);
    expect(JSON.parse(ok.body).supportedInterfaces[0].url).toBe(`http://127.0.0.1:${port}${cardPath.replace('/.well-known/agent-card.json', '')}`);
  });

  it('sends security headers (helmet)', async () => {
    const res = await fetch(`${stack.baseUrl}${cardPath}`);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(res.headers.get('strict-transport-security')).toMatch(/max-age=/);
  });

  it('agent links accept only http(s) URLs', async () => {
    for (const url of ['javascript:alert(1)', 'file:///etc/passwd', 'data:text/html,x']) {
      const res = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'bad-link', name: 'x', description: 'x', documentationUrl: url });
      expect(res.status, url).toBe(422);
      const p = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'bad-provider', name: 'x', description: 'x', provider: { organization: 'o', url } });
      expect(p.status, url).toBe(422);
    }
    const good = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'good-link', name: 'x', description: 'x', iconUrl: 'https://example.com/i.png' });
    expect(good.status).toBe(201);
  });

  it('/docs has a strict CSP (issue #43): scripts only its own files (none inline), no other origin, no framing; the API itself keeps CSP off', async () => {
    const page = await fetch(`${stack.baseUrl}/docs`);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('default-src')).toEqual(["'self'"]);
    expect(directives.get('connect-src')).toEqual(["'self'"]);
    expect(directives.get('object-src')).toEqual(["'none'"]);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    expect(csp).not.toMatch(/unsafe-eval|\*/);
    // what the page needs is allowed: every script it loads is a file of /docs, none is inline
    const html = await page.text();
    const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attrs, body] of scripts) {
      expect(body!.trim(), 'no inline script').toBe('');
      const src = /src=['"]([^'"]+)['"]/.exec(attrs!)?.[1];
      expect(src).toBeDefined();
      const asset = await fetch(new URL(src!, page.url));
      expect(asset.status, src).toBe(200);
      expect(asset.headers.get('content-security-policy')).toBe(csp);
      await asset.arrayBuffer();
    }
    const openapi = await fetch(`${stack.baseUrl}/docs/openapi.json`);
    expect(openapi.headers.get('content-security-policy')).toBe(csp);
    await openapi.arrayBuffer();
    const card = await fetch(`${stack.baseUrl}${cardPath}`);
    expect(card.headers.get('content-security-policy')).toBeNull();
    await card.arrayBuffer();
  });

  it('a client that stops reading a large response cannot hold a stop: its connection is cut API_SHUTDOWN_TIMEOUT_MS after close began', async () => {
    const app = await createApiApp({ ...stack.env, API_SHUTDOWN_TIMEOUT_MS: '300', BOOTSTRAP_ORG_SLUG: undefined as never, BOOTSTRAP_ADMIN_KEY: undefined as never });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    const html = await (await fetch(`http://127.0.0.1:${port}/docs`)).text();
    const srcs = [...html.matchAll(/src=['"]([^'"]+)['"]/g)].map((m) => new URL(m[1]!, `http://127.0.0.1:${port}/docs`).pathname);
    // the largest script of the docs page (the Swagger UI bundle, over a megabyte), asked many times, never read
    const sizes = await Promise.all(srcs.map(async (p) => [p, (await (await fetch(`http://127.0.0.1:${port}${p}`)).arrayBuffer()).byteLength] as const));
    const [big, bytes] = sizes.sort((a, b) => b[1] - a[1])[0]!;
    expect(bytes).toBeGreaterThan(500_000);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.setNoDelay(true);
    socket.write(Array.from({ length: 20 }, () => `GET ${big} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`).join(''));
    socket.pause();
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    try {
      await app.close();
      // bounded by the shutdown timeout (300 ms) plus Nest's own hooks, never by the client
      expect(Date.now() - t0).toBeLessThan(20_000);
    } finally {
      socket.destroy();
    }
  });

  it('/docs can be turned off', async () => {
    expect((await fetch(`${stack.baseUrl}/docs/openapi.json`)).status).toBe(200);
    const app = await createApiApp({ ...stack.env, DOCS_ENABLED: 'false', BOOTSTRAP_ORG_SLUG: undefined as never, BOOTSTRAP_ADMIN_KEY: undefined as never });
    await app.listen(0, '127.0.0.1');
    try {
      const { port } = app.getHttpServer().address() as { port: number };
      expect((await fetch(`http://127.0.0.1:${port}/docs/openapi.json`)).status).toBe(404);
    } finally {
      await app.close();
    }
  });
});

describe('trailing slashes', () => {
  it('the JSON-RPC endpoint and the card also answer under a URL ending in /', async () => {
    const base = new URL(cardPath.replace('/.well-known/agent-card.json', ''), stack.baseUrl).toString();
    const res = await fetch(`${base}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: '00000000-0000-4000-8000-000000000000' } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32001);
    expect((await fetch(`${base}/.well-known/agent-card.json/`)).status).toBe(200);
  });
});

describe('capabilities the deployment does not serve', () => {
  it('a revision declaring push notifications is refused at publish when the deployment keeps no push secrets', async () => {
    const agentRes = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'pusher', name: 'P', description: 'p' });
    expect(agentRes.status).toBe(201);
    const rev = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents/pusher/revisions', {
      protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }], capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false } } },
      runtime: { kind: 'scripted', rules: [] },
    });
    expect(rev.status).toBe(201);
    const pub = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/pusher/revisions/${rev.body.id}/publish`);
    expect(pub.status).toBe(422);
    expect(pub.body.error).toMatchObject({ code: 'revision.unsupported_capability', details: { capabilities: 'pushNotifications' } });
  });
});

/**
 * Issue #43, the HTTP side of row 3: a request whose API key did not authenticate at the edge
 * (anonymous, a JWT, a wrong key) may send at most HTTP_PREAUTH_MAX_BODY_BYTES, refused before the
 * body is read (Content-Length) or as it passes the limit (chunked); a request whose key
 * authenticated keeps REQUEST_BODY_LIMIT_BYTES. Memory and /healthz under a flood of such bodies:
 * test/http-hostile-process.test.ts.
 */
describe('request bodies before authentication', () => {
  const PREAUTH = 64 * 1024;
  let own: Stack;
  let ep: string;
  let key: string;
  beforeAll(async () => {
    own = await startStack({ worker: false, env: { HTTP_PREAUTH_MAX_BODY_BYTES: String(PREAUTH) } });
    const agent = await publishAgent(own.baseUrl, own.adminKey, { slug: 'open-bodies' });
    ep = `${own.baseUrl}${agent.basePath}`;
    key = (await adminRequest(own.baseUrl, own.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] })).body.key;
  });
  afterAll(async () => {
    await own?.close();
  });

  const body = (size: number) =>
    JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SendMessage', params: { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x'.repeat(size) }] }, configuration: { returnImmediately: true } } });
  const post = (payload: string | ReadableStream, headers: Record<string, string> = {}) =>
    fetch(ep, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers }, body: payload, ...(typeof payload === 'string' ? {} : { duplex: 'half' }) } as RequestInit);
  const chunked = (text: string) =>
    new ReadableStream({
      start(c) {
        const bytes = new TextEncoder().encode(text);
        for (let i = 0; i < bytes.length; i += 16 * 1024) c.enqueue(bytes.subarray(i, i + 16 * 1024));
        c.close();
      },
    });

  it('without a valid key: over HTTP_PREAUTH_MAX_BODY_BYTES is 413 in the surface shape (a JSON-RPC error), by Content-Length or chunked; under it is served', async () => {
    const big = await post(body(PREAUTH + 1_000));
    expect(big.status).toBe(413);
    expect(big.headers.get('connection')).toBe('close');
    const rpc = (await big.json()) as { jsonrpc: string; error: { code: number; message: string } };
    expect(rpc).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
    expect(rpc.error.message).toContain('HTTP_PREAUTH_MAX_BODY_BYTES');
    expect((await post(chunked(body(PREAUTH + 1_000)))).status).toBe(413);
    const wrongKey = await post(body(PREAUTH + 1_000), { 'x-api-key': `${key.slice(0, 14)}${'w'.repeat(32)}` });
    expect(wrongKey.status).toBe(413);
    const small = await post(body(1_000));
    expect(small.status).toBe(200);
    expect(((await small.json()) as any).result.task.id).toBeTruthy();
  });

  it('with a key that authenticated: up to REQUEST_BODY_LIMIT_BYTES, by Content-Length or chunked', async () => {
    const keyed = await post(body(PREAUTH * 4), { 'x-api-key': key });
    expect(keyed.status).toBe(200);
    expect(((await keyed.json()) as any).result.task.id).toBeTruthy();
    expect((await post(chunked(body(PREAUTH * 4)), { 'x-api-key': key })).status).toBe(200);
    expect((await post(body(1024 * 1024 + 10), { 'x-api-key': key })).status).toBe(413);
  });
});
