import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { guardedLookup, refusedLiteral, type OutboundPolicy } from './outbound-guard.js';

/**
 * Connections are kept alive and reused per policy (every new connection goes through the guard).
 *
 * A WHATWG `fetch` for clients that take one (e.g. the `@a2a-js/sdk` client), under the outbound
 * policy: the address connected to is checked (IP literals directly), redirects are not followed
 * (a 3xx is returned as is), `extraHeaders` are added to every request (credentials), and the
 * response body streams (SSE works). `signal` aborts at any point. A request reset on a reused
 * keep-alive connection before any answer (the server closed it while idle) is sent once more on
 * a new connection. Rejects with a TypeError-like network error (`refused: …` for a forbidden
 * address), as fetch does.
 */
export function outboundFetch(policy: OutboundPolicy, extraHeaders: Record<string, string> = {}): typeof fetch {
  const agents = keepAliveAgents(policy);
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const request = input instanceof Request ? input : undefined;
    const url = new URL(request ? request.url : String(input));
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`refused: the scheme ${url.protocol} is not allowed`);
    const why = refusedLiteral(url, policy);
    if (why) throw new TypeError(`refused: ${why}`);
    const headers = new Headers(request?.headers);
    new Headers(init.headers).forEach((v, k) => headers.set(k, v));
    for (const [k, v] of Object.entries(extraHeaders)) headers.set(k, v);
    const method = (init.method ?? request?.method ?? 'GET').toUpperCase();
    let body: Buffer | undefined;
    const raw = init.body ?? (request && method !== 'GET' && method !== 'HEAD' ? await request.arrayBuffer() : undefined);
    if (typeof raw === 'string') body = Buffer.from(raw);
    else if (raw instanceof ArrayBuffer || ArrayBuffer.isView(raw)) body = Buffer.from(raw as ArrayBuffer);
    else if (raw != null) throw new TypeError('outboundFetch: unsupported body type');
    if (body) headers.set('content-length', String(body.length));
    const signal = init.signal ?? request?.signal ?? undefined;
    const plain: Record<string, string> = {};
    headers.forEach((v, k) => (plain[k] = v));
    return new Promise<Response>((resolve, reject) => {
      const isHttps = url.protocol === 'https:';
      const start = (again: boolean): void => {
        const req = (isHttps ? https : http).request(url, { method, headers: plain, agent: isHttps ? agents.https : agents.http, signal: signal ?? undefined });
        let answered = false;
        req.once('response', (res) => {
          answered = true;
          // aborted while the body streams: the body fails with the signal's reason (a timeout stays
          // a TimeoutError), as fetch's does, not with the socket's ECONNRESET
          if (signal) {
            const onAbort = () => res.destroy(signal.reason instanceof Error ? signal.reason : Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }));
            signal.addEventListener('abort', onAbort, { once: true });
            res.once('close', () => signal.removeEventListener('abort', onAbort));
          }
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) v.forEach((x) => out.append(k, x));
            else if (v !== undefined) out.set(k, v);
          }
          const status = res.statusCode ?? 0;
          const nullBody = method === 'HEAD' || status === 204 || status === 304;
          if (nullBody) res.resume();
          resolve(new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage, headers: out }));
        });
        req.once('error', (e) => {
          // a kept-alive connection reset as it was reused, before any answer: the server closed it
          // while idle as this request went out (Node's `request.reusedSocket` race; Node 20's agent
          // keeps no idle timeout of its own). Sent once more, on a new connection.
          if (!again && !answered && req.reusedSocket && (e as NodeJS.ErrnoException).code === 'ECONNRESET' && !signal?.aborted) return start(true);
          reject(Object.assign(new TypeError(e.message), { cause: e }));
        });
        req.end(body);
      };
      start(false);
    });
  }) as typeof fetch;
}

/** One pair of keep-alive agents per policy; their connections are made through the guarded lookup. */
const AGENTS = new WeakMap<OutboundPolicy, { http: http.Agent; https: https.Agent }>();
function keepAliveAgents(policy: OutboundPolicy): { http: http.Agent; https: https.Agent } {
  let agents = AGENTS.get(policy);
  if (!agents) {
    const lookup = guardedLookup(policy);
    agents = { http: new http.Agent({ keepAlive: true, maxSockets: 256, lookup } as http.AgentOptions), https: new https.Agent({ keepAlive: true, maxSockets: 256, lookup } as https.AgentOptions) };
    AGENTS.set(policy, agents);
  }
  return agents;
}
