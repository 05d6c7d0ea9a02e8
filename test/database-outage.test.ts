import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { TEST_DATABASE_URL } from './support/env.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * PostgreSQL going away under a running API and worker, through a TCP proxy the test controls:
 * refused (down), silent at connect (a black hole), or silent on connections already open (a
 * stalled network). Every request answers within the configured bounds with 503 and Retry-After
 * in its surface's shape, never 500 and never a hang; once the database is back everything works,
 * and a SendMessage retried with the same messageId has exactly one effect.
 */
type Mode = 'pass' | 'refuse' | 'blackhole' | 'stall';

class PgProxy {
  mode: Mode = 'pass';
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => {
    client.on('error', () => undefined);
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    if (this.mode === 'refuse') return void client.destroy();
    if (this.mode !== 'pass') return; // accepted, never answered
    const upstream = net.connect(5432, '127.0.0.1');
    upstream.on('error', () => client.destroy());
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    // forward while passing; in stall mode bytes are swallowed both ways
    client.on('data', (d) => this.mode === 'pass' && upstream.write(d));
    upstream.on('data', (d) => this.mode === 'pass' && client.write(d));
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** Switch mode; `cut` also drops every open connection (what a restarted server does). */
  set(mode: Mode, cut: boolean): void {
    this.mode = mode;
    if (cut) for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.set('refuse', true);
    await new Promise((r) => this.server.close(r));
  }
}

const RUNTIME = { kind: 'scripted', rules: [{ match: { text: '.*' }, steps: [{ type: 'message', text: 'ok' }, { type: 'status', status: 'completed' }] }] };

let proxy: PgProxy;
let stack: Stack;
let agent: PublishedAgent;
let base: string;

beforeAll(async () => {
  proxy = new PgProxy();
  await proxy.start();
  const url = new URL(TEST_DATABASE_URL);
  url.host = `127.0.0.1:${proxy.port}`;
  stack = await startStack({ env: { DATABASE_URL: url.toString(), DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_STATEMENT_TIMEOUT_MS: '1000' } });
  // both bindings: each surface's 503 is about the database, not about a transport the agent does not serve
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'outage', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
  base = `${stack.baseUrl}${agent.basePath}`;
});

afterAll(async () => {
  proxy?.set('pass', true);
  await stack?.close();
  await proxy?.close();
});

function send(messageId: string, text: string): Promise<Response> {
  return fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId, role: 'ROLE_USER', parts: [{ text }] } } }),
  });
}

/** Every surface answers 503 + Retry-After within `withinMs`, in its own error shape. */
async function expectUnavailable(withinMs: number): Promise<void> {
  const t0 = Date.now();
  const rpc = await send(randomUUID(), 'during the outage');
  expect(rpc.status).toBe(503);
  expect(rpc.headers.get('retry-after')).toBe('2');
  const rpcBody = (await rpc.json()) as any;
  expect(rpcBody.error).toMatchObject({ code: -32603, message: expect.stringContaining('temporarily unavailable') });

  const rest = await fetch(`${base}/tasks/${randomUUID()}`, { headers: { 'a2a-version': '1.0' } });
  expect(rest.status).toBe(503);
  expect(rest.headers.get('retry-after')).toBe('2');
  expect(((await rest.json()) as any).error).toMatchObject({ code: 503, status: 'UNAVAILABLE' });

  const admin = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', '/v1/agents');
  expect(admin.status).toBe(503);
  expect(admin.headers.get('retry-after')).toBe('2');
  expect(admin.body.error).toMatchObject({ code: 'service.unavailable', message: expect.stringContaining('temporarily unavailable') });
  expect(Date.now() - t0).toBeLessThan(withinMs);
}

async function expectServing(): Promise<void> {
  // the pool replaces its dead connections: the first requests after recovery may still meet one
  for (let i = 0; i < 20; i++) {
    const res = await send(randomUUID(), 'back');
    if (res.status === 200) {
      expect(((await res.json()) as any).result).toBeDefined();
      return;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error('the service did not recover');
}

describe('PostgreSQL unavailable', () => {
  it('refused: 503 with Retry-After on JSON-RPC, HTTP+JSON and the admin API, at once; then recovers', async () => {
    proxy.set('refuse', true);
    await expectUnavailable(3_000);
    proxy.set('pass', false);
    await expectServing();
  });

  it('silent at connect: bounded by DATABASE_CONNECT_TIMEOUT_MS instead of hanging', async () => {
    proxy.set('blackhole', true);
    // three surfaces, each at most one connect timeout (1 s) plus its cached-agent path
    await expectUnavailable(8_000);
    proxy.set('pass', true);
    await expectServing();
  });

  it('silent on open connections: bounded by the statement timeout and its client-side backstop', async () => {
    // warm the pool, then stall every connection it holds
    await expectServing();
    proxy.set('stall', false);
    const t0 = Date.now();
    const res = await send(randomUUID(), 'stalled');
    expect(res.status).toBe(503);
    // DATABASE_STATEMENT_TIMEOUT_MS (1 s) + 5 s backstop, plus a new connection's connect timeout
    expect(Date.now() - t0).toBeLessThan(10_000);
    proxy.set('pass', true);
    await expectServing();
  }, 30_000);

  it('a SendMessage refused during the outage and retried with its messageId afterwards has exactly one effect', async () => {
    const messageId = randomUUID();
    proxy.set('refuse', true);
    expect((await send(messageId, 'retried')).status).toBe(503);
    proxy.set('pass', false);
    await expectServing();
    const first = (await (await send(messageId, 'retried')).json()) as any;
    const again = (await (await send(messageId, 'retried')).json()) as any;
    expect(first.result?.task?.id, JSON.stringify(first)).toEqual(expect.any(String));
    expect(again.result.task.id).toBe(first.result.task.id);
    // one run holds the message: the refused attempt left nothing behind
    const runs = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs?agentId=${agent.agentId}&limit=100`);
    const withMessage = [];
    for (const r of runs.body.runs as Array<{ id: string }>) {
      const run = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${r.id}`);
      if (JSON.stringify(run.body).includes(messageId)) withMessage.push(r.id);
    }
    expect(withMessage).toEqual([first.result.task.id]);
  });
});
