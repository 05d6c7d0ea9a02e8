/**
 * The subscriber side of bench/stream-latency.bench.ts, in its own worker thread so that frame
 * receive times are taken on an event loop that does nothing else (the bench's main thread runs
 * the append path: Nest, pg, Redis). Both threads stamp times with `nowMs()` (time origin +
 * monotonic clock), which agree across threads to a few microseconds (`SubscriberThread.start`
 * measures the offset and reports it).
 *
 * In the thread: S `SubscribeToTask` SSE streams spread evenly over R runs (raw `node:http`,
 * bench/lib/sse-client.ts), plus a Redis tap on our wake-up channels (`<prefix>:run:<runId>` →
 * last sequence) that stamps when each event's wake-up was seen, to split the latency into
 * "commit + wake-up" and "wake-up → client". Per stream, `id:` (the run's sequence) is checked:
 * gaps (lost), repeats (duplicates), and going back (out of order).
 *
 * Protocol (main → thread): `window {start, end}`, `drain {maxSeq}` (→ `report`), `close`.
 * The thread sends `opened` once every stream has its Task snapshot, or `error`.
 */
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { SseClient, inBatches } from './sse-client.js';
import { nextThreadMessage } from './thread-message.js';
import { Samples, nowMs, round } from './stats.js';

export interface SubscriberConfig {
  /** The agent's JSON-RPC endpoint. */
  url: string;
  headers: Record<string, string>;
  runIds: string[];
  subscribers: number;
  redisUrl: string;
  /** `<REDIS_PREFIX>:run:` of the API under test. */
  channelPrefix: string;
  /** Streams opened at once. */
  openConcurrency?: number;
}

export interface SubscriberReport {
  /** receive − t of every frame whose t is in the window (ms). */
  latency: Float64Array;
  /** wake-up seen − t, once per event (the run's first stream), in the window. */
  wake: Float64Array;
  /** receive − wake-up seen, per frame, in the window. */
  wakeToClient: Float64Array;
  delivered: number;
  /** Gaps in the streams plus `behind`. */
  lost: number;
  /** Of `lost`: events after the last one a stream received when the drain ended (not received yet, no gap seen). */
  behind: number;
  duplicates: number;
  outOfOrder: number;
  streamsEnded: number;
  errorFrames: number;
  /** Whether every stream reached its run's last appended sequence before the report. */
  drained: boolean;
  elu: number;
  loopDelayMs: { p50: number; p99: number; max: number };
}

type ToThread = { type: 'window'; start: number; end: number } | { type: 'drain'; maxSeq: number[]; timeoutMs: number } | { type: 'close' } | { type: 'clock' };
type FromThread = { type: 'opened' } | { type: 'error'; message: string } | { type: 'report'; report: SubscriberReport } | { type: 'clock'; at: number } | { type: 'closed' };

/** The main-thread handle of the subscriber thread. */
export class SubscriberThread {
  /** Estimated clock offset thread − main (ms), from the fastest of a few round trips. */
  clockOffsetMs = 0;

  private constructor(private readonly worker: Worker) {}

