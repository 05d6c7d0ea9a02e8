import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { outboundFetch } from './outbound-fetch.js';
import { outboundPolicy } from './outbound-guard.js';

/**
 * A loopback HTTP server that answers each request with its body, except the requests
 * `reset(connection, nth)` picks: those it resets (TCP RST) unanswered. Records what it saw.
 */
async function server(reset: (connection: number, nth: number) => boolean) {
  const seen: Array<{ connection: number; nth: number; body: string }> = [];
  const ids = new WeakMap<Socket, { connection: number; n: number }>();
  let connections = 0;
  const srv = http.createServer((req, res) => {
    let c = ids.get(req.socket);
    if (!c) ids.set(req.socket, (c = { connection: ++connections, n: 0 }));
    const nth = ++c.n;
    const chunks: Buffer[] = [];
    req.on('data', (b: Buffer) => chunks.push(b));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      seen.push({ connection: c.connection, nth, body });
      if (reset(c.connection, nth)) req.socket.resetAndDestroy();
      else res.end(`echo ${body}`);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/`, seen };
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('outboundFetch and kept-alive connections', () => {
  it('a request reset on a reused connection before any answer is sent once more on a new one', async () => {
    // the second request on the first connection finds it reset, as when the server closed it idle
    const { url, seen } = await server((connection, nth) => connection === 1 && nth === 2);
    const f = outboundFetch(outboundPolicy(['127.0.0.0/8']));
    expect(await (await f(url, { method: 'POST', body: 'one' })).text()).toBe('echo one');
    const second = await f(url, { method: 'POST', body: 'two' });
    expect(second.status).toBe(200);
    expect(await second.text()).toBe('echo two');
    expect(seen).toEqual([
      { connection: 1, nth: 1, body: 'one' },
      { connection: 1, nth: 2, body: 'two' },
      { connection: 2, nth: 1, body: 'two' },
    ]);
  });

  it('a reset on a new connection is not retried: the caller gets the network error', async () => {
    const { url, seen } = await server(() => true);
    const f = outboundFetch(outboundPolicy(['127.0.0.0/8']));
    const err = await f(url, { method: 'POST', body: 'once' }).then(
      () => null,
      (e: unknown) => e as TypeError & { cause?: NodeJS.ErrnoException },
    );
    expect(err).toBeInstanceOf(TypeError);
    expect(err?.cause?.code).toBe('ECONNRESET');
    expect(seen).toEqual([{ connection: 1, nth: 1, body: 'once' }]);
  });

  it('a reused connection reset twice is retried once only', async () => {
    // the second request on connection 1 is reset, and so is the first on any later connection (the retry's)
    const { url, seen } = await server((connection, nth) => (connection === 1 ? nth === 2 : true));
    const f = outboundFetch(outboundPolicy(['127.0.0.0/8']));
    await (await f(url, { method: 'POST', body: 'one' })).text();
    await expect(f(url, { method: 'POST', body: 'two' })).rejects.toBeInstanceOf(TypeError);
    expect(seen.map((s) => [s.connection, s.nth, s.body])).toEqual([
      [1, 1, 'one'],
      [1, 2, 'two'],
      [2, 1, 'two'],
    ]);
  });
});
