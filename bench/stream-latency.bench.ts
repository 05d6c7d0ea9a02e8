/**
 * Streaming benchmark: append → SSE client latency, and the cost of idle streams.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/stream-latency.bench.js      (run from the repo root)
 *
 * What it measures (figures and ratios only — it never asserts timings):
 *
 * 1. `redis` — the floor: raw Redis pub/sub in this process, one publisher and one subscriber
 *    connection (ioredis), publishing `{"t": <send time>}` over R channels at the same steady
 *    rate as the stream scenarios. Latency = receive time − t.
 *
 * 2. `a` / `b` — append → client latency through our real stack. Our API runs in a CHILD process
 *    (compiled tree, fresh database, no worker: the runs stay `submitted`, which is an active
 *    state, so appends are accepted). This process
 *    - creates R runs through the API (`SendMessage`, `returnImmediately`, a `hold` rule),
 *    - opens S `SubscribeToTask` SSE streams over JSON-RPC v1.0 (raw `node:http` keep-alive
 *      connections, incremental SSE parsing, bench/lib/sse-client.ts), spread evenly over the runs,
 *      in a worker thread (bench/lib/stream-subscribers.ts) so receive times are not delayed by
 *      the append path's event loop,
 *    - appends agent messages through our real append path — a Nest application context booted
 *      here from dist/libs (config, db, runs) on the same database and Redis prefix as the API —
 *      calling `RuntimeOperations.emitMessage(orgId, runId, {parts: [{text: '{"t": <send time>}'}]})`
 *      round-robin over the runs at a steady total rate,
 *    - and, for every `statusUpdate` frame, records latency = receive time − t. The path measured
 *      is: commit in PostgreSQL (one statement) → Redis wake-up carrying the committed envelopes →
 *      the API's RunStreamHub delivers them from the message (a read of PostgreSQL only on a gap,
 *      a missing payload or the poll; BENCH_WAKEUPS=seq|both measures the read-per-wake-up path
 *      too) → projection → SSE write → this process parses the frame.
 *      A Redis tap on the wake-up channels splits it: t → commit resolved, t → wake-up seen,
 *      wake-up seen → frame received. CPU time per component (this process, the API child, the
 *      bench database's PostgreSQL backends, Redis, everything else) is read from /proc over the
 *      measured window, so a saturated machine shows as such.
 *    Each stream's `id:` (the run's sequence) is checked: lost, duplicate and out-of-order frames
 *    are counted (must be 0). Warm-up is excluded (events whose t is outside the measured window).
 *    (a) 100 subscribers, (b) 1,000 subscribers, both at 1,000 events/s over R = 100 runs, so each
 *    stream sees 10 events/s and (b) delivers 10,000 frames/s.
 *    Target: p99 ≤ 10 ms at 1,000 events/s on loopback. The API child runs without the per-caller
 *    stream cap (every subscriber is the same anonymous caller).
 *
 * 3. `idle` — memory per idle stream: a fresh API child (SSE_HEARTBEAT_MS=1000), N idle
 *    subscriptions over R held runs (no events), all past their first frame (the Task snapshot);
 *    (VmRSS after − VmRSS before) / N of the API child, both read after a forced full GC (the
 *    child is bench/ours/api-server-probe.mjs, which exposes GC and event-loop stats on a side
 *    port). Then the streams are held for BENCH_IDLE_HOLD_S and must all stay open and receive
 *    heartbeat comments. N = 1,000 then 10,000. Target: ≤ 50 KB per idle stream; 10,000 streams
 *    in one process.
 *
 * Every figure is printed with the load average: other processes share this machine.
 *
 * Env:
 *   BENCH_DURATION_S      measured seconds per latency scenario         (default 10)
 *   BENCH_WARMUP_S        unmeasured seconds before it                  (default 2)
 *   BENCH_RATE            events/s appended in total                    (default 1000)
 *   BENCH_RUNS            runs (R) the events and streams spread over   (default 100)
 *   BENCH_SUBSCRIBERS     subscribers of the latency scenarios          (default 100,1000 = a,b)
 *   BENCH_SCENARIOS       any of redis,a,b,idle                         (default all)
 *   BENCH_IDLE_N          idle stream counts                            (default 1000,10000)
 *   BENCH_IDLE_HOLD_S     how long idle streams are held open           (default 5)
 *   BENCH_IDLE_HEARTBEAT_MS  SSE_HEARTBEAT_MS of the idle API child     (default 1000)
 *   BENCH_TIMEOUT_S       hard limit for the whole bench                (default 900)
 *   BENCH_DATABASE_URL    database (reset!) (default postgresql://postgres@127.0.0.1:5432/aaas_bench_stream)
 *   BENCH_POOL_MAX        DATABASE_POOL_MAX of the API child            (default 20)
 *   BENCH_WAKEUPS         envelopes | seq | both: the appender's wake-ups carry the committed
 *                         envelopes (followers deliver them without a read), only the sequence
 *                         (followers read every commit: the design before), or each scenario is
 *                         run both ways, sequence only first (an A/B under the same load) (default envelopes)
 *   BENCH_STREAMS_PER_CALLER  MAX_STREAMS_PER_CALLER of the API child   (default 0 = no cap: all
 *                         subscribers are one anonymous caller)
 *   BENCH_APPEND_POOL_MAX DATABASE_POOL_MAX of this process's append path (default 10)
 *   REDIS_URL             Redis                                         (default redis://127.0.0.1:6379)
 *   BENCH_PROFILE_DIR     write --cpu-prof profiles of the API child there
 *   BENCH_OUT             results JSON ('' = don't write; default bench/results/stream-latency-<ts>.json)
 */