  /** Starts the thread and resolves once every stream has received its Task snapshot. */
  static async start(config: SubscriberConfig, timeoutMs = 60_000): Promise<SubscriberThread> {
    const worker = new Worker(new URL(import.meta.url), { workerData: config });
    const t = new SubscriberThread(worker);
    try {
      await t.next('opened', timeoutMs);
      let best = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 20; i++) {
        const a = nowMs();
        worker.postMessage({ type: 'clock' } satisfies ToThread);
        const m = await t.next('clock', 5_000);
        const c = nowMs();
        if (c - a < best) {
          best = c - a;
          t.clockOffsetMs = round((m as { at: number }).at - (a + c) / 2, 4);
        }
      }
    } catch (e) {
      await worker.terminate();
      throw e;
    }
    return t;
  }

  /** Frames (and wake-ups) count when their t is in [start, end). */
  setWindow(start: number, end: number): void {
    this.worker.postMessage({ type: 'window', start, end } satisfies ToThread);
  }

  /** Waits (bounded) until every stream has its run's `maxSeq[run]`, then reports. */
  async drain(maxSeq: number[], timeoutMs = 10_000): Promise<SubscriberReport> {
    this.worker.postMessage({ type: 'drain', maxSeq, timeoutMs } satisfies ToThread);
    return ((await this.next('report', timeoutMs + 30_000)) as { report: SubscriberReport }).report;
  }

  /** Closes every stream and the tap, then ends the thread (terminated if it does not). */
  async close(): Promise<void> {
    this.worker.postMessage({ type: 'close' } satisfies ToThread);
    await this.next('closed', 10_000).catch(() => undefined);
    await this.worker.terminate();
  }

  private next(type: FromThread['type'], timeoutMs: number): Promise<FromThread> {
    return nextThreadMessage<FromThread>(this.worker, type, timeoutMs, 'subscriber thread', 'closed');
  }
}

// ------------------------------------------------------------------------------------ the thread

/** The marker of the bench's timestamp inside a frame's JSON (the text part is JSON too, so escaped). */
const T_MARK = '\\"t\\":';

interface Stream {
  run: number;
  /** The first stream of its run (counts the per-event wake-up figure once). */
  primary: boolean;
  client: SseClient;
  snapshotSeq: number | null;
  lastId: number;
  gaps: number;
  duplicates: number;
  outOfOrder: number;
}


