import http from 'node:http';
import https from 'node:https';
import { guardedLookup, refusedLiteral, type OutboundPolicy } from './outbound-guard.js';

/** One POST of a delivery: the URL (checked again here), the JSON body and the headers. */
export interface OutboundPost {
  url: URL;
  body: string;
  headers: Record<string, string>;
  /** Whole attempt: connect, send, response headers and body (ms). */
  timeoutMs: number;
}

/** What one attempt came to. `status` null: no HTTP response (refused, network error, timeout). */
export interface OutboundResult {
  status: number | null;
  /** From a `Retry-After` header (seconds or an HTTP date), in ms from now. */
  retryAfterMs?: number;
  error?: string;
  latencyMs: number;
}

/** Response bodies are read (to reuse the connection) up to this many bytes, then dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * Posts deliveries over keep-alive connections, under the outbound policy: the address actually
 * connected to is checked (a guarded DNS lookup; IP-literal hosts directly), redirects are never
 * followed (a 3xx is a failed attempt), and every attempt ends within its timeout. Never throws.
 */
export class OutboundSender {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 256 });
  private readonly lookup;

  constructor(private readonly policy: OutboundPolicy) {
    this.lookup = guardedLookup(policy);
  }

  post(req: OutboundPost): Promise<OutboundResult> {
    const t0 = performance.now();
    const done = (r: Omit<OutboundResult, 'latencyMs'>): OutboundResult => ({ ...r, latencyMs: Math.round(performance.now() - t0) });
    const why = refusedLiteral(req.url, this.policy);
    if (why) return Promise.resolve(done({ status: null, error: `refused: ${why}` }));
    const isHttps = req.url.protocol === 'https:';
    return new Promise<OutboundResult>((resolve) => {
      let settled = false;
      const finish = (r: Omit<OutboundResult, 'latencyMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(done(r));
      };
      const request = (isHttps ? https : http).request(
        req.url,
        {
          method: 'POST',
          agent: isHttps ? this.httpsAgent : this.httpAgent,
          lookup: this.lookup,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(req.body), 'user-agent': 'aaas-push/1', ...req.headers },
        },
        (res) => {
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_RESPONSE_BYTES) res.destroy();
          });
          const status = res.statusCode ?? 0;
          const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
          const end = () =>
            finish({
              status,
              ...(retryAfterMs !== undefined && { retryAfterMs }),
              ...(status >= 300 && status < 400 && { error: `redirect (${status}) not followed` }),
            });
          res.on('end', end);
          res.on('close', end);
          res.on('error', end);
        },
      );
      const timer = setTimeout(() => {
        request.destroy(new Error(`timed out after ${req.timeoutMs} ms`));
      }, req.timeoutMs);
      request.on('error', (e: NodeJS.ErrnoException) => finish({ status: null, error: e.message.startsWith('refused') ? e.message : `${e.code ?? 'error'}: ${e.message}` }));
      request.end(req.body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date → ms from now (≥ 0). */
export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
