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
/** Open connections per origin (host:port), and in all. Requests beyond them wait for a free one. */
const SOCKETS_PER_ORIGIN = 64;
const SOCKETS_TOTAL = 1024;
/** An idle kept-alive connection is closed after this long (ms). */
const IDLE_SOCKET_MS = 30_000;

/**
 * Posts deliveries over keep-alive connections, under the outbound policy: one pool per origin
 * (node's Agent keys its pools by host and port), at most SOCKETS_PER_ORIGIN connections each
 * and SOCKETS_TOTAL in all, idle ones closed after IDLE_SOCKET_MS. Every new connection goes
 * through the guard: the address actually connected to is checked (a guarded DNS lookup; IP-literal
 * hosts directly, their verdict cached per host); a reused connection was checked when it was made.
 * Redirects are never followed (a 3xx is a failed attempt), and every attempt ends within its
 * timeout. Never throws.
 */
export class OutboundSender {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  /** Verdicts of refusedLiteral by URL host (bounded: cleared when it grows past 10,000). */
  private readonly literals = new Map<string, string | null>();

  constructor(private readonly policy: OutboundPolicy) {
    const lookup = guardedLookup(policy);
    const opts = { keepAlive: true, maxSockets: SOCKETS_PER_ORIGIN, maxTotalSockets: SOCKETS_TOTAL, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const, lookup };
    this.httpAgent = new http.Agent(opts as http.AgentOptions);
    this.httpsAgent = new https.Agent(opts as https.AgentOptions);
  }

  private refused(url: URL): string | null {
    let why = this.literals.get(url.host);
    if (why === undefined) {
      why = refusedLiteral(url, this.policy);
      if (this.literals.size >= 10_000) this.literals.clear();
      this.literals.set(url.host, why);
    }
    return why;
  }

  post(req: OutboundPost): Promise<OutboundResult> {
    const t0 = performance.now();
    const done = (r: Omit<OutboundResult, 'latencyMs'>): OutboundResult => ({ ...r, latencyMs: Math.round(performance.now() - t0) });
    const why = this.refused(req.url);
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
