/**
 * One measured streams run of one target: the load thread (clients.ts) for warm-up + duration;
 * over the measured window [warm-up end, + duration): chunks delivered, latencies, CPU per process
 * group (/proc), SQL statements (pg_stat_statements) and Redis commands (INFO commandstats) of
 * ours, RSS of ours' API and worker at the window's end; then the load stops and every open task
 * is followed to its end (at most `drainS`), for the integrity counts.
 */
import { CpuWindow } from '../lib/proc-cpu.js';
import { Samples, loadAverage, nowMs, round, vmRssKb } from '../lib/stats.js';
import { ClientsThread } from './clients.js';
import type { Target, World } from './targets.js';

export interface StreamsOptions {
  streams: number;
  chunks: number;
  intervalMs: number;
  warmupS: number;
  durationS: number;
  /** Longest wait (s) for the open tasks after the window. */
  drainS: number;
}

/** One run's figures; times in ms, CPU in ms per 1,000 chunks, RSS in KB. */
export interface StreamRow {
  target: string;
  streams: number;
  chunksPerS: number;
  tasksPerS: number;
  latencyMs: { p50: number; p99: number; max: number };
  firstChunkMs: { p50: number; p99: number };
  /** CPU ms per 1,000 chunks delivered in the window, per group (api = the server for sdk/direct) and `all`. */
  cpuMsPer1k: Record<string, number>;
  /** Null where not counted (not ours, or pg_stat_statements missing). */
  sqlPerChunk: number | null;
  redisPerChunk: number | null;
  rssKb: { api: number | null; worker: number | null };
  integrity: { lost: number; duplicated: number; outOfOrder: number; notCompleted: number; unfinished: number };
  refused: { http: number; rpc: number; broken: number };
  tasks: number;
  /** Load average (1, 5, 15 min) at the window's end. */
  loadAvg: [number, number, number];
  sqlTop?: Array<{ query: string; calls: number }>;
  /** Where PostgreSQL's time went: the statements that took the most (execution + planning, ms in the window). */
  sqlTopByTime?: Array<{ query: string; calls: number; ms: number }>;
  redisByCommand?: Record<string, number>;
  errorSamples: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function measureStreams(world: World, target: Target, o: StreamsOptions): Promise<StreamRow> {
  const clients = await ClientsThread.start({ url: target.url, streams: o.streams, chunks: o.chunks, intervalMs: o.intervalMs, taskTimeoutMs: 120_000 });
  await sleep(o.warmupS * 1000);
  const cpu = new CpuWindow(target.groups);
  if (target.ours) {
    await world.sql?.reset();
    await world.redisCounter.mark();
  }
  cpu.start();
  const start = nowMs();
  const end = start + o.durationS * 1000;
  clients.setWindow(start, end);
  await sleep(end - nowMs());
  const cpuMs = cpu.stop();
  const sql = target.ours ? await world.sql?.read(['aaas_bench']) : null;
  const redis = target.ours ? await world.redisCounter.read() : null;
  const rssKb = { api: vmRssKb(target.ours ? target.ours.api.pid : target.groups.api!()[0]), worker: vmRssKb(target.ours?.worker?.pid) };
  const loadAvg = loadAverage();
  const r = await clients.stop(o.drainS * 1000);
  const chunks = r.chunksInWindow;
  const per1k = (ms: number) => (chunks > 0 ? round((ms * 1000) / chunks, 1) : Number.NaN);
  const cpuMsPer1k: Record<string, number> = {};
  let all = 0;
  for (const [g, ms] of Object.entries(cpuMs)) {
    cpuMsPer1k[g] = per1k(ms);
    all += ms;
  }
  cpuMsPer1k.all = per1k(all);
  const lat = Samples.from(r.latency).summary();
  const first = Samples.from(r.firstChunk).summary();
  return {
    target: target.name,
    streams: o.streams,
    chunksPerS: round(chunks / o.durationS, 1),
    tasksPerS: round(r.tasksInWindow / o.durationS, 1),
    latencyMs: { p50: lat.p50Ms, p99: lat.p99Ms, max: lat.maxMs },
    firstChunkMs: { p50: first.p50Ms, p99: first.p99Ms },
    cpuMsPer1k,
    sqlPerChunk: sql && chunks > 0 ? round(sql.calls / chunks, 2) : null,
    redisPerChunk: redis && chunks > 0 ? round(redis.calls / chunks, 2) : null,
    rssKb,
    integrity: { lost: r.lost, duplicated: r.duplicated, outOfOrder: r.outOfOrder, notCompleted: r.notCompleted, unfinished: r.unfinished },
    refused: { http: r.refusedHttp, rpc: r.rpcErrors, broken: r.brokenStreams },
    tasks: r.tasks,
    loadAvg,
    ...(sql && { sqlTop: sql.top.slice(0, 8).map((s) => ({ query: s.query, calls: s.calls })) }),
    ...(sql && { sqlTopByTime: sql.topByTime.slice(0, 8).map((s) => ({ query: s.query, calls: s.calls, ms: round(s.execMs + s.planMs, 1) })) }),
    ...(redis && { redisByCommand: redis.byCommand }),
    errorSamples: r.errorSamples,
  };
}
