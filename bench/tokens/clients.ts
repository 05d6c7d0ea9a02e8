/**
 * The token-streaming load generator, in its own worker thread so that receive times are taken on
 * an event loop that does nothing else (pattern of bench/lib/stream-subscribers.ts). N clients,
 * each looping: `SendStreamingMessage` (JSON-RPC v1.0 over SSE, `A2A-Version: 1.0`, raw
 * `node:http` keep-alive, bench/lib/sse-client.ts) with the text `tokens <client>/<k> n=<K> d=<I>`,
 * followed to the end of its stream, then the next, until `stop`.
 *
 * Each artifact chunk's text is `{"i":<index>,"t":<emit time>}`. Per stream the indices must be
 * 0..K-1, each once, in order, and the last status must be COMPLETED. Times are `nowMs()` (ms since
 * the epoch, sub-ms), which agree across threads and processes of one machine.
 *
 * Protocol (main → thread): `window {start, end}` (ms), `stop {timeoutMs}` (→ `report`). The
 * thread sends `started` once every client has sent its first request.
 */
import http from 'node:http';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { SseClient } from '../lib/sse-client.js';
import { Samples, nowMs } from '../lib/stats.js';
import { nextThreadMessage } from '../lib/thread-message.js';

export interface ClientsConfig {
  /** JSON-RPC endpoint of the agent. */
  url: string;
  streams: number;
  /** Chunks per task (K). */
  chunks: number;
  /** ms between chunks (I). */
  intervalMs: number;
  /** A task whose stream has not ended this long after it was sent is given up (ms). */
  taskTimeoutMs: number;
}

/** What the clients saw; latencies in ms. Counts are over every task (warm-up included) unless named "inWindow". */
export interface ClientsReport {
  /** receive − emit time of every chunk emitted in the window. */
  latency: Float64Array;
  /** request sent → first artifact chunk received, of tasks sent in the window. */
  firstChunk: Float64Array;
  /** Chunks received in the window. */
  chunksInWindow: number;
  /** Tasks whose stream ended in the window. */
  tasksInWindow: number;
  tasks: number;
  /** Tasks whose stream ended without a COMPLETED status (error, cut, other state). */
  notCompleted: number;
  /** Tasks still open when `stop` gave up waiting. */
  unfinished: number;
  /** Chunk indices never received (K − distinct indices), over finished tasks. */
  lost: number;
  duplicated: number;
  /** Chunks that arrived after a higher index of their stream. */
  outOfOrder: number;
  /** Answers that were not a 200 event stream. */
  refusedHttp: number;
  /** JSON-RPC error objects (in a 200 answer or an SSE frame). */
  rpcErrors: number;
  /** Connection errors and streams that ended otherwise than by the server after the final status. */
  brokenStreams: number;
  /** A few error texts, for the log. */
  errorSamples: string[];
}

type ToThread = { type: 'window'; start: number; end: number } | { type: 'stop'; timeoutMs: number };
type FromThread = { type: 'started' } | { type: 'report'; report: ClientsReport } | { type: 'error'; message: string };

/** Main-thread handle of the load thread. */
export class ClientsThread {
  private constructor(private readonly worker: Worker) {}

  /** Starts the thread; resolves once every client has sent its first request (spread over ~1 s). */
  static async start(config: ClientsConfig): Promise<ClientsThread> {
    const worker = new Worker(new URL(import.meta.url), { workerData: config });
    const t = new ClientsThread(worker);
    await t.next('started', 60_000);
    return t;
  }

  setWindow(start: number, end: number): void {
    this.worker.postMessage({ type: 'window', start, end } satisfies ToThread);
  }

  /** Stops starting tasks, waits (≤ timeoutMs) for the open ones to end, reports, ends the thread. */
  async stop(timeoutMs: number): Promise<ClientsReport> {
    this.worker.postMessage({ type: 'stop', timeoutMs } satisfies ToThread);
    try {
      return ((await this.next('report', timeoutMs + 30_000)) as { report: ClientsReport }).report;
    } finally {
      await this.worker.terminate();
    }
  }

  private next(type: FromThread['type'], timeoutMs: number): Promise<FromThread> {
    return nextThreadMessage<FromThread>(this.worker, type, timeoutMs, 'clients thread');
  }
}

// ------------------------------------------------------------------------------------ the thread

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CHUNK = /"i":(\d+),"t":([\d.]+)/;

interface Frame {
  error?: { message?: string };
  result?: {
    artifactUpdate?: { artifact?: { parts?: Array<{ text?: string }> } };
    statusUpdate?: { status?: { state?: string } };
    task?: { status?: { state?: string } };
  };
}

