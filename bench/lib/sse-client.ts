import http from 'node:http';
import { nowMs } from './stats.js';

/**
 * A low-overhead Server-Sent Events client for load tests: one `node:http` request (POST or GET)
 * on a caller-supplied keep-alive agent, its `text/event-stream` body parsed incrementally
 * (WHATWG SSE line rules: `id:`, `event:`, `data:` fields, `:` comment lines, blank line ends a
 * frame). No fetch / web streams, no per-frame JSON parsing: the caller gets the raw `data`.
 *
 * Timestamps: every frame of one socket read gets the same receive time, taken once when the
 * chunk reached this process (`nowMs()`), before any parsing.
 */
export interface SseClientOptions {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  agent: http.Agent;
  /** Called for every complete frame that has data. */
  onFrame(frame: { id: string | undefined; event: string | undefined; data: string }, receivedAt: number, client: SseClient): void;
  /** Called for every comment line (e.g. `: keep-alive`). */
  onComment?(client: SseClient): void;
  /** Called once when the stream ends for any reason (server end, error, close()). */
  onClose?(client: SseClient): void;
}

export class SseClient {
  /** HTTP status of the response (0 before it arrives). */
  status = 0;
  frames = 0;
  comments = 0;
  /** True from the response headers (200, text/event-stream) until the stream ends. */
  open = false;
  /** Why the stream ended: 'server-end' | 'closed' | an error message. Null while alive. */
  endReason: string | null = null;
  private req: http.ClientRequest | null = null;
  private buf = '';
  private id: string | undefined;
  private event: string | undefined;
  private data: string[] = [];
  private closing = false;

  constructor(private readonly opts: SseClientOptions) {}

  /**
   * Sends the request; resolves when the response headers arrived with 200 and an event stream,
   * rejects otherwise (the non-stream body, up to 500 chars, is in the error) or after `timeoutMs`.
   */
  start(timeoutMs = 30_000): Promise<void> {
    const u = new URL(this.opts.url);
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => {
        settle(new Error(`SSE ${u.pathname}: no response headers within ${timeoutMs} ms`));
        this.close();
      }, timeoutMs);
      const headers: Record<string, string> = { accept: 'text/event-stream', ...this.opts.headers };
      if (this.opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(this.opts.body));
      const req = http.request(
        { host: u.hostname, port: u.port, path: u.pathname + u.search, method: this.opts.method ?? 'POST', headers, agent: this.opts.agent },
        (res) => {
          this.status = res.statusCode ?? 0;
          const type = String(res.headers['content-type'] ?? '');
          res.setEncoding('utf8');
          if (this.status !== 200 || !type.startsWith('text/event-stream')) {
            let text = '';
            res.on('data', (c: string) => (text += c));
            res.on('end', () => {
              settle(new Error(`SSE ${u.pathname}: HTTP ${this.status} ${type}: ${text.slice(0, 500)}`));
              this.finish(`HTTP ${this.status}`);
            });
            return;
          }
          this.open = true;
          settle();
          res.on('data', (chunk: string) => this.feed(chunk, nowMs()));
          res.on('end', () => this.finish('server-end'));
          res.on('error', (e) => this.finish(e.message));
          res.on('close', () => this.finish(this.closing ? 'closed' : 'server-end'));
        },
      );
      req.on('error', (e) => {
        settle(e);
        this.finish(this.closing ? 'closed' : e.message);
      });
      this.req = req;
      req.end(this.opts.body);
    });
  }

  /** Drops the connection (the server sees the client go away). Idempotent. */
  close(): void {
    this.closing = true;
    this.req?.destroy();
    this.finish('closed');
  }

  private finish(reason: string): void {
    if (this.endReason !== null) return;
    this.endReason = reason;
    this.open = false;
    this.opts.onClose?.(this);
  }

  private feed(chunk: string, receivedAt: number): void {
    this.buf = this.buf.length === 0 ? chunk : this.buf + chunk;
    let start = 0;
    let nl: number;
    while ((nl = this.buf.indexOf('\n', start)) >= 0) {
      let end = nl;
      if (end > start && this.buf.charCodeAt(end - 1) === 13) end -= 1; // CRLF
      this.line(this.buf.slice(start, end), receivedAt);
      start = nl + 1;
    }
    this.buf = start === 0 ? this.buf : this.buf.slice(start);
  }

  private line(line: string, receivedAt: number): void {
    if (line.length === 0) {
      if (this.data.length > 0) {
        this.frames += 1;
        const frame = { id: this.id, event: this.event, data: this.data.length === 1 ? this.data[0]! : this.data.join('\n') };
        this.id = undefined;
        this.event = undefined;
        this.data = [];
        this.opts.onFrame(frame, receivedAt, this);
      } else {
        this.id = undefined;
        this.event = undefined;
      }
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' */) {
      this.comments += 1;
      this.opts.onComment?.(this);
      return;
    }
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
    else if (field === 'event') this.event = value;
  }
}

/** Runs `tasks` with at most `concurrency` in flight; rejects on the first failure. */
export async function inBatches<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      out[i] = await task(i);
    }
  });
  await Promise.all(lanes);
  return out;
}
