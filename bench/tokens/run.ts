/**
 * `npm run bench:tokens`: the LLM token-streaming workload. N concurrent clients each loop
 * `SendStreamingMessage` (JSON-RPC v1.0 over SSE, `A2A-Version: 1.0`), every task streaming K
 * artifact chunks I ms apart, against (targets.ts) the SDK in memory (`sdk`), ours in front of an
 * NDJSON backend (`http`), ours in front of an SDK agent (`a2a`) and that agent directly
 * (`direct`), all in one run; plus the `slow` scenario (slow.ts). Servers on CPU 0, the load
 * generator (this process and its thread) on CPU 1. Prints per run, then medians, ratios against
 * `sdk` and the goals as PASS / MISS; exits 0 unless the bench itself breaks. See bench/README.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoPath } from '../lib/child-server.js';
import { envNumber, loadAverage } from '../lib/stats.js';
import { measureStreams, type StreamRow, type StreamsOptions } from './measure.js';
import { goals, medians, printSlow, printTables, runLine } from './report.js';
import { runSlow, type SlowResult } from './slow.js';
import { LOAD_CPU, pin, sdkTarget, startA2aTarget, startHttpTarget, startSdkAgent, startWorld, type Target, type World } from './targets.js';

const list = (raw: string | undefined, fallback: string) => (raw && raw.trim() ? raw : fallback).split(',').map((s) => s.trim()).filter(Boolean);

function appEnv(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of list(raw, '')) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new Error(`BENCH_APP_ENV: '${kv}' is not K=V`);
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

const settings = {
  streams: list(process.env.BENCH_STREAMS, '100,300').map(Number),
  chunks: envNumber('BENCH_CHUNKS', 50),
  intervalMs: envNumber('BENCH_INTERVAL_MS', 20),
  durationS: envNumber('BENCH_DURATION_S', 15),
  warmupS: envNumber('BENCH_WARMUP_S', 3),
  drainS: envNumber('BENCH_DRAIN_TIMEOUT_S', 120),
  repeat: Math.max(1, envNumber('BENCH_REPEAT', 1)),
  targets: list(process.env.BENCH_TARGETS, 'sdk,http,a2a,direct'),
  scenarios: list(process.env.BENCH_SCENARIOS, 'streams,slow'),
  slow: {
    executions: envNumber('BENCH_SLOW_EXECUTIONS', 2000),
    chunks: envNumber('BENCH_SLOW_CHUNKS', 30),
    intervalMs: envNumber('BENCH_SLOW_INTERVAL_MS', 1000),
    settleS: envNumber('BENCH_SLOW_SETTLE_S', 10),
  },
  appEnv: appEnv(process.env.BENCH_APP_ENV),
};

/** The targets wanted for one streams count, in order, each measured then closed. */
async function streamsRound(world: World, o: StreamsOptions, repeat: number, rows: StreamRow[]): Promise<void> {
  const want = (t: string) => settings.targets.includes(t);
  const measure = async (t: Target) => {
    try {
      const row = await measureStreams(world, t, o);
      rows.push(row);
      console.log(runLine(row, repeat));
    } finally {
      await t.close();
    }
  };
  if (want('sdk')) {
    const agent = await startSdkAgent();
    await measure(sdkTarget('sdk', agent, agent.close));
  }
  if (want('http')) await measure(await startHttpTarget(world));
  if (want('a2a') || want('direct')) {
    const upstream = await startSdkAgent();
    try {
      if (want('a2a')) await measure(await startA2aTarget(world, upstream));
      if (want('direct')) await measure(sdkTarget('direct', upstream, async () => undefined));
    } finally {
      await upstream.close();
    }
  }
}

async function main(): Promise<void> {
  pin([process.pid], LOAD_CPU);
  console.log(`bench:tokens  ${JSON.stringify({ ...settings, appEnv: settings.appEnv })}`);
  console.log(`load average at start: ${loadAverage().join(' ')}`);
  const { ConfigSchema } = await import('#libs/config');
  const d = (k: 'WORKER_CONCURRENCY' | 'DATABASE_POOL_MAX' | 'MAX_STREAMS_PER_CALLER') => ConfigSchema.shape[k].parse(undefined);
  console.log(
    `ours at the shipped defaults (WORKER_CONCURRENCY ${d('WORKER_CONCURRENCY')}, EXECUTION_MAX_PER_AGENT half of it, DATABASE_POOL_MAX ${d('DATABASE_POOL_MAX')}) ` +
      `except MAX_STREAMS_PER_CALLER 1000000 (default ${d('MAX_STREAMS_PER_CALLER')}) and the request rate limits out of reach${Object.keys(settings.appEnv).length ? `; BENCH_APP_ENV: ${JSON.stringify(settings.appEnv)}` : ''}`,
  );
  const world = await startWorld(settings.appEnv);
  const rows: StreamRow[] = [];
  let slow: SlowResult | null = null;
  try {
    for (let rep = 1; rep <= settings.repeat; rep++) {
      if (!settings.scenarios.includes('streams')) break;
      console.log(`\n-- repeat ${rep}/${settings.repeat}: streams (K=${settings.chunks} chunks, I=${settings.intervalMs} ms, ${settings.warmupS}+${settings.durationS} s)`);
      for (const n of settings.streams) await streamsRound(world, { streams: n, chunks: settings.chunks, intervalMs: settings.intervalMs, warmupS: settings.warmupS, durationS: settings.durationS, drainS: settings.drainS }, rep, rows);
    }
    if (settings.scenarios.includes('slow')) {
      console.log(`\n-- slow: ${settings.slow.executions} executions, ${settings.slow.chunks} chunks ${settings.slow.intervalMs} ms apart, on ours http`);
      slow = await runSlow(world, settings.slow, (l) => console.log(`  ${l}`));
    }
  } finally {
    await world.close();
  }
  const med = medians(rows);
  printTables(med);
  if (slow) printSlow(slow);
  const verdicts = goals(med, slow);
  console.log(`\nGoals (medians of ${settings.repeat} run(s); load average at the end: ${loadAverage().join(' ')}):`);
  for (const g of verdicts) console.log(`  ${g}`);
  const out = process.env.BENCH_OUT ?? `bench/results/tokens-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
  if (out) {
    const file = repoPath(out);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ settings, results: med, runs: rows, slow, goals: verdicts }, null, 2));
    console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(2);
  },
);
