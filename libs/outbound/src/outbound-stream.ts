import http from 'node:http';
import https from 'node:https';
import { guardedLookup, refusedLiteral, type OutboundPolicy } from './outbound-guard.js';

/** A response being received: status, headers and the body as it arrives. */
export interface OutboundStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: AsyncIterable<Buffer>;
}

/**
 * POST `body` to `url` under the outbound policy (the connected address is checked; IP literals
 * directly) and resolve once the response headers arrive; the body then streams. Redirects are
 * not followed (a 3xx is returned as is). `signal` aborts the request at any point; the whole
 * exchange must end within `timeoutMs`. Rejects with the network error (`refused: …` for a
 * forbidden address).
 */
export function openOutboundStream(
  url: URL,
  body: string,
  headers: Record<string, string>,
  opts: { policy: OutboundPolicy; timeoutMs: number; signal?: AbortSignal },
): Promise<OutboundStream> {
  const why = refusedLiteral(url, opts.policy);
  if (why) return Promise.reject(new Error(`refused: ${why}`));
  const isHttps = url.protocol === 'https:';
  return new Promise<OutboundStream>((resolve, reject) => {
    const req = (isHttps ? https : http).request(url, {
      method: 'POST',
      lookup: guardedLookup(opts.policy),
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': 'aaas-runtime/1', ...headers },
      signal: opts.signal,
    });
    const timer = setTimeout(() => req.destroy(new Error(`timed out after ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.once('response', (res) => {
      res.once('close', () => clearTimeout(timer));
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
    });
    req.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.end(body);
  });
}