import 'reflect-metadata';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { RuntimeOperations as RunServiceType } from '#libs/runs';
import { repoPath } from './lib/child-server.js';
import { SseClient, inBatches } from './lib/sse-client.js';
import { SubscriberThread } from './lib/stream-subscribers.js';
import { Samples, envNumber, cpuDelta, cpuSnapshot, formatTable, loadAverage, machineBusy, machineCpu, nowMs, round, vmRssKb, type CpuSnapshot, type LatencySummary } from './lib/stats.js';
import { startOursProcesses, type OursProcesses } from './ours/ours.js';

// ------------------------------------------------------------------------------------ settings

function envList(name: string, fallback: string): string[] {
  return (process.env[name] ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function envNumbers(name: string, fallback: string): number[] {
  return envList(name, fallback).map((raw) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a comma list of non-negative integers, got '${raw}'`);
    return n;
  });
}

const SETTINGS = {
  durationS: envNumber('BENCH_DURATION_S', 10),
  warmupS: envNumber('BENCH_WARMUP_S', 2),
  rate: envNumber('BENCH_RATE', 1000),
  runs: Math.max(1, Math.floor(envNumber('BENCH_RUNS', 100))),
  subscribers: envNumbers('BENCH_SUBSCRIBERS', '100,1000'),
  scenarios: new Set(envList('BENCH_SCENARIOS', 'redis,a,b,idle')),
  idleN: envNumbers('BENCH_IDLE_N', '1000,10000').filter((n) => n > 0),
  idleHoldS: envNumber('BENCH_IDLE_HOLD_S', 5),
  idleHeartbeatMs: envNumber('BENCH_IDLE_HEARTBEAT_MS', 1000),
  timeoutS: envNumber('BENCH_TIMEOUT_S', 900),
  databaseUrl: process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_stream',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  /** Wake-ups of the latency scenarios: with the committed envelopes, sequence only (the A/B), or both in turn. */
  wakeups: { envelopes: [true], seq: [false], both: [false, true] }[process.env.BENCH_WAKEUPS ?? 'envelopes'] ?? [true],
  /** MAX_STREAMS_PER_CALLER of the API child (0 = no cap). */
  streamsPerCaller: envNumber('BENCH_STREAMS_PER_CALLER', 0),
};

/** Printed beside the figures. */
const TARGET_P99_MS = 10;
const TARGET_KB_PER_IDLE_STREAM = 50;
/** The scripted rule the runs match (with no worker they simply stay `submitted`). */
const HOLD_RULES = [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }];
/** Appends in flight at most; beyond that a tick's events are skipped (and counted). */
const MAX_APPENDS_IN_FLIGHT = 256;

// ------------------------------------------------------------------------------------ teardown

/**
 * Everything this process started (children, connections, timers), closed in reverse order by
 * the scenario that opened it, or by `closeAll()` on error, signal or the global timeout.
 */
class Resources {
  private readonly items: Array<{ name: string; close: () => Promise<void> | void }> = [];

  /** Registers a resource; returns its closer (runs once, then forgets the resource). */
  add(name: string, close: () => Promise<void> | void): () => Promise<void> {
    const item = { name, close };
    this.items.push(item);
    return async () => {
      const i = this.items.indexOf(item);
      if (i < 0) return;
      this.items.splice(i, 1);
      await withTimeout(Promise.resolve().then(close), 20_000, `closing ${name}`).catch((e: unknown) => console.error(`[teardown] ${String(e)}`));
    };
  }

  async closeAll(): Promise<void> {
    while (this.items.length > 0) {
      const item = this.items.pop()!;
      await withTimeout(Promise.resolve().then(item.close), 20_000, `closing ${item.name}`).catch((e: unknown) => console.error(`[teardown] ${String(e)}`));
    }
  }
}

const resources = new Resources();

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `cond` every `pollMs` until true; false when `timeoutMs` passed first. */
async function waitUntil(cond: () => boolean | Promise<boolean>, timeoutMs: number, pollMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(pollMs);
  }
}

// ------------------------------------------------------------------------------------ steady rate

/**
 * Calls `fire(i)` at a steady `rate` per second from a 1 ms timer, catching up on late ticks
 * (but never by more than 50 ms worth of events: a longer stall is counted in `skipped`).
 */
class SteadyRate {
  sent = 0;
  skipped = 0;
  private timer: NodeJS.Timeout | null = null;
  private started = 0;
  private due = 0;

  constructor(
    private readonly rate: number,
    private readonly fire: (i: number) => boolean,
  ) {}

  start(): void {
    this.started = performance.now();
    this.timer = setInterval(() => this.tick(), 1);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private tick(): void {
    const target = Math.floor(((performance.now() - this.started) / 1000) * this.rate);
    const maxBacklog = Math.max(1, Math.ceil(this.rate * 0.05));
    if (target - this.due > maxBacklog) {
      this.skipped += target - this.due - maxBacklog;
      this.due = target - maxBacklog;
    }
    while (this.due < target) {
      this.due += 1;
      if (this.fire(this.sent)) this.sent += 1;
      else this.skipped += 1;
    }
  }
}

/**
 * Event-loop delay sampling interval. Node's histogram records whole timer intervals, so the
 * delay reported is a value minus this.
 */
const LOOP_DELAY_RESOLUTION_MS = 5;

/** What THIS process (the client side) and the whole machine did over a window. */
interface WindowHealth {
  /** Event-loop utilisation of this process's main thread (0..1). */
  elu: number;
  /** Event-loop delay of the main thread beyond the sampling interval. */
  loopDelayMs: { p50: number; p99: number; max: number };
  /** CPU time of this process over the window. */
  cpuMs: number;
  /** Share of all the machine's CPUs busy over the window (other engineers' jobs included). */
  machineBusy: number | null;
  cpus: number;
  windowMs: number;
  /**
   * CPU ms over the window by component: `bench` (this process), `api` (the API child),
   * `postgres:<bench db>` / `postgres:other-dbs` / `postgres:shared` / `redis`, `other` (the rest of the machine).
   */
  cpuMsBy: Record<string, number>;
}

/** Event-loop utilisation and delay, CPU of this process and of the machine, over a window. */
class LoopMonitor {
  private readonly delay = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
  private elu = performance.eventLoopUtilization();
  private cpu = process.cpuUsage();
  private machine = machineCpu();
  private procs: CpuSnapshot = new Map();
  private started = 0;

  constructor(
    private readonly pids: Record<string, number | undefined> = {},
    private readonly pgDatabase?: string,
  ) {}

  start(): void {
    this.delay.reset();
    this.delay.enable();
    this.elu = performance.eventLoopUtilization();
    this.cpu = process.cpuUsage();
    this.machine = machineCpu();
    this.procs = cpuSnapshot({ bench: process.pid, ...this.pids }, this.pgDatabase);
    this.started = performance.now();
  }

  stop(): WindowHealth {
    const elu = performance.eventLoopUtilization(this.elu);
    const cpu = process.cpuUsage(this.cpu);
    const machine = machineCpu();
    const cpuMsBy = cpuDelta(this.procs, cpuSnapshot({ bench: process.pid, ...this.pids }, this.pgDatabase));
    if (this.machine && machine) {
      const named = Object.values(cpuMsBy).reduce((a, b) => a + b, 0);
      cpuMsBy.other = Math.max(0, (machine.busy - this.machine.busy) * 10 - named);
    }
    this.delay.disable();
    const ms = (ns: number) => Math.max(0, round(ns / 1e6 - LOOP_DELAY_RESOLUTION_MS));
    return {
      elu: round(elu.utilization, 3),
      loopDelayMs: { p50: ms(this.delay.percentile(50)), p99: ms(this.delay.percentile(99)), max: ms(this.delay.max) },
      cpuMs: Math.round((cpu.user + cpu.system) / 1000),
      machineBusy: machineBusy(this.machine, machine),
      cpus: cpus().length,
      windowMs: Math.round(performance.now() - this.started),
      cpuMsBy,
    };
  }
}

// ------------------------------------------------------------------------------------ our stack

interface ApiStats {
  pid: number;
  vmRssKb: number | null;
  memory: NodeJS.MemoryUsage;
  elu: number;
  windowMs: number;
  cpuUserMs: number;
  cpuSystemMs: number;
  loopDelayMs: { p50: number; p99: number; max: number };
  sseStreams: number | null;
  hub: { runs: number; subscribers: number } | null;
}

interface Stack {
  ours: OursProcesses;
  orgId: string;
  probeUrl: string;
  pid: number | undefined;
  agent: http.Agent;
  close(): Promise<void>;
}

/**
 * Our API in a child process over a fresh database (bench/ours/ours.ts), no worker, an agent
 * with `capabilities.streaming` and the hold rule, plus the org id (GET /v1/organization).
 */
async function startStack(apiEnv: Record<string, string>): Promise<Stack> {
  const ours = await startOursProcesses({
    worker: false,
    databaseUrl: SETTINGS.databaseUrl,
    apiScript: 'bench/ours/api-server-probe.mjs',
    // every subscriber is the same anonymous caller (one address): lift the per-caller stream cap
    // (default 200 per process), or scenario b and the idle streams are refused with HTTP 429
    apiEnv: { MAX_STREAMS_PER_CALLER: String(SETTINGS.streamsPerCaller), ...apiEnv },
    capabilities: { streaming: true },
    rules: HOLD_RULES,
  });
  const closeOurs = resources.add('API child', () => ours.close());
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const closeAgent = resources.add('http agent', () => agent.destroy());
  const res = await fetch(`${ours.base}/v1/organization`, { headers: { authorization: `Bearer ${ours.key}` } });
  const org = (await res.json()) as { id?: string };
  if (!res.ok || typeof org.id !== 'string') throw new Error(`GET /v1/organization: HTTP ${res.status} ${JSON.stringify(org)}`);
  const probeUrl = ours.api.info.probeUrl;
  if (typeof probeUrl !== 'string') throw new Error('the API child did not announce its probeUrl');
  return {
    ours,
    orgId: org.id,
    probeUrl,
    pid: ours.api.pid,
    agent,
    async close() {
      await closeAgent();
      await closeOurs();
    },
  };
}

async function apiStats(stack: Stack, gc = false): Promise<ApiStats> {
  const res = await fetch(`${stack.probeUrl}/${gc ? 'gc' : 'stats'}`, { method: gc ? 'POST' : 'GET' });
  if (!res.ok) throw new Error(`probe: HTTP ${res.status}`);
  return (await res.json()) as ApiStats;
}

const JSON_RPC_HEADERS = { 'content-type': 'application/json', 'a2a-version': '1.0' };

/** R runs through the API: `SendMessage` (returnImmediately) matching the hold rule. */
async function createRuns(stack: Stack, count: number): Promise<string[]> {
  return inBatches(count, 10, async (i) => {
    const res = await fetch(stack.ours.url, {
      method: 'POST',
      headers: { ...JSON_RPC_HEADERS, accept: 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `hold ${i}` }] }, configuration: { returnImmediately: true } },
      }),
    });
    const text = await res.text();
    const id = (JSON.parse(text) as { result?: { task?: { id?: string } } }).result?.task?.id;
    if (!res.ok || typeof id !== 'string') throw new Error(`SendMessage: HTTP ${res.status} ${text.slice(0, 300)}`);
    return id;
  });
}

function subscribeRequest(taskId: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: taskId } });
}

/**
 * The append path of this process: a Nest application context with the compiled config, db and
 * runs libs (`#libs/*` resolves to dist/ at runtime), on the API child's database and Redis
 * prefix. Only RuntimeOperations is used.
 */
interface Appender {
  runs: RunServiceType;
  /** False: this process's wake-ups carry the sequence and state only (as before issue 19), so followers read every commit. */
  envelopesInWakeups: boolean;
  close(): Promise<void>;
}

async function startAppender(stack: Stack): Promise<Appender> {
  const { NestFactory } = await import('@nestjs/core');
  const { ConfigModule } = await import('#libs/config');
  const { DbModule } = await import('#libs/db');
  const { RunsModule, RuntimeOperations, RunNotifier } = await import('#libs/runs');
  const overrides = {
    DATABASE_URL: stack.ours.env.DATABASE_URL!,
    REDIS_URL: SETTINGS.redisUrl,
    REDIS_PREFIX: stack.ours.env.REDIS_PREFIX!,
    DATABASE_POOL_MAX: String(envNumber('BENCH_APPEND_POOL_MAX', 10)),
    LOG_LEVEL: 'silent',
  } as const;
  class StreamBenchAppendModule {}
  const app: INestApplicationContext = await NestFactory.createApplicationContext(
    { module: StreamBenchAppendModule, imports: [ConfigModule.forRoot(overrides), DbModule, RunsModule] },
    { logger: false },
  );
  const close = resources.add('append context', () => app.close());
  const appender: Appender = { runs: app.get(RuntimeOperations), envelopesInWakeups: true, close };
  // the A/B switch of BENCH_WAKEUPS: the same stack, wake-ups with or without the committed envelopes
  const notifier = app.get(RunNotifier);
  const notify = notifier.notify.bind(notifier);
  notifier.notify = (runId, lastSequence, state, committed) => notify(runId, lastSequence, state, appender.envelopesInWakeups ? committed : undefined);
  return appender;
}

// ------------------------------------------------------------------------------------ scenarios

interface LatencyResult {
  scenario: string;
  subscribers: number;
  runs: number;
  subscribersPerRun: number;
  targetRate: number;
  durationS: number;
  warmupS: number;
  /** Events committed per second (t inside the measured window). */
  appendedPerS: number;
  /** Events the rate could not send (tick stalls or too many appends in flight). */
  skipped: number;
  appendErrors: number;
  /** Frames received per second (t inside the window); expected = appended/s × subscribers per run. */
  deliveriesPerS: number;
  expectedDeliveriesPerS: number;
  latency: LatencySummary;
  /** t → emitMessage resolved in this process (pool wait + statement + commit), for comparison. */
  commit: LatencySummary | null;
  /**
   * t → the run's Redis wake-up seen by a tap subscriber in this process (one per event): commit
   * + publish + Redis delivery. The API child gets the same wake-up at about the same moment.
   */
  wake: LatencySummary | null;
  /** Wake-up seen → frame received (per delivery): the API's re-read, projection, SSE write, client parse. */
  wakeToClient: LatencySummary | null;
  lost: number;
  /** Of `lost`: not received yet when the drain (10 s) ended, no gap seen (a saturated API, not a hole in a stream). */
  behind: number;
  duplicates: number;
  outOfOrder: number;
  /** Streams that ended or errored before the end of the scenario. */
  streamsEnded: number;
  errorFrames: number;
  api: ApiStats | null;
  /** This process: the append path's thread (main), CPU of both threads, the machine. */
  bench: WindowHealth;
  /** The subscriber thread's event loop (receive side) and its clock offset to the main thread. */
  subscriberThread: { elu: number; loopDelayMs: { p50: number; p99: number; max: number }; clockOffsetMs: number } | null;
  loadavg: [number, number, number];
}

/** Raw Redis pub/sub, same rate and channel count: the floor of our wake-up path. */
async function redisBaseline(): Promise<LatencyResult> {
  const { rate, runs, durationS, warmupS } = SETTINGS;
  const prefix = `aaas-bench-raw-${randomUUID().slice(0, 8)}`;
  const pub = new Redis(SETTINGS.redisUrl, { maxRetriesPerRequest: 1 });
  const sub = new Redis(SETTINGS.redisUrl, { maxRetriesPerRequest: 1 });
  const closeRedis = resources.add('redis baseline', () => {
    pub.disconnect();
    sub.disconnect();
  });
  try {
    const channels = Array.from({ length: runs }, (_, i) => `${prefix}:${i}`);
    await sub.subscribe(...channels);
    const latency = new Samples();
    let windowStart = Number.POSITIVE_INFINITY;
    let windowEnd = Number.POSITIVE_INFINITY;
    let received = 0;
    let published = 0;
    let errors = 0;
    sub.on('message', (_channel: string, message: string) => {
      const at = nowMs();
      const t = Number.parseFloat(message.slice(5));
      if (t >= windowStart && t < windowEnd) {
        latency.push(at - t);
        received += 1;
      }
    });
    const steady = new SteadyRate(rate, (i) => {
      const t = nowMs();
      if (t >= windowStart && t < windowEnd) published += 1;
      pub.publish(channels[i % runs]!, JSON.stringify({ t })).catch(() => (errors += 1));
      return true;
    });
    const loop = new LoopMonitor();
    steady.start();
    await sleep(warmupS * 1000);
    windowStart = nowMs();
    loop.start();
    await sleep(durationS * 1000);
    windowEnd = nowMs();
    const bench = loop.stop();
    steady.stop();
    await sleep(200);
    const measuredS = (windowEnd - windowStart) / 1000;
    return {
      scenario: 'redis pub/sub',
      subscribers: 1,
      runs,
      subscribersPerRun: 1,
      targetRate: rate,
      durationS: round(measuredS),
      warmupS,
      appendedPerS: round(published / measuredS, 1),
      skipped: steady.skipped,
      appendErrors: errors,
      deliveriesPerS: round(received / measuredS, 1),
      expectedDeliveriesPerS: round(published / measuredS, 1),
      latency: latency.summary(),
      commit: null,
      wake: null,
      wakeToClient: null,
      lost: published - received,
      behind: 0,
      duplicates: 0,
      outOfOrder: 0,
      streamsEnded: 0,
      errorFrames: 0,
      api: null,
      bench,
      subscriberThread: null,
      loadavg: loadAverage(),
    };
  } finally {
    await closeRedis();
  }
}

/**
 * S subscribers (in a worker thread, bench/lib/stream-subscribers.ts) over R fresh runs; events
 * appended from this thread at the steady rate for warm-up + duration, then drained (every
 * stream up to its run's last appended sequence) and checked.
 */
async function latencyScenario(name: string, stack: Stack, appender: Appender, subscribers: number): Promise<LatencyResult> {
  const { rate, runs: runCount, durationS, warmupS } = SETTINGS;
  console.log(`[${name}] ${subscribers} subscribers over ${runCount} runs, ${rate} events/s, ${durationS}s (+${warmupS}s warm-up); load ${loadAverage().join(' ')}`);
  const runIds = await createRuns(stack, runCount);
  const maxSeq = new Array<number>(runCount).fill(0);
  const commit = new Samples();
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;

  const subs = await SubscriberThread.start({
    url: stack.ours.url,
    headers: JSON_RPC_HEADERS,
    runIds,
    subscribers,
    redisUrl: SETTINGS.redisUrl,
    channelPrefix: `${stack.ours.env.REDIS_PREFIX}:run:`,
  });
  const closeSubs = resources.add(`${name} subscriber thread`, () => subs.close());
  try {
    // ---- append at a steady rate, round-robin over the runs
    let inFlight = 0;
    let appended = 0;
    let appendErrors = 0;
    let firstError: unknown = null;
    const steady = new SteadyRate(rate, (i) => {
      if (inFlight >= MAX_APPENDS_IN_FLIGHT) return false;
      const run = i % runCount;
      const t = nowMs();
      inFlight += 1;
      appender.runs.emitMessage(stack.orgId, runIds[run]!, { parts: [{ text: JSON.stringify({ t }) }] }).then(
        (rec) => {
          inFlight -= 1;
          if (rec.lastSequence > maxSeq[run]!) maxSeq[run] = rec.lastSequence;
          if (t >= windowStart && t < windowEnd) {
            appended += 1;
            commit.push(nowMs() - t);
          }
        },
        (e: unknown) => {
          inFlight -= 1;
          appendErrors += 1;
          firstError ??= e;
        },
      );
      return true;
    });
    const loop = new LoopMonitor({ api: stack.pid }, new URL(SETTINGS.databaseUrl).pathname.slice(1));
    const stopRate = resources.add(`${name} rate`, () => steady.stop());
    steady.start();
    await sleep(warmupS * 1000);
    await apiStats(stack); // resets the API child's window
    windowStart = nowMs();
    subs.setWindow(windowStart, Number.POSITIVE_INFINITY);
    loop.start();
    await sleep(durationS * 1000);
    windowEnd = nowMs();
    subs.setWindow(windowStart, windowEnd);
    const bench = loop.stop();
    const api = await apiStats(stack);
    await stopRate();
    const loadavg = loadAverage();

    // ---- drain: every stream up to its run's last committed sequence (bounded), then check
    await waitUntil(() => inFlight === 0, 10_000);
    const report = await subs.drain(maxSeq, 10_000);
    if (!report.drained) console.log(`[${name}] warning: not every stream caught up within 10 s after the last append`);
    if (firstError) console.log(`[${name}] first append error: ${String(firstError)}`);

    const measuredS = (windowEnd - windowStart) / 1000;
    const appendedPerS = appended / measuredS;
    const subscribersPerRun = subscribers / runCount;
    return {
      scenario: name,
      subscribers,
      runs: runCount,
      subscribersPerRun,
      targetRate: rate,
      durationS: round(measuredS),
      warmupS,
      appendedPerS: round(appendedPerS, 1),
      skipped: steady.skipped,
      appendErrors,
      deliveriesPerS: round(report.delivered / measuredS, 1),
      expectedDeliveriesPerS: round(appendedPerS * subscribersPerRun, 1),
      latency: Samples.from(report.latency).summary(),
      commit: commit.summary(),
      wake: Samples.from(report.wake).summary(),
      wakeToClient: Samples.from(report.wakeToClient).summary(),
      lost: report.lost,
      behind: report.behind,
      duplicates: report.duplicates,
      outOfOrder: report.outOfOrder,
      streamsEnded: report.streamsEnded,
      errorFrames: report.errorFrames,
      api,
      bench,
      subscriberThread: { elu: report.elu, loopDelayMs: report.loopDelayMs, clockOffsetMs: subs.clockOffsetMs },
      loadavg,
    };
  } finally {
    await closeSubs();
    // let the API release the runs' tails before the next scenario (bounded)
    await waitUntil(async () => (await apiStats(stack).catch(() => null))?.hub?.subscribers === 0, 10_000, 100);
  }
}

interface IdleResult {
  streams: number;
  runs: number;
  openSeconds: number;
  openedPerS: number;
  rssBeforeKb: number | null;
  rssAfterKb: number | null;
  kbPerStream: number | null;
  heapKbPerStream: number;
  /** API child's own view after the streams were open (GC'd). */
  apiAfter: ApiStats;
  /** API child's event loop while the idle streams were held. */
  apiHold: ApiStats;
  holdSeconds: number;
  heartbeatMs: number;
  allOpen: number;
  ended: number;
  heartbeatsMin: number;
  heartbeatsAvg: number;
  /** The smallest heartbeat count a healthy stream must show over the hold. */
  heartbeatsExpectedMin: number;
  closedAndReleased: boolean;
  loadavg: [number, number, number];
}

/** N idle SubscribeToTask streams against a fresh API child: memory, staying open, heartbeats. */
async function idleScenario(n: number): Promise<IdleResult> {
  const { runs: runCount, idleHoldS, idleHeartbeatMs } = SETTINGS;
  console.log(`[idle ${n}] fresh API child, ${n} idle streams over ${runCount} runs; load ${loadAverage().join(' ')}`);
  const stack = await startStack({ STREAM_POLL_INTERVAL_MS: '2000', SSE_HEARTBEAT_MS: String(idleHeartbeatMs) });
  const clients: SseClient[] = [];
  const closeClients = resources.add(`idle ${n} streams`, () => {
    for (const c of clients) c.close();
  });
  try {
    const runIds = await createRuns(stack, runCount);
    const firstFrames = new Set<SseClient>();
    const open = (i: number): SseClient => {
      const c = new SseClient({
        url: stack.ours.url,
        headers: JSON_RPC_HEADERS,
        body: subscribeRequest(runIds[i % runCount]!),
        agent: stack.agent,
        onFrame: (_f, _at, self) => void firstFrames.add(self),
      });
      clients.push(c);
      return c;
    };

    // warm-up: one stream per run, opened and closed, so the code paths are compiled and the
    // pools warm before the baseline is read
    const warm = Array.from({ length: runCount }, (_, i) => open(i));
    await inBatches(warm.length, 50, (i) => warm[i]!.start());
    await waitUntil(() => warm.every((c) => firstFrames.has(c)), 30_000);
    for (const c of warm) c.close();
    clients.length = 0;
    firstFrames.clear();
    await waitUntil(async () => (await apiStats(stack)).hub?.subscribers === 0, 10_000, 100);
    await sleep(500);

    await apiStats(stack, true);
    const rssBeforeKb = vmRssKb(stack.pid);
    const before = await apiStats(stack, true);

    const t0 = performance.now();
    const batch = Array.from({ length: n }, (_, i) => open(i));
    await inBatches(n, 100, (i) => batch[i]!.start(60_000));
    const allFirst = await waitUntil(() => firstFrames.size === n, 120_000, 50);
    const openSeconds = (performance.now() - t0) / 1000;
    if (!allFirst) throw new Error(`[idle ${n}] only ${firstFrames.size}/${n} streams received their Task snapshot within 120 s`);
    await sleep(1000);
    await apiStats(stack, true);
    const apiAfter = await apiStats(stack, true);
    const rssAfterKb = vmRssKb(stack.pid);

    // hold: every stream must stay open and receive heartbeats
    for (const c of clients) c.comments = 0;
    await apiStats(stack); // reset the window
    await sleep(idleHoldS * 1000);
    const apiHold = await apiStats(stack);
    let min = Number.POSITIVE_INFINITY;
    let sum = 0;
    let stillOpen = 0;
    for (const c of clients) {
      min = Math.min(min, c.comments);
      sum += c.comments;
      if (c.open) stillOpen += 1;
    }
    const loadavg = loadAverage();

    await closeClients();
    const released = await waitUntil(async () => {
      const s = await apiStats(stack).catch(() => null);
      return s?.hub?.subscribers === 0 && s.sseStreams === 0;
    }, 30_000, 200);

    const kb = rssBeforeKb !== null && rssAfterKb !== null ? round((rssAfterKb - rssBeforeKb) / n, 1) : null;
    return {
      streams: n,
      runs: runCount,
      openSeconds: round(openSeconds),
      openedPerS: round(n / openSeconds, 0),
      rssBeforeKb,
      rssAfterKb,
      kbPerStream: kb,
      heapKbPerStream: round((apiAfter.memory.heapUsed - before.memory.heapUsed) / 1024 / n, 1),
      apiAfter,
      apiHold,
      holdSeconds: idleHoldS,
      heartbeatMs: idleHeartbeatMs,
      allOpen: stillOpen,
      ended: n - stillOpen,
      heartbeatsMin: Number.isFinite(min) ? min : 0,
      heartbeatsAvg: round(sum / n, 2),
      heartbeatsExpectedMin: Math.max(1, Math.floor((idleHoldS * 1000) / idleHeartbeatMs) - 1),
      closedAndReleased: released,
      loadavg,
    };
  } finally {
    await closeClients();
    await stack.close();
  }
}

// ------------------------------------------------------------------------------------ output

function fmt(n: number | null | undefined, digits = 2): string {
  return n === null || n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits);
}

function ratio(a: number, b: number | undefined): string {
  return b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? '-' : `${(a / b).toFixed(1)}x`;
}

function printLatency(results: LatencyResult[]): string {
  const raw = results.find((r) => r.scenario === 'redis pub/sub');
  const header = ['scenario', 'subs', 'runs', 'ev/s target', 'ev/s done', 'deliv/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'lost', 'dup', 'ooo', 'p50/redis', 'p99/redis', `p99 ≤ ${TARGET_P99_MS} ms`, 'load 1m'];
  const rows = results.map((r) => [
    r.scenario,
    String(r.subscribers),
    String(r.runs),
    String(r.targetRate),
    r.appendedPerS.toFixed(0),
    r.deliveriesPerS.toFixed(0),
    fmt(r.latency.p50Ms),
    fmt(r.latency.p90Ms),
    fmt(r.latency.p99Ms),
    fmt(r.latency.maxMs, 1),
    String(r.lost),
    String(r.duplicates),
    String(r.outOfOrder),
    r === raw ? '1.0x' : ratio(r.latency.p50Ms, raw?.latency.p50Ms),
    r === raw ? '1.0x' : ratio(r.latency.p99Ms, raw?.latency.p99Ms),
    r === raw ? '(floor)' : r.latency.count === 0 ? '-' : r.latency.p99Ms <= TARGET_P99_MS ? 'yes' : 'MISSED',
    r.loadavg[0].toFixed(2),
  ]);
  const text = formatTable(header, rows);
  console.log(text);
  for (const r of results) {
    const notes = [
      `expected deliv/s ${r.expectedDeliveriesPerS.toFixed(0)} (= ev/s × ${r.subscribersPerRun} subs/run)`,
      r.commit ? `commit (t → emitMessage resolved) p50 ${fmt(r.commit.p50Ms)} / p99 ${fmt(r.commit.p99Ms)} ms` : null,
      r.wake ? `t → wake-up seen p50 ${fmt(r.wake.p50Ms)} / p99 ${fmt(r.wake.p99Ms)} ms` : null,
      r.wakeToClient ? `wake-up → client p50 ${fmt(r.wakeToClient.p50Ms)} / p99 ${fmt(r.wakeToClient.p99Ms)} ms` : null,
      r.api ? `API child: event loop ${Math.round(r.api.elu * 100)}% busy, loop delay p99 ${r.api.loopDelayMs.p99} ms, CPU ${r.api.cpuUserMs + r.api.cpuSystemMs} ms / ${r.api.windowMs} ms` : null,
      `bench ${r.subscriberThread ? 'main thread (appends)' : 'process'}: event loop ${Math.round(r.bench.elu * 100)}% busy, loop delay p99 ${r.bench.loopDelayMs.p99} ms, CPU (all threads) ${r.bench.cpuMs} ms`,
      r.subscriberThread
        ? `bench subscriber thread: event loop ${Math.round(r.subscriberThread.elu * 100)}% busy, loop delay p99 ${r.subscriberThread.loopDelayMs.p99} ms, clock offset ${r.subscriberThread.clockOffsetMs} ms`
        : null,
      r.bench.machineBusy !== null
        ? `machine: ${Math.round(r.bench.machineBusy * 100)}% of ${r.bench.cpus} CPUs busy; CPU ms over ${r.bench.windowMs} ms: ${Object.entries(r.bench.cpuMsBy)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')}`
        : null,
      r.appendedPerS > 0
        ? `CPU per event: ${Object.entries(r.bench.cpuMsBy)
            .filter(([k]) => k !== 'other' && k !== 'postgres:other-dbs')
            .map(([k, v]) => `${k} ${Math.round((v * 1000) / (r.appendedPerS * (r.bench.windowMs / 1000)))} µs`)
            .join(', ')}`
        : null,
      r.behind ? `of the ${r.lost} lost, ${r.behind} not received yet when the drain ended (no gap: behind, not missing)` : null,
      r.skipped || r.appendErrors || r.streamsEnded || r.errorFrames ? `skipped ${r.skipped}, append errors ${r.appendErrors}, streams ended ${r.streamsEnded}, error frames ${r.errorFrames}` : null,
      `load ${r.loadavg.join(' ')}`,
    ].filter(Boolean);
    console.log(`  ${r.scenario}: ${notes.join('; ')}`);
    if (r.api && r.api.elu > 0.9) console.log(`  ${r.scenario}: the API child's event loop is saturated (${Math.round(r.api.elu * 100)}% busy): latency figures include queueing`);
    if (r.bench.elu > 0.9) console.log(`  ${r.scenario}: the bench's append thread is saturated: appends queue before they reach PostgreSQL`);
    if (r.subscriberThread && r.subscriberThread.elu > 0.9) console.log(`  ${r.scenario}: the bench's subscriber thread is saturated: client-side queueing inflates latency`);
  }
  return text;
}

function printIdle(results: IdleResult[]): string {
  const header = ['idle streams', 'open s', 'opened/s', 'RSS before MB', 'RSS after MB', 'KB/stream RSS', 'KB/stream heap', `≤ ${TARGET_KB_PER_IDLE_STREAM} KB`, 'open after hold', 'heartbeats min/avg', 'API loop busy', 'load 1m'];
  const rows = results.map((r) => [
    String(r.streams),
    fmt(r.openSeconds),
    String(r.openedPerS),
    fmt(r.rssBeforeKb === null ? null : r.rssBeforeKb / 1024, 1),
    fmt(r.rssAfterKb === null ? null : r.rssAfterKb / 1024, 1),
    fmt(r.kbPerStream, 1),
    fmt(r.heapKbPerStream, 1),
    r.kbPerStream === null ? '-' : r.kbPerStream <= TARGET_KB_PER_IDLE_STREAM ? 'yes' : 'MISSED',
    `${r.allOpen}/${r.streams}${r.heartbeatsMin >= r.heartbeatsExpectedMin ? '' : ' (!)'}`,
    `${r.heartbeatsMin}/${r.heartbeatsAvg} (≥${r.heartbeatsExpectedMin})`,
    `${Math.round(r.apiHold.elu * 100)}%`,
    r.loadavg[0].toFixed(2),
  ]);
  const text = formatTable(header, rows);
  console.log(text);
  for (const r of results) {
    console.log(
      `  ${r.streams}: held ${r.holdSeconds}s at SSE_HEARTBEAT_MS=${r.heartbeatMs}; API after open: heap ${round(r.apiAfter.memory.heapUsed / 2 ** 20, 1)} MB, ` +
        `external ${round(r.apiAfter.memory.external / 2 ** 20, 1)} MB, SSE streams ${r.apiAfter.sseStreams}, followed runs ${r.apiAfter.hub?.runs}; ` +
        `loop delay during hold p99 ${r.apiHold.loopDelayMs.p99} ms; all closed and released: ${r.closedAndReleased ? 'yes' : 'NO'}; load ${r.loadavg.join(' ')}`,
    );
  }
  return text;
}

// ------------------------------------------------------------------------------------ main

export async function main(): Promise<{ latency: LatencyResult[]; idle: IdleResult[] }> {
  const want = SETTINGS.scenarios;
  console.log(
    `stream-latency bench: node ${process.version}, scenarios ${[...want].join(',')}, ${SETTINGS.rate} events/s over ${SETTINGS.runs} runs, ` +
      `${SETTINGS.durationS}s measured (+${SETTINGS.warmupS}s warm-up); load ${loadAverage().join(' ')}`,
  );
  const latency: LatencyResult[] = [];
  const idle: IdleResult[] = [];

  if (want.has('redis')) {
    console.log(`[redis] raw pub/sub baseline; load ${loadAverage().join(' ')}`);
    latency.push(await redisBaseline());
  }

  const streamScenarios = [
    { key: 'a', subscribers: SETTINGS.subscribers[0] ?? 100 },
    { key: 'b', subscribers: SETTINGS.subscribers[1] ?? 1000 },
  ].filter((s) => want.has(s.key));
  if (streamScenarios.length > 0) {
    // the defaults, explicitly (the child inherits this process's environment otherwise)
    const stack = await startStack({ STREAM_POLL_INTERVAL_MS: '2000', SSE_HEARTBEAT_MS: '15000' });
    try {
      const appender = await startAppender(stack);
      try {
        for (const s of streamScenarios) {
          for (const carried of SETTINGS.wakeups) {
            appender.envelopesInWakeups = carried;
            const label = SETTINGS.wakeups.length > 1 ? `ours (${s.key}, ${carried ? 'envelopes' : 'seq only'})` : `ours (${s.key})`;
            latency.push(await latencyScenario(label, stack, appender, s.subscribers));
          }
        }
      } finally {
        await appender.close();
      }
    } finally {
      await stack.close();
    }
  }

  if (want.has('idle')) {
    for (const n of SETTINGS.idleN) idle.push(await idleScenario(n));
  }

  console.log('');
  if (latency.length > 0) printLatency(latency);
  if (idle.length > 0) {
    console.log('');
    printIdle(idle);
  }

  const out = process.env.BENCH_OUT ?? repoPath(`bench/results/stream-latency-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  if (out) {
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(
      out,
      JSON.stringify(
        {
          at: new Date().toISOString(),
          node: process.version,
          settings: { ...SETTINGS, scenarios: [...SETTINGS.scenarios] },
          targets: { p99Ms: TARGET_P99_MS, kbPerIdleStream: TARGET_KB_PER_IDLE_STREAM },
          latency,
          idle,
        },
        null,
        2,
      ),
    );
    console.log(`\nresults written to ${out}`);
  }
  return { latency, idle };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const fail = async (why: string, code: number): Promise<never> => {
    console.error(why);
    await resources.closeAll();
    process.exit(code);
  };
  const watchdog = setTimeout(() => void fail(`stream-latency bench: gave up after BENCH_TIMEOUT_S=${SETTINGS.timeoutS}s`, 1), SETTINGS.timeoutS * 1000);
  process.once('SIGINT', () => void fail('interrupted', 130));
  process.once('SIGTERM', () => void fail('terminated', 143));
  main().then(
    async (r) => {
      clearTimeout(watchdog);
      await resources.closeAll();
      const broken = r.latency.some((x) => x.lost > 0 || x.duplicates > 0 || x.outOfOrder > 0 || x.appendErrors > 0) || r.idle.some((x) => x.ended > 0);
      // exit explicitly: a stray keep-alive handle must not keep the bench alive
      process.exit(broken ? 1 : 0);
    },
    (err: unknown) => fail(err instanceof Error ? (err.stack ?? err.message) : String(err), 1),
  );
}
