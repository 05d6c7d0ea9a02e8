import { randomUUID } from 'node:crypto';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { StreamRecord } from './judge.js';

/**
 * Stream clients of the `parking-streams` scenario: raw JSON-RPC v1.0 over SSE (`A2A-Version: 1.0`;
 * the official SDK client does not resume with Last-Event-ID). Each client opens
 * SendStreamingMessage, follows its task, cuts the connection at a random frame now and then and
 * resumes with SubscribeToTask + `Last-Event-ID` (the last `id:` it saw), until the frame that ends
 * the stream; then it starts its next task, until the load ends. An opening request that failed
 * before the snapshot is sent again with the same messageId (the same task comes back). Every
 * frame's `id:` after the snapshot is recorded (StreamRecord) for the judge.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TERMINAL_STATES = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED', 'TASK_STATE_INPUT_REQUIRED']);

export interface StreamLoadOptions {
  /** `http://127.0.0.1:port/a2a/<org>/<agent>` */
  url: string;
  clients: number;
  /** The text of a task's message (`n=… d=…` for the http backend), given the client and its task number. */
  text: (client: number, k: number) => string;
  /** Chance that a connection is cut at a random frame (0..1). */
  cutChance: number;
  random: () => number;
  /** A task followed longer than this gives up (ms). */
  taskDeadlineMs: number;
  /** ms since the load started, for the log lines. */
  log?: (line: string) => void;
}

export class StreamLoad {
  readonly records: StreamRecord[] = [];
  stopping = false;
  /** Connections cut on purpose, then resumed. */
  cuts = 0;
  /** Connections that broke (errors, server ends before the final frame), then resumed or retried. */
  breaks = 0;

  constructor(private readonly o: StreamLoadOptions) {}

  /** Run every client until `stopping` (each finishes the task it follows). */
  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.o.clients }, (_, c) => this.client(c)));
  }

  private async client(c: number): Promise<void> {
    // spread the first requests over a second: 100 clients at one instant measure the accept path
    await sleep(this.o.random() * 1_000);
    for (let k = 0; !this.stopping; k++) await this.follow(c, k);
  }

  /** One task, from its opening request to the frame that ends its stream. */
  private async follow(c: number, k: number): Promise<void> {
    const rec: StreamRecord = { client: c, messageId: randomUUID(), taskId: null, snapshot: null, seen: [], final: false, connections: 0 };
    this.records.push(rec);
    const text = this.o.text(c, k);
    const deadline = Date.now() + this.o.taskDeadlineMs;
    let failures = 0;
    while (!rec.final && Date.now() < deadline) {
      const cutAfter = this.o.random() < this.o.cutChance ? 1 + Math.floor(this.o.random() * 40) : Infinity;
      rec.connections++;
      const end = await this.segment(rec, text, cutAfter, deadline);
      if (end === 'final') return;
      if (end === 'terminal-task') {
        // resuming after the last event of a finished task: nothing was left to deliver
        rec.final = true;
        return;
      }
      if (end === 'cut') {
        this.cuts++;
        failures = 0;
        continue;
      }
      this.breaks++;
      failures++;
      await sleep(Math.min(2_000, 100 * 2 ** Math.min(failures, 5)) * (0.5 + this.o.random()));
    }
    if (!rec.final) rec.error = `gave up after ${this.o.taskDeadlineMs / 1000} s: ${rec.error ?? ''}`;
  }

  /** One connection: returns how it ended. */
  private async segment(rec: StreamRecord, text: string, cutAfter: number, deadline: number): Promise<'final' | 'terminal-task' | 'cut' | 'broken'> {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
    const resuming = rec.taskId !== null && rec.snapshot !== null;
    let body: string;
    if (resuming) {
      headers['last-event-id'] = String(rec.seen.at(-1)?.id ?? rec.snapshot);
      body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: rec.taskId } });
    } else {
      body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId: rec.messageId, role: 'ROLE_USER', parts: [{ text }] } } });
    }
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), Math.max(1_000, deadline - Date.now()));
    let frames = 0;
    try {
      const res = await fetch(this.o.url, { method: 'POST', headers, body, signal: ac.signal });
      const type = res.headers.get('content-type') ?? '';
      if (!type.startsWith('text/event-stream')) {
        const answer = await res.text();
        // a finished task whose last event the client has: nothing to resume (A2A: UnsupportedOperation)
        if (resuming && /"code":\s*-32004/.test(answer)) return 'terminal-task';
        rec.error = `HTTP ${res.status} ${answer.slice(0, 200)}`;
        return 'broken';
      }
      for await (const ev of res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream())) {
        frames++;
        const end = this.frame(rec, ev.id, ev.data, resuming);
        if (end) {
          ac.abort();
          return end;
        }
        if (frames >= cutAfter) {
          ac.abort();
          return 'cut';
        }
      }
      rec.error = `the server ended the stream after ${frames} frames without a final one`;
      return 'broken';
    } catch (e) {
      rec.error = errorText(e);
      return 'broken';
    } finally {
      clearTimeout(timer);
    }
  }

  /** Record one frame; returns how the connection ends with it (null: it goes on). */
  private frame(rec: StreamRecord, id: string | undefined, data: string, resuming: boolean): 'final' | 'broken' | null {
    let parsed: { result?: Record<string, any>; error?: { code?: number; message?: string } };
    try {
      parsed = JSON.parse(data);
    } catch {
      rec.error = `a frame that is not JSON: ${data.slice(0, 120)}`;
      return 'broken';
    }
    if (parsed.error || !parsed.result) {
      rec.error = `error frame: ${JSON.stringify(parsed.error ?? parsed).slice(0, 200)}`;
      return 'broken';
    }
    const r = parsed.result;
    if (r.task) {
      if (resuming || rec.snapshot !== null) {
        rec.error = 'a second Task snapshot';
        rec.seen.push({ id: Number(id), key: 'snapshot' });
        return 'broken';
      }
      rec.taskId = String(r.task.id);
      rec.snapshot = Number(id);
      if (TERMINAL_STATES.has(r.task.status?.state)) {
        rec.final = true;
        return 'final';
      }
      return null;
    }
    const art = r.artifactUpdate?.artifact;
    const key = art ? `a:${art.artifactId}:${(art.parts ?? []).map((p: { text?: string }) => p.text ?? '').join('')}` : null;
    rec.seen.push({ id: Number(id), key });
    if (TERMINAL_STATES.has(r.statusUpdate?.status?.state)) {
      rec.final = true;
      return 'final';
    }
    return null;
  }
}

function errorText(e: unknown): string {
  const parts: string[] = [];
  for (let x: any = e, i = 0; x && i < 4; x = x.cause, i++) parts.push(x.code ? String(x.code) : String(x.message ?? x).slice(0, 140));
  return parts.join(' <- ');
}
