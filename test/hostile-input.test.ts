import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Bad input gets a clear protocol error in its surface's shape (JSON-RPC, HTTP+JSON, admin) —
 * never a 5xx or -32603 — and nothing is stored.
 */
let stack: Stack;
let ep: string;
const H = { 'content-type': 'application/json', 'a2a-version': '1.0' };
let admin: Record<string, string>;

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { REQUEST_BODY_LIMIT_BYTES: '4096', REQUEST_TIMEOUT_MS: '1500', HEADERS_TIMEOUT_MS: '1500' } });
  const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo', transports: ['JSONRPC', 'HTTP+JSON'] });
  ep = `${stack.baseUrl}${echo.basePath}`;
  admin = { ...H, authorization: `Bearer ${stack.adminKey}` };
});
afterAll(async () => {
  await stack?.close();
});

const rpc = (params: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SendMessage', params });
const msg = (over: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }], ...over });
async function call(url: string, init: RequestInit): Promise<{ status: number; body: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('JSON bodies that cannot be stored', () => {
  it('a NUL character is InvalidParams naming the field (JSON-RPC), 400 (REST), 422 request.invalid (admin)', async () => {
    const j = await call(ep, { method: 'POST', headers: H, body: rpc({ message: msg({ parts: [{ text: 'a\u0000b' }] }) }) });
    expect(j.status).toBe(200);
    expect(j.body.error.code).toBe(-32602);
    expect(j.body.error.message).toContain('params.message.parts.0.text');
    const r = await call(`${ep}/message:send`, { method: 'POST', headers: H, body: JSON.stringify({ message: msg({ messageId: 'x\u0000' }) }) });
    expect(r.status).toBe(400);
    expect(r.body.error.status).toBe('INVALID_ARGUMENT');
    expect(r.body.error.message).toContain('message.messageId');
    const a = await call(`${stack.baseUrl}/v1/agents`, { method: 'POST', headers: admin, body: JSON.stringify({ slug: 'nul', name: 'x\u0000', description: 'd' }) });
    expect(a.status).toBe(422);
    expect(a.body.error.details.issues[0].path).toBe('name');
  });

  it('an unpaired surrogate, and a key with a NUL, are refused the same way', async () => {
    const j = await call(ep, { method: 'POST', headers: H, body: rpc({ message: msg({ parts: [{ text: 'x' }] }) }).replace('"x"', '"\\udc00x"') });
    expect(j.body.error.code).toBe(-32602);
    expect(j.body.error.message).toContain('surrogate');
    const k = await call(ep, { method: 'POST', headers: H, body: rpc({ message: msg({ metadata: { 'k\u0000': 1 } }) }) });
    expect(k.body.error.code).toBe(-32602);
  });

  it('prototype-poisoning keys (__proto__, constructor.prototype, plain or escaped) are refused on every surface and store nothing', async () => {
    const messageId = randomUUID();
    const poisoned = rpc({ message: msg({ messageId, metadata: { x: 1 } }) }).replace('"metadata":{', '"metadata":{"__proto__":{"isAdmin":true},');
    const j = await call(ep, { method: 'POST', headers: H, body: poisoned });
    expect(j.status).toBe(200);
    expect(j.body.error.code).toBe(-32602);
    expect(j.body.error.message).toContain('prototype');
    const escaped = await call(ep, { method: 'POST', headers: H, body: poisoned.replace('"__proto__"', '"\\u005f_proto__"') });
    expect(escaped.body.error.code).toBe(-32602);
    const ctor = await call(`${ep}/message:send`, { method: 'POST', headers: H, body: JSON.stringify({ message: msg({ metadata: { constructor: { prototype: { polluted: true } } } }) }) });
    expect(ctor.status).toBe(400);
    expect(ctor.body.error.status).toBe('INVALID_ARGUMENT');
    const a = await call(`${stack.baseUrl}/v1/agents`, { method: 'POST', headers: admin, body: '{"slug":"proto","name":"n","description":"d","__proto__":{"x":1}}' });
    expect(a.status).toBe(422);
    expect(((({}) as Record<string, unknown>).isAdmin)).toBeUndefined();
    // nothing was stored for the refused message; a "constructor" key without a prototype is plain data
    const get = await call(ep, { method: 'POST', headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'ListTasks', params: {} }) });
    expect(JSON.stringify(get.body)).not.toContain(messageId);
    const plain = await call(ep, { method: 'POST', headers: H, body: rpc({ message: msg({ metadata: { constructor: 'fine', proto: 1 } }), configuration: { returnImmediately: true } }) });
    expect(plain.body.error).toBeUndefined();
  });

  it('JSON nested deeper than 64 levels is refused before any work (JSON-RPC, REST, admin)', async () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const j = await call(ep, { method: 'POST', headers: H, body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"d":${deep(200)}}}}}` });
    expect(j.body.error.code).toBe(-32602);
    expect(j.body.error.message).toContain('deeper than 64');
    const r = await call(`${ep}/message:send`, { method: 'POST', headers: H, body: `{"message":${deep(100)}}` });
    expect(r.status).toBe(400);
    const a = await call(`${stack.baseUrl}/v1/agents`, { method: 'POST', headers: admin, body: `{"slug":${deep(100)}}` });
    expect(a.status).toBe(422);
    // far deeper than V8's parser can follow is still a clean parse error
    const huge = await call(ep, { method: 'POST', headers: H, body: deep(2_000) });
    expect(huge.status).toBeLessThan(500);
  });
});

describe('URLs', () => {
  it('a NUL byte in a path segment or a query value is 400 in each surface', async () => {
    const j = await call(`${stack.baseUrl}/a2a/x%00y/echo`, { method: 'POST', headers: H, body: rpc({ message: msg() }) });
    expect(j.status).toBe(400);
    expect(j.body.error.code).toBe(-32602);
    const r = await call(`${ep}/tasks/abc%00`, { headers: H });
    expect(r.status).toBe(400);
    expect(r.body.error.status).toBe('INVALID_ARGUMENT');
    const q = await call(`${ep}/tasks?contextId=a%00b`, { headers: H });
    expect(q.status).toBe(400);
    const a = await call(`${stack.baseUrl}/v1/agents/a%00b`, { headers: admin });
    expect(a.status).toBe(400);
    expect(a.body.error.code).toBe('request.invalid');
    const a2 = await call(`${stack.baseUrl}/v1/runs?contextId=%00`, { headers: admin });
    expect(a2.status).toBe(400);
  });
});

describe('limits', () => {
  it('a body over the limit is 413 in the surface shape (a JSON-RPC error object on the JSON-RPC endpoint)', async () => {
    const big = 'a'.repeat(8_000);
    const j = await call(ep, { method: 'POST', headers: H, body: rpc({ message: msg({ parts: [{ text: big }] }) }) });
    expect(j.status).toBe(413);
    expect(j.body.jsonrpc).toBe('2.0');
    expect(j.body.error.code).toBe(-32600);
    const r = await call(`${ep}/message:send`, { method: 'POST', headers: H, body: JSON.stringify({ message: msg({ parts: [{ text: big }] }) }) });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe(413);
    const a = await call(`${stack.baseUrl}/v1/agents`, { method: 'POST', headers: admin, body: JSON.stringify({ slug: 'big', name: big, description: 'd' }) });
    expect(a.status).toBe(413);
    expect(a.body.error.code).toBe('request.too_large');
  });

  it('an unsupported Content-Type on the JSON-RPC endpoint is a JSON-RPC error (-32005)', async () => {
    const j = await call(ep, { method: 'POST', headers: { 'content-type': 'text/xml', 'a2a-version': '1.0' }, body: '<x/>' });
    expect(j.status).toBe(415);
    expect(j.body.error.code).toBe(-32005);
  });

  it('a connection that sends headers and then stops (or trickles) its body is closed', async () => {
    const { port } = new URL(stack.baseUrl);
    const closedAfter = (trickle: boolean) =>
      new Promise<number>((resolve, reject) => {
        const t0 = Date.now();
        const sock = connect(Number(port), '127.0.0.1', () => {
          sock.write(`POST ${new URL(ep).pathname} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
          if (trickle) {
            const t = setInterval(() => sock.writable && sock.write(' '), 200);
            sock.once('close', () => clearInterval(t));
          }
        });
        sock.on('data', () => undefined);
        sock.once('close', () => resolve(Date.now() - t0));
        sock.once('error', () => resolve(Date.now() - t0));
        setTimeout(() => reject(new Error('still open after 10 s')), 10_000).unref();
      });
    const [stopped, trickled] = await Promise.all([closedAfter(false), closedAfter(true)]);
    expect(stopped).toBeLessThan(5_000);
    expect(trickled).toBeLessThan(5_000);
  });
});
