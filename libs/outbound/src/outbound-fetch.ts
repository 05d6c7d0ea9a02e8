import http from 'node:http';
import https from 'node:https';
import { guardedLookup, refusedLiteral, type OutboundPolicy } from './outbound-guard.js';
import { answerCounter, countedBody, DEFAULT_RESPONSE_BUDGET, isEventStream, ResponseTooLargeError, sseEventCounter, type ResponseBudget } from './response-budget.js';

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
 *
 * Every answer is read within `budget` (default DEFAULT_RESPONSE_BUDGET, 4 MiB): a body that is
 * not `text/event-stream` whose Content-Length exceeds `maxBodyBytes` is refused before a byte of
 * it is read (the fetch rejects with ResponseTooLargeError, the connection is closed), and any other
 * fails its reader with ResponseTooLargeError once `maxBodyBytes` arrived; an event stream fails
 * once one event passes `maxEventBytes` (after the events before it were read), and is handed on
 * in whole lines (see sseEventCounter). In each case the connection is closed, so what a refused
 * answer costs stays near its budget. The body is read only as its reader asks.
 */
export function outboundFetch(policy: OutboundPolicy, extraHeaders: Record<string, string> = {}, budget: ResponseBudget = DEFAULT_RESPONSE_BUDGET): typeof fetch {
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
          const init = { status, statusText: res.statusMessage, headers: out };
          if (method === 'HEAD' || status === 204 || status === 304) {
            res.resume();
            return resolve(new Response(null, init));
          }
          const stream = isEventStream(res.headers['content-type']);
          const declared = Number(res.headers['content-length']);
          if (!stream && declared > budget.maxBodyBytes) {
            const refusal = new ResponseTooLargeError('answer', budget.maxBodyBytes);
            budget.onRefused?.(refusal);
            res.destroy();
            return reject(refusal);
          }
          const counter = stream ? sseEventCounter(budget.maxEventBytes) : answerCounter(budget.maxBodyBytes);
          resolve(new Response(countedBody(res, counter, budget.onRefused), init));
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