async function runThread(config: SubscriberConfig): Promise<void> {
  const port = parentPort!;
  const send = (m: FromThread, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const runCount = config.runIds.length;
  const runIndex = new Map(config.runIds.map((id, i) => [id, i]));
  const wakeAt = config.runIds.map(() => [] as number[]);
  const latency = new Samples();
  const wake = new Samples();
  const wakeToClient = new Samples();
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  let delivered = 0;
  let errorFrames = 0;
  const streams: Stream[] = [];
  const resolutionMs = 5; // the histogram records whole intervals: delay = value − resolution
  const delay = monitorEventLoopDelay({ resolution: resolutionMs });
  let elu = performance.eventLoopUtilization();

  const tap = new Redis(config.redisUrl, { maxRetriesPerRequest: 1 });
  tap.on('error', () => undefined);
  tap.on('pmessage', (_pattern: string, channel: string, message: string) => {
    const at = nowMs();
    const suffix = channel.slice(config.channelPrefix.length);
    // a turn's wake-ups come batched on `<prefix>:run:+`, one `<runId> <wake-up>` line per run
    const lines = suffix === '+' ? message.split('\n').map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)] as const) : [[suffix, message] as const];
    for (const [runId, m] of lines) {
      const i = runIndex.get(runId);
      if (i === undefined) continue;
      // `<last sequence>[|status|blocked[|{"orgId",…,"events":[{"sequence":<first>,…}]}]]` (RunNotifier):
      // a wake-up announces every sequence its envelopes carry, or only the last one
      const last = Number.parseInt(m, 10);
      const first = /"events":\[\{"sequence":(\d+)/.exec(m);
      for (let seq = first ? Number(first[1]) : last; seq <= last; seq++) wakeAt[i]![seq] = at;
    }
  });

  const closeAll = () => {
    for (const s of streams) s.client.close();
    tap.disconnect();
    agent.destroy();
  };

  port.on('message', (m: ToThread) => {
    if (m.type === 'clock') send({ type: 'clock', at: nowMs() });
    else if (m.type === 'window') {
      windowStart = m.start;
      windowEnd = m.end;
      if (Number.isFinite(m.start) && !Number.isFinite(m.end)) {
        delay.reset();
        delay.enable();
        elu = performance.eventLoopUtilization();
      }
    } else if (m.type === 'drain') {
      void (async () => {
        const loop = performance.eventLoopUtilization(elu);
        delay.disable();
        const deadline = Date.now() + m.timeoutMs;
        const caughtUp = () => streams.every((s) => s.lastId >= (m.maxSeq[s.run] ?? 0));
        while (!caughtUp() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        let lost = 0;
        let behind = 0;
        let duplicates = 0;
        let outOfOrder = 0;
        let streamsEnded = 0;
        for (const s of streams) {
          lost += s.gaps + Math.max(0, (m.maxSeq[s.run] ?? 0) - s.lastId);
          behind += Math.max(0, (m.maxSeq[s.run] ?? 0) - s.lastId);
          duplicates += s.duplicates;
          outOfOrder += s.outOfOrder;
          if (!s.client.open) streamsEnded += 1;
        }
        const ms = (ns: number) => Math.max(0, round(ns / 1e6 - resolutionMs));
        const report: SubscriberReport = {
          latency: latency.values(),
          wake: wake.values(),
          wakeToClient: wakeToClient.values(),
          delivered,
          lost,
          behind,
          duplicates,
          outOfOrder,
          streamsEnded,
          errorFrames,
          drained: caughtUp(),
          elu: round(loop.utilization, 3),
          loopDelayMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) },
        };
        send({ type: 'report', report }, [report.latency.buffer as ArrayBuffer, report.wake.buffer as ArrayBuffer, report.wakeToClient.buffer as ArrayBuffer]);
      })();
    } else if (m.type === 'close') {
      closeAll();
      send({ type: 'closed' });
      setTimeout(() => process.exit(0), 50).unref();
    }
  });

  try {
    await tap.psubscribe(`${config.channelPrefix}*`);
    const body = (run: number) => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: config.runIds[run] } });
    await inBatches(config.subscribers, config.openConcurrency ?? 50, async (i) => {
      const s: Stream = { run: i % runCount, primary: i < runCount, client: null as unknown as SseClient, snapshotSeq: null, lastId: 0, gaps: 0, duplicates: 0, outOfOrder: 0 };
      s.client = new SseClient({
        url: config.url,
        headers: config.headers,
        body: body(s.run),
        agent,
        onFrame: (frame, receivedAt) => {
          if (frame.event === 'error') {
            errorFrames += 1;
            return;
          }
          const id = Number(frame.id);
          if (s.snapshotSeq === null) {
            s.snapshotSeq = id; // the Task snapshot: its id is the sequence it reflects
            s.lastId = id;
            return;
          }
          if (id === s.lastId + 1) s.lastId = id;
          else if (id > s.lastId + 1) {
            s.gaps += id - s.lastId - 1;
            s.lastId = id;
          } else if (id === s.lastId) s.duplicates += 1;
          else s.outOfOrder += 1;
          const at = frame.data.indexOf(T_MARK);
          if (at < 0 || frame.data.indexOf('"statusUpdate"') < 0) return;
          const t = Number.parseFloat(frame.data.slice(at + T_MARK.length, at + T_MARK.length + 32));
          if (t >= windowStart && t < windowEnd) {
            latency.push(receivedAt - t);
            delivered += 1;
            const w = wakeAt[s.run]![id];
            if (w !== undefined) {
              wakeToClient.push(receivedAt - w);
              if (s.primary) wake.push(w - t);
            }
          }
        },
      });
      streams.push(s);
      await s.client.start();
    });
    const deadline = Date.now() + 30_000;
    while (!streams.every((s) => s.snapshotSeq !== null)) {
      if (Date.now() > deadline) throw new Error('not every stream received its Task snapshot within 30 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    send({ type: 'opened' });
  } catch (e) {
    closeAll();
    send({ type: 'error', message: e instanceof Error ? e.message : String(e) });
  }
}

if (!isMainThread && parentPort && (workerData as SubscriberConfig | undefined)?.runIds) {
  void runThread(workerData as SubscriberConfig);
}
