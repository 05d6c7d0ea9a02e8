import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createRemoteJWKSet, customFetch, exportJWK, generateKeyPair, SignJWT, jwtVerify } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { outboundFetch } from './outbound-fetch.js';
import { outboundPolicy } from './outbound-guard.js';
import { answerCounter, countedBody, ResponseTooLargeError, sseEventCounter, type BodyCounter } from './response-budget.js';

/** Feed `chunks` to `counter` as a body read to its end: what was let through (each piece), or the error it failed with. */
async function through(counter: BodyCounter, chunks: Buffer[]): Promise<{ out: Buffer[]; error?: unknown }> {
  const out: Buffer[] = [];
  try {
    for await (const piece of countedBody(Readable.from(chunks), counter)) out.push(Buffer.from(piece));
    return { out };
  } catch (error) {
    return { out, error };
  }
}

/** `text` cut into pieces at the given offsets. */
function cut(text: string, at: number[]): Buffer[] {
  const b = Buffer.from(text);
  const points = [0, ...at.filter((n) => n > 0 && n < b.length).sort((x, y) => x - y), b.length];
  return points.slice(1).map((end, i) => b.subarray(points[i], end));
}

describe('sseEventCounter', () => {
  const stream = 'data: {"a":1}\n\n: comment\r\ndata: two\r\ndata: lines\r\n\r\nevent: x\ndata: é✓\n\n';

  it('hands on the bytes unchanged, in whole lines, however the network cut them', async () => {
    for (let i = 0; i < 200; i++) {
      const at = Array.from({ length: 1 + (i % 7) }, () => Math.floor(Math.random() * Buffer.byteLength(stream)));
      const { out, error } = await through(sseEventCounter(64), cut(stream, at));
      expect(error).toBeUndefined();
      expect(Buffer.concat(out).toString()).toBe(stream);
      // every piece ends a line (the stream ends with one)
      for (const piece of out) expect(piece[piece.length - 1]).toBe(0x0a);
    }
  });

  it('refuses an event larger than the budget, counted over its lines until a blank line (LF or CRLF); the events before it are read first', async () => {
    const tooBig = `data: first\n\ndata: ${'x'.repeat(40)}\ndata: ${'y'.repeat(40)}\n\n`;
    const refused: ResponseTooLargeError[] = [];
    const readable = Readable.from(cut(tooBig, [10, 70]));
    const pieces: string[] = [];
    const error = await (async () => {
      for await (const piece of countedBody(readable, sseEventCounter(64), (e) => refused.push(e))) pieces.push(Buffer.from(piece).toString());
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseTooLargeError);
    expect((error as Error).message).toBe('an event of the stream exceeds 64 bytes');
    expect(refused).toEqual([error]);
    // the event before, whole, and the lines of the refused one within the budget: it never ends, so no parser dispatches it
    expect(pieces.join('')).toBe(`data: first\n\ndata: ${'x'.repeat(40)}\n`);
    expect(readable.destroyed).toBe(true);
    // the same bytes as two events (a blank line between, CRLF or LF) pass
    for (const sep of ['\n\n', '\r\n\r\n']) {
      const two = `data: ${'x'.repeat(40)}${sep}data: ${'y'.repeat(40)}${sep}`;
      expect((await through(sseEventCounter(64), cut(two, [1, 47, 48]))).error).toBeUndefined();
    }
  });

  it('a line that never ends is refused once it passes the budget: what it held stays below it', async () => {
    const chunks = Array.from({ length: 100 }, () => Buffer.alloc(1000, 0x78));
    const r = await through(sseEventCounter(10_000), [Buffer.from('data: '), ...chunks]);
    expect(r.error).toBeInstanceOf(ResponseTooLargeError);
    expect(r.out).toEqual([]);
  });

  it('a stream of many small events is not bounded as a whole', async () => {
    const events = Array.from({ length: 5000 }, (_, i) => Buffer.from(`data: {"n":${i}}\n\n`));
    const r = await through(sseEventCounter(64), events);
    expect(r.error).toBeUndefined();
    expect(Buffer.concat(r.out).length).toBe(Buffer.concat(events).length);
  });
});

describe('answerCounter', () => {
  it('lets through up to the budget, fails past it', async () => {
    expect((await through(answerCounter(100), [Buffer.alloc(60), Buffer.alloc(40)])).error).toBeUndefined();
    const r = await through(answerCounter(100), [Buffer.alloc(60), Buffer.alloc(41)]);
    expect((r.error as Error).message).toBe('the answer exceeds 100 bytes');
    expect(Buffer.concat(r.out).length).toBe(60);
  });
});

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A loopback server answering `/length` (Content-Length), `/chunked` and `/events` with `size` bytes; records how each answer ended. */
async function bigServer(size: number) {
  const ended: Record<string, { sent: number; finished: boolean }> = {};
  const srv = http.createServer((req, res) => {
    const path = req.url ?? '';
    const e: { sent: number; finished: boolean } = (ended[path] = { sent: 0, finished: false });
    res.once('close', () => (e.finished = res.writableFinished));
    const events = path === '/events';
    res.writeHead(200, { 'content-type': events ? 'text/event-stream' : 'application/json', ...(path === '/length' && { 'content-length': size }) });
    if (events) res.write('data: small\n\n');
    const chunk = Buffer.alloc(16 * 1024, 0x78);
    const pump = () => {
      while (e.sent < size && !res.destroyed) {
        e.sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end();
    };
    pump();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, ended };
}

describe('outboundFetch within a budget', () => {
  const budget = { maxBodyBytes: 64 * 1024, maxEventBytes: 32 * 1024 };
  const policy = outboundPolicy(['127.0.0.0/8']);

  it('a Content-Length over the budget is refused before the body is read; the connection is closed', async () => {
    const { url, ended } = await bigServer(8 * 1024 * 1024);
    const refused: ResponseTooLargeError[] = [];
    const err = await outboundFetch(policy, {}, { ...budget, onRefused: (e) => refused.push(e) })(`${url}/length`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect((err as ResponseTooLargeError).kind).toBe('answer');
    expect(refused).toEqual([err]);
    await expect.poll(() => ended['/length']?.finished).toBe(false);
    expect(ended['/length']!.sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('a body without Content-Length fails its reader at the budget (text(), json(), the stream)', async () => {
    const { url, ended } = await bigServer(8 * 1024 * 1024);
    const f = outboundFetch(policy, {}, budget);
    const res = await f(`${url}/chunked`);
    expect(res.status).toBe(200);
    await expect(res.json()).rejects.toThrow('the answer exceeds 65536 bytes');
    await expect.poll(() => ended['/chunked']?.finished).toBe(false);
    expect(ended['/chunked']!.sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('an event stream passes small events and fails on one past maxEventBytes', async () => {
    const { url } = await bigServer(1024 * 1024);
    const res = await outboundFetch(policy, {}, budget)(`${url}/events`);
    let text = '';
    const err = await (async () => {
      for await (const piece of res.body!) text += Buffer.from(piece).toString();
    })().catch((e: unknown) => e);
    expect(text).toBe('data: small\n\n');
    expect((err as Error).message).toBe('an event of the stream exceeds 32768 bytes');
  });

  it('an answer within the budget reads as usual', async () => {
    const { url } = await bigServer(32 * 1024);
    const res = await outboundFetch(policy, {}, budget)(`${url}/length`);
    expect((await res.arrayBuffer()).byteLength).toBe(32 * 1024);
  });
});

describe('outboundFetch under a client library that reads the body itself (jose, as the JWT verifier uses it)', () => {
  it('a key set within the default budget verifies; one past it fails the lookup instead of being read whole', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] });
    const srv = http.createServer((req, res) => {
      if (req.url === '/jwks') return void res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
      // /huge: 5 MiB of key set, chunked
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"keys":[],"pad":"');
      const chunk = Buffer.alloc(64 * 1024, 0x78);
      let left = 80;
      const pump = () => {
        while (left > 0 && !res.destroyed) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end('"}');
      };
      pump();
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    servers.push(srv);
    const base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    const fetchImpl = outboundFetch(outboundPolicy(['127.0.0.0/8']));
    const token = await new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuedAt().setExpirationTime('1m').sign(privateKey);
    const ok = await jwtVerify(token, createRemoteJWKSet(new URL(`${base}/jwks`), { [customFetch]: fetchImpl }));
    expect(ok.payload.sub).toBe('x');
    const huge = await jwtVerify(token, createRemoteJWKSet(new URL(`${base}/huge`), { [customFetch]: fetchImpl })).catch((e: unknown) => e);
    expect(huge).toBeInstanceOf(Error);
    expect(String((huge as Error).message) + String((huge as { cause?: Error }).cause?.message ?? '')).toMatch(/exceeds 4194304 bytes/);
  });
});