async function runThread(config: ClientsConfig): Promise<void> {
  const port = parentPort!;
  const send = (m: FromThread, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const latency = new Samples();
  const firstChunk = new Samples();
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  let stopping = false;
  const r: Omit<ClientsReport, 'latency' | 'firstChunk'> = {
    chunksInWindow: 0, tasksInWindow: 0, tasks: 0, notCompleted: 0, unfinished: 0, lost: 0, duplicated: 0, outOfOrder: 0,
    refusedHttp: 0, rpcErrors: 0, brokenStreams: 0, errorSamples: [],
  };
  const note = (e: string) => {
    if (r.errorSamples.length < 5) r.errorSamples.push(e.slice(0, 300));
  };
  const open = new Set<SseClient>();
  const inWindow = (t: number) => t >= windowStart && t < windowEnd;

  /** One task: its request, its stream to the end, its integrity. */
  const task = async (c: number, k: number): Promise<void> => {
    const seen = new Uint8Array(config.chunks);
    let maxIndex = -1;
    let distinct = 0;
    let state = '';
    let first = true;
    const sentAt = nowMs();
    let ended!: () => void;
    const done = new Promise<void>((resolve) => (ended = resolve));
    const body = JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage',
      params: { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text: `tokens ${c}/${k} n=${config.chunks} d=${config.intervalMs}` }] } },
    });
    const client = new SseClient({
      url: config.url, body, agent,
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      onFrame: (frame, receivedAt) => {
        const f = JSON.parse(frame.data) as Frame;
        if (f.error) {
          r.rpcErrors++;
          note(`JSON-RPC error frame: ${JSON.stringify(f.error)}`);
          return;
        }
        const res = f.result;
        const st = res?.statusUpdate?.status?.state ?? res?.task?.status?.state;
        if (st) state = st;
        for (const p of res?.artifactUpdate?.artifact?.parts ?? []) {
          const m = CHUNK.exec(p.text ?? '');
          if (!m) continue;
          const i = Number(m[1]);
          const t = Number(m[2]);
          if (first) {
            first = false;
            if (inWindow(sentAt)) firstChunk.push(receivedAt - sentAt);
          }
          if (inWindow(receivedAt)) r.chunksInWindow++;
          if (inWindow(t)) latency.push(receivedAt - t);
          if (i >= config.chunks || seen[i]) r.duplicated++;
          else {
            seen[i] = 1;
            distinct++;
            if (i < maxIndex) r.outOfOrder++;
          }
          maxIndex = Math.max(maxIndex, i);
        }
      },
      onClose: () => ended(),
    });
    open.add(client);
    const timer = setTimeout(() => client.close(), config.taskTimeoutMs);
    try {
      await client.start(config.taskTimeoutMs);
    } catch (e) {
      clearTimeout(timer);
      open.delete(client);
      if (client.status !== 0 && client.status !== 200) r.refusedHttp++;
      else if (/"error"/.test(String(e))) r.rpcErrors++;
      else r.brokenStreams++;
      note(String(e));
      await sleep(100);
      return;
    }
    await done;
    clearTimeout(timer);
    open.delete(client);
    const finishedAt = nowMs();
    if (client.endReason === 'closed' && stopping) {
      r.unfinished++;
      return;
    }
    r.tasks++;
    if (inWindow(finishedAt)) r.tasksInWindow++;
    r.lost += config.chunks - distinct;
    if (state !== 'TASK_STATE_COMPLETED') {
      r.notCompleted++;
      note(`task ${c}/${k} ended in '${state || 'no state'}' (${client.endReason})`);
    }
    if (client.endReason !== 'server-end') r.brokenStreams++;
  };

  const loops: Array<Promise<void>> = [];
  for (let c = 0; c < config.streams; c++) {
    loops.push(
      (async () => {
        await sleep((c / config.streams) * 1_000); // spread the first requests over a second
        for (let k = 0; !stopping; k++) await task(c, k);
      })(),
    );
  }
  await sleep(1_000);
  send({ type: 'started' });

  port.on('message', (m: ToThread) => {
    if (m.type === 'window') {
      windowStart = m.start;
      windowEnd = m.end;
      return;
    }
    stopping = true;
    void (async () => {
      const give = setTimeout(() => {
        for (const client of open) client.close();
      }, m.timeoutMs);
      await Promise.all(loops);
      clearTimeout(give);
      agent.destroy();
      const report: ClientsReport = { ...r, latency: latency.values(), firstChunk: firstChunk.values() };
      send({ type: 'report', report }, [report.latency.buffer as ArrayBuffer, report.firstChunk.buffer as ArrayBuffer]);
    })().catch((e: unknown) => send({ type: 'error', message: String(e) }));
  });
}

if (!isMainThread && parentPort && (workerData as ClientsConfig | undefined)?.url) {
  void runThread(workerData as ClientsConfig);
}
