import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ReadYourWrites } from './read-your-writes.js';
import { Metrics } from '#libs/metrics';

/** One Server-Sent Events frame. `id` is the run's sequence, so `Last-Event-ID` resumes. */
export interface SseFrame {
  id?: number | string;
  event?: string;
  data: string;
}

/**
 * An open `text/event-stream` response (WHATWG HTML §9.2). Writes respect backpressure: `send`
 * resolves once the socket has drained, so a slow client slows its own producer instead of
 * growing a buffer. `signal` aborts when the client goes away.
 */
export class SseStream {
  private readonly ac = new AbortController();
  private ended = false;

  /**
   * `ready`: resolves once the request's writes are remembered for read-your-writes (a hijacked
   * response has no onSend hook); the first frame waits for it.
   */
  constructor(private readonly reply: FastifyReply, private readonly heartbeat: SseHeartbeat, extraHeaders: Record<string, string> = {}, private ready?: Promise<void>) {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...extraHeaders,
    });
    raw.flushHeaders?.();
    // the response's 'close' fires when the client disconnects (or the response ended)
    const gone = () => this.abort();
    raw.once('close', gone);
    raw.once('error', gone);
    heartbeat.add(this);
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  get open(): boolean {
    return !this.ended && !this.ac.signal.aborted;
  }

  /** Write one event; resolves when the socket accepted it (or the client is gone). */
  async send(frame: SseFrame): Promise<void> {
    if (this.ready) {
      await this.ready;
      this.ready = undefined;
    }
    if (!this.open) return;
    let text = '';
    if (frame.id !== undefined) text += `id: ${frame.id}\n`;
    if (frame.event) text += `event: ${frame.event}\n`;
    // JSON (every A2A frame) has no raw line break: one data line
    if (!frame.data.includes('\n')) text += `data: ${frame.data}\n`;
    else for (const line of frame.data.split('\n')) text += `data: ${line}\n`;
    await this.write(`${text}\n`);
  }

  /** A comment line: keeps proxies and clients from timing out an idle stream. */
  ping(): void {
    if (this.open && this.reply.raw.writableLength === 0) this.reply.raw.write(': keep-alive\n\n');
  }

  /** Abort when `ac` should follow this stream's lifetime (e.g. a producer's signal). */
  link(ac: AbortController): void {
    if (this.ac.signal.aborted) ac.abort();
    else this.ac.signal.addEventListener('abort', () => ac.abort(), { once: true });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.heartbeat.delete(this);
    this.reply.raw.end();
  }

  private abort(): void {
    this.heartbeat.delete(this);
    this.ac.abort();
  }

  private write(text: string): Promise<void> {
    const raw = this.reply.raw;
    if (raw.write(text)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        raw.off('drain', done);
        this.ac.signal.removeEventListener('abort', done);
        resolve();
      };
      raw.once('drain', done);
      this.ac.signal.addEventListener('abort', done, { once: true });
    });
  }
}

/**
 * One timer for every open stream of the process (no timer per connection), writing a comment
 * every SSE_HEARTBEAT_MS to each idle stream. On shutdown it ends every open stream, so the HTTP
 * server can close; clients resume on another instance with their last event id.
 */
@Injectable()
export class SseHeartbeat implements OnModuleDestroy {
  private readonly streams = new Set<SseStream>();
  private readonly timer: NodeJS.Timeout;
  private readonly perCaller = new Map<string, number>();
  private readonly maxPerCaller: number;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly metrics: Metrics,
    private readonly readYourWrites: ReadYourWrites,
  ) {
    this.maxPerCaller = config.MAX_STREAMS_PER_CALLER;
    this.timer = setInterval(() => {
      for (const s of this.streams) s.ping();
    }, config.SSE_HEARTBEAT_MS);
    this.timer.unref();
  }

  add(s: SseStream): void {
    this.streams.add(s);
    this.metrics.openStreams.set(this.streams.size);
  }

  delete(s: SseStream): void {
    this.streams.delete(s);
    this.metrics.openStreams.set(this.streams.size);
  }

  get size(): number {
    return this.streams.size;
  }

  /**
   * Reserve one of the MAX_STREAMS_PER_CALLER concurrent streams of `caller` (an API key prefix
   * or a client address) in this process; null when it has them all. Call the returned function
   * when the stream ends.
   */
  reserve(caller: string): (() => void) | null {
    const n = this.perCaller.get(caller) ?? 0;
    if (this.maxPerCaller > 0 && n >= this.maxPerCaller) return null;
    this.perCaller.set(caller, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.perCaller.get(caller) ?? 1) - 1;
      if (left <= 0) this.perCaller.delete(caller);
      else this.perCaller.set(caller, left);
    };
  }

  /**
   * THE pump of the A2A streams (JSON-RPC and HTTP+JSON, v1.0 and v0.3): open `reply` as SSE and
   * send `iterator`'s items, one event each — `id:` = the item's run sequence (so `Last-Event-ID`
   * resumes), `data:` = `format.data(item)` — each write waiting for the socket to drain
   * (back-pressure), with the process's keep-alive comments while idle. `first`: an item the edge
   * already took (to answer an error before the first event in its ordinary shape). An error after
   * that is one `event: error` whose data is `format.error(e)`. When the client goes away, `ac` is
   * aborted (which stops the producer); at the end the iterator is returned and the response ended.
   */
  async pump<T extends { sequence: number }>(
    reply: FastifyReply,
    iterator: AsyncIterator<T>,
    ac: AbortController,
    format: { data(item: T): string; error(e: unknown): string },
    first?: IteratorResult<T>,
  ): Promise<void> {
    const sse = this.open(reply);
    sse.link(ac);
    try {
      let next = first ?? (await iterator.next());
      while (!next.done && sse.open) {
        await sse.send({ id: next.value.sequence, data: format.data(next.value) });
        if (!sse.open) break;
        next = await iterator.next();
      }
    } catch (e) {
      await sse.send({ event: 'error', data: format.error(e) });
    } finally {
      ac.abort();
      await iterator.return?.().catch(() => undefined);
      sse.end();
    }
  }

  /** Open a stream on `reply` (status 200, `text/event-stream`). */
  open(reply: FastifyReply, headers?: Record<string, string>): SseStream {
    return new SseStream(reply, this, headers, this.readYourWrites.remember());
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
    for (const s of [...this.streams]) s.end();
  }
}
