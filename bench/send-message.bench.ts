/**
 * SendMessage throughput / latency benchmark: bare Fastify vs in-memory @a2a-js/sdk vs ours.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/send-message.bench.js      (run from the repo root)
 *
 * Env:
 *   BENCH_DURATION_S   measured seconds per target      (default 10)
 *   BENCH_WARMUP_S     unmeasured warm-up per target    (default 2)
 *   BENCH_CONNECTIONS  concurrent connections           (default 32)
 *   BENCH_TARGETS      comma list of bare,sdk,ours      (default all)
 *   BENCH_ROOT         repo root for child scripts      (default process.cwd())
 *   BENCH_OUT          results JSON path ('' = don't write; default bench/results/send-message-<ts>.json)
 *
 * Every request is a JSON-RPC v1.0 `SendMessage` with a fresh `messageId` and
 * `configuration.returnImmediately: true`, sent with `A2A-Version: 1.0` (the SDK server treats a
 * missing header as 0.3 and rejects it with -32009). Targets run one after the other, each server
 * in its own process, so the load generator (this process) never shares an event loop with them.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startBareFastify } from './baselines/bare-fastify.js';
import { startSdkInMemory } from './baselines/sdk-in-memory.js';
import { repoPath } from './lib/child-server.js';
import { startOursProcesses } from './ours/ours.js';
import { printTable, runLoad, type JsonBody, type LoadResult } from './lib/load.js';
import { envNumber } from './lib/stats.js';

/** One thing to benchmark. `url` is the endpoint the SendMessage body is POSTed to. */
export interface BenchTarget {
  name: string;
  url: string;
  /** Extra/overriding headers (e.g. Authorization). Merged over the A2A defaults. */
  headers?: Record<string, string>;
  /** Override the request body (default: `sendMessageBody()`). Called per request. */
  bodyFactory?: () => JsonBody;
  /** Override the per-response success check (default: `isJsonRpcSuccess`). */
  verifyBody?: (body: string) => boolean;
  close(): Promise<void>;
}

/** Our service: API and worker in child processes over a fresh database (bench/ours/ours.ts). */
export async function startOurs(): Promise<BenchTarget | null> {
  const ours = await startOursProcesses();
  return { name: 'ours', url: ours.url, close: ours.close };
}

export const A2A_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json',
  'a2a-version': '1.0',
};

let rpcId = 0;
/** JSON-RPC v1.0 SendMessage with a fresh messageId, returnImmediately: true. */
export function sendMessageBody(): JsonBody {
  rpcId += 1;
  return {
    jsonrpc: '2.0',
    id: rpcId,
    method: 'SendMessage',
    params: {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from bench' }] },
      configuration: { returnImmediately: true },
    },
  };
}

/** Cheap per-response check: a JSON-RPC success (has `result`, no `error` member). JSON-RPC errors are HTTP 200. */
export function isJsonRpcSuccess(body: string): boolean {
  return /"result"\s*:/.test(body) && !/"error"\s*:/.test(body);
}

/** One request before the load: fail fast (and readably) if the target answers with an error. */
async function smokeCheck(target: BenchTarget): Promise<void> {
  const body = (target.bodyFactory ?? sendMessageBody)();
  const res = await fetch(target.url, {
    method: 'POST',
    headers: { ...A2A_HEADERS, ...target.headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  const ok = (target.verifyBody ?? isJsonRpcSuccess)(text);
  if (!res.ok || !ok) {
    throw new Error(`${target.name}: smoke SendMessage failed (HTTP ${res.status}): ${text.slice(0, 500)}`);
  }
  console.log(`[${target.name}] smoke OK, ${Buffer.byteLength(text)} B response: ${text.slice(0, 160)}…`);
}

interface Starter {
  key: 'bare' | 'sdk' | 'ours';
  start(): Promise<BenchTarget | null>;
}

const STARTERS: Starter[] = [
  { key: 'bare', start: async () => ({ name: 'bare', ...(await startBareFastify()) }) },
  {
    key: 'sdk',
    start: async () => {
      const s = await startSdkInMemory();
      return { name: 'sdk', url: s.url, close: s.close };
    },
  },
  { key: 'ours', start: startOurs },
];

export async function main(): Promise<LoadResult[]> {
  const durationSeconds = envNumber('BENCH_DURATION_S', 10);
  const warmupSeconds = envNumber('BENCH_WARMUP_S', 2);
  const connections = envNumber('BENCH_CONNECTIONS', 32);
  const wanted = new Set(
    (process.env.BENCH_TARGETS ?? 'bare,sdk,ours')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

  console.log(
    `SendMessage bench: ${durationSeconds}s measured (+${warmupSeconds}s warm-up) per target, ` +
      `${connections} connections, node ${process.version}, targets=${[...wanted].join(',')}`,
  );

  const results: LoadResult[] = [];
  for (const starter of STARTERS) {
    if (!wanted.has(starter.key)) continue;
    const target = await starter.start();
    if (!target) {
      console.log(`[${starter.key}] not configured (startOurs() returned null), skipped`);
      continue;
    }
    try {
      await smokeCheck(target);
      console.log(`[${target.name}] loading ${target.url} …`);
      const result = await runLoad({
        name: target.name,
        url: target.url,
        method: 'POST',
        headers: { ...A2A_HEADERS, ...target.headers },
        bodyFactory: target.bodyFactory ?? sendMessageBody,
        verifyBody: target.verifyBody ?? isJsonRpcSuccess,
        connections,
        durationSeconds,
        warmupSeconds,
      });
      results.push(result);
      console.log(`[${target.name}] ${result.rps} rps, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`);
    } finally {
      await target.close();
    }
  }

  console.log('');
  const baselines = ['sdk', 'bare'].filter((b) => results.some((r) => r.name === b));
  printTable(results, baselines);

  const by = (n: string): LoadResult | undefined => results.find((r) => r.name === n);
  const ratio = (a: LoadResult, b: LoadResult): string =>
    `rps ${(a.rps / b.rps).toFixed(2)}x, p50 ${(a.p50Ms / b.p50Ms).toFixed(2)}x, p99 ${(a.p99Ms / b.p99Ms).toFixed(2)}x`;
  const ours = by('ours');
  const sdk = by('sdk');
  const bare = by('bare');
  console.log('');
  if (sdk && bare) console.log(`sdk/bare : ${ratio(sdk, bare)}`);
  if (ours && sdk) console.log(`ours/sdk : ${ratio(ours, sdk)}`);
  if (ours && bare) console.log(`ours/bare: ${ratio(ours, bare)}`);

  const out =
    process.env.BENCH_OUT ??
    repoPath(`bench/results/send-message-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  if (out) {
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(
      out,
      JSON.stringify({ at: new Date().toISOString(), node: process.version, durationSeconds, warmupSeconds, connections, results }, null, 2),
    );
    console.log(`\nresults written to ${out}`);
  }
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().then(
    (results) => {
      const failed = results.some((r) => r.errors > 0 || r.non2xx > 0 || r.mismatches > 0);
      process.exitCode = failed ? 1 : 0;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
