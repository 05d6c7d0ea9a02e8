/**
 * SendMessage throughput / latency benchmark, every server in its own child process, measured in
 * one run with one load generator (this process):
 *
 * | target | what |
 * |---|---|
 * | `bare` | bare Fastify JSON route (the HTTP + JSON floor) |
 * | `fastify+pg` | bare Fastify + one prepared pg statement inserting a task row and an event row |
 * | `sdk-mem` | `@a2a-js/sdk` 1.3 `DefaultRequestHandler` + `InMemoryTaskStore`, echo executor |
 * | `sdk-pg` | `@a2a-js/sdk` 1.3 with its `DatabaseTaskStore` on PostgreSQL |
 * | `ours` | our API + one worker process (durable accept, outbox, BullMQ, worker executes) |
 * | `proxy` | ours with the `a2a` runtime in front of an in-memory SDK upstream (`sdk-mem`'s server) |
 * | `ours-grpc` (`grpc`) | ours, SendMessage over the gRPC binding (GRPC_PORT) instead of JSON-RPC |
 * | `sdk-grpc` (`sdkgrpc`) | `@a2a-js/sdk/server/grpc` + `InMemoryTaskStore`, echo executor |
 *
 * The gRPC targets are driven by `lib/grpc-load.ts` (unary calls, BENCH_CONNECTIONS in flight on
 * one HTTP/2 channel) instead of autocannon; their rows are compared with `sdk-grpc`.
 *
 * The A2A targets run in two modes: `returnImmediately: true` (durable accept) and blocking (the
 * answer is the completed task). For every target it prints req/s, p50/p99, ratios, and CPU ms per
 * request of each process group (server, worker, postgres, redis — from /proc, over the measured
 * window; postgres and redis are machine-wide, so other load on the machine shows there).
 *
 *   npm run bench          (BENCH_DURATION_S, BENCH_WARMUP_S, BENCH_CONNECTIONS, BENCH_TARGETS,
 *                           BENCH_MODES=immediate,blocking, BENCH_OUT, BENCH_PROFILE_DIR)
 *
 * Requests carry `A2A-Version: 1.0` (the SDK server treats a missing header as 0.3 and rejects it).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startBareFastify } from './baselines/bare-fastify.js';
import { startSdkInMemory } from './baselines/sdk-in-memory.js';
import { startSdkGrpc } from './baselines/sdk-grpc.js';
import { runGrpcLoad } from './lib/grpc-load.js';
import { SendMessageRequest, TaskState } from '@a2a-js/sdk';
import { startFastifyPg, startSdkPostgres } from './baselines/sdk-postgres.js';
import { CpuWindow, pidsByName } from './lib/proc-cpu.js';
import { repoPath } from './lib/child-server.js';
import { startOursProcesses } from './ours/ours.js';
import { printTable, runLoad, type JsonBody, type LoadResult } from './lib/load.js';
import { envNumber } from './lib/stats.js';

/** One thing to benchmark. `url` is the endpoint the SendMessage body is POSTed to. */
export interface BenchTarget {
  name: string;
  url: string;
  /** Pids of the server's own processes (CPU accounting). */
  pids: Record<string, number>;
  headers?: Record<string, string>;
  /** Set for a gRPC target: SendMessage is a unary gRPC call to `address` with this `tenant` (`url` is unused). */
  grpc?: { address: string; tenant: string };
  /** Wait until the work a measured load left behind is done (so the next mode starts clean). */
  drain?(): Promise<void>;
  close(): Promise<void>;
}

export const A2A_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json',
  'a2a-version': '1.0',
};

let rpcId = 0;
/** JSON-RPC v1.0 SendMessage with a fresh messageId; `blocking` waits for the completed task. */
export function sendMessageBody(blocking = false): JsonBody {
  rpcId += 1;
  return {
    jsonrpc: '2.0',
    id: rpcId,
    method: 'SendMessage',
    params: {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from bench' }] },
      ...(blocking ? {} : { configuration: { returnImmediately: true } }),
    },
  };
}

/** Cheap per-response check: a JSON-RPC success (has `result`, no `error` member). JSON-RPC errors are HTTP 200. */
export function isJsonRpcSuccess(body: string): boolean {
  return /"result"\s*:/.test(body) && !/"error"\s*:/.test(body);
}

/** Blocking answers must be the completed task (so errors or timeouts are never measured as success). */
export function isCompletedTask(body: string): boolean {
  return isJsonRpcSuccess(body) && body.includes('TASK_STATE_COMPLETED');
}

/** gRPC SendMessageRequest (the SDK's proto objects) with a fresh messageId. */
export function grpcSendMessage(tenant: string, blocking = false): unknown {
  return SendMessageRequest.fromJSON({
    tenant,
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from bench' }] },
    ...(blocking ? {} : { configuration: { returnImmediately: true } }),
  });
}

/** A gRPC SendMessageResponse that is a task (blocking: a completed one). */
function grpcVerifier(blocking: boolean): (res: unknown) => boolean {
  return (res) => {
    const payload = (res as { payload?: { $case?: string; value?: { status?: { state?: number } } } } | undefined)?.payload;
    if (payload?.$case !== 'task') return false;
    return !blocking || payload.value?.status?.state === TaskState.TASK_STATE_COMPLETED;
  };
}

async function smokeCheck(target: BenchTarget, blocking: boolean): Promise<void> {
  if (target.grpc) {
    const r = await runGrpcLoad({ name: 'smoke', address: target.grpc.address, requestFactory: () => grpcSendMessage(target.grpc!.tenant, blocking), verify: grpcVerifier(blocking), metadata: { 'a2a-version': '1.0' }, concurrency: 1, durationSeconds: 30, maxCalls: 1 });
    if (r.requests < 1 || r.mismatches > 0 || r.errors > 0 || r.non2xx > 0) throw new Error(`${target.name}: smoke SendMessage over gRPC failed: ${JSON.stringify(r.statusCodes)}, ${r.mismatches} bad answers`);
    console.log(`[${target.name}${blocking ? ' blocking' : ''}] smoke OK (gRPC ${target.grpc.address}, tenant '${target.grpc.tenant}')`);
    return;
  }
  const res = await fetch(target.url, { method: 'POST', headers: { ...A2A_HEADERS, ...target.headers }, body: JSON.stringify(sendMessageBody(blocking)) });
  const text = await res.text();
  const ok = (blocking ? isCompletedTask : isJsonRpcSuccess)(text);
  if (!res.ok || !ok) throw new Error(`${target.name}: smoke SendMessage failed (HTTP ${res.status}): ${text.slice(0, 500)}`);
  console.log(`[${target.name}${blocking ? ' blocking' : ''}] smoke OK, ${Buffer.byteLength(text)} B: ${text.slice(0, 120)}…`);
}

interface Starter {
  key: 'bare' | 'lean' | 'sdk' | 'sdkpg' | 'ours' | 'proxy' | 'grpc' | 'sdkgrpc';
  /** Modes this target supports (bare servers only answer a submitted task). */
  modes: Array<'immediate' | 'blocking'>;
  start(): Promise<BenchTarget>;
}

const STARTERS: Starter[] = [
  {
    key: 'bare',
    modes: ['immediate'],
    start: async () => {
      const s = await startBareFastify();
      return { name: 'bare', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'lean',
    modes: ['immediate'],
    start: async () => {
      const s = await startFastifyPg();
      return { name: 'fastify+pg', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'sdk',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const s = await startSdkInMemory();
      return { name: 'sdk-mem', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'sdkpg',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const s = await startSdkPostgres();
      return { name: 'sdk-pg', url: s.url, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    key: 'ours',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const o = await startOursProcesses();
      return { name: 'ours', url: o.url, pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0 }, drain: () => o.drain(), close: o.close };
    },
  },
  {
    key: 'sdkgrpc',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const s = await startSdkGrpc();
      return { name: 'sdk-grpc', url: '', grpc: { address: s.address, tenant: '' }, pids: { server: s.pid ?? 0 }, close: s.close };
    },
  },
  {
    // our API with the gRPC binding on (GRPC_PORT=0: a free port, read back from the agent card)
    key: 'grpc',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const o = await startOursProcesses({ transports: ['JSONRPC', 'GRPC'], apiEnv: { GRPC_PORT: '0' } });
      const card = (await (await fetch(`${o.url}/.well-known/agent-card.json`)).json()) as { supportedInterfaces: Array<{ url: string; protocolBinding: string; tenant?: string }> };
      const iface = card.supportedInterfaces.find((i) => i.protocolBinding === 'GRPC');
      if (!iface) {
        await o.close();
        throw new Error('ours-grpc: the agent card lists no GRPC interface');
      }
      return { name: 'ours-grpc', url: '', grpc: { address: iface.url, tenant: iface.tenant ?? '' }, pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0 }, drain: () => o.drain(), close: o.close };
    },
  },
  {
    // the price of durability: the same in-memory SDK agent, called through us (a2a runtime)
    key: 'proxy',
    modes: ['immediate', 'blocking'],
    start: async () => {
      const upstream = await startSdkInMemory();
      const o = await startOursProcesses({ runtime: { kind: 'a2a', cardUrl: upstream.cardUrl }, env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8' } });
      return {
        name: 'proxy',
        url: o.url,
        pids: { server: o.api.pid ?? 0, worker: o.worker?.pid ?? 0, upstream: upstream.pid ?? 0 },
        drain: () => o.drain(),
        close: async () => {
          await o.close();
          await upstream.close();
        },
      };
    },
  },
];

interface Measured extends LoadResult {
  /** CPU ms per request by process group (server, worker, postgres, redis). */
  cpuMsPerRequest: Record<string, number>;
}

const fmt = (n: number | undefined, digits = 2) => (n === undefined ? '–' : n.toFixed(digits));

export async function main(): Promise<Measured[]> {
  const durationSeconds = envNumber('BENCH_DURATION_S', 10);
  const warmupSeconds = envNumber('BENCH_WARMUP_S', 2);
  const connections = envNumber('BENCH_CONNECTIONS', 32);
  const list = (v: string | undefined, d: string) => new Set((v ?? d).split(',').map((x) => x.trim()).filter(Boolean));
  const wanted = list(process.env.BENCH_TARGETS, 'bare,lean,sdk,sdkpg,ours,proxy,grpc,sdkgrpc');
  const modes = list(process.env.BENCH_MODES, 'immediate,blocking');

  console.log(
    `SendMessage bench: ${durationSeconds}s measured (+${warmupSeconds}s warm-up) per target and mode, ` +
      `${connections} connections, node ${process.version}, ${cpus().length} CPUs, targets=${[...wanted].join(',')}, modes=${[...modes].join(',')}`,
  );

  const results: Measured[] = [];
  for (const starter of STARTERS) {
    if (!wanted.has(starter.key)) continue;
    const target = await starter.start();
    try {
      for (const mode of starter.modes) {
        if (!modes.has(mode)) continue;
        const blocking = mode === 'blocking';
        const name = blocking ? `${target.name} blocking` : target.name;
        await smokeCheck(target, blocking);
        const load = {
          name,
          url: target.url,
          method: 'POST' as const,
          headers: { ...A2A_HEADERS, ...target.headers },
          bodyFactory: () => sendMessageBody(blocking),
          verifyBody: blocking ? isCompletedTask : isJsonRpcSuccess,
          connections,
        };
        if (warmupSeconds > 0) {
          await (target.grpc
            ? runGrpcLoad({ name, address: target.grpc.address, requestFactory: () => grpcSendMessage(target.grpc!.tenant, blocking), verify: grpcVerifier(blocking), metadata: { 'a2a-version': '1.0' }, concurrency: connections, durationSeconds: warmupSeconds })
            : runLoad({ ...load, durationSeconds: warmupSeconds }));
          await target.drain?.();
        }
        const runOnce = (seconds: number) =>
          target.grpc
            ? runGrpcLoad({ name, address: target.grpc.address, requestFactory: () => grpcSendMessage(target.grpc!.tenant, blocking), verify: grpcVerifier(blocking), metadata: { 'a2a-version': '1.0' }, concurrency: connections, durationSeconds: seconds })
            : runLoad({ ...load, durationSeconds: seconds });
        const cpu = new CpuWindow({
          ...Object.fromEntries(Object.entries(target.pids).map(([k, pid]) => [k, () => (pid ? [pid] : [])])),
          postgres: () => pidsByName('postgres'),
          redis: () => pidsByName('redis-server'),
        });
        cpu.start();
        const result = await runOnce(durationSeconds);
        const used = cpu.stop();
        const cpuMsPerRequest = Object.fromEntries(Object.entries(used).map(([k, ms]) => [k, result.requests > 0 ? ms / result.requests : 0]));
        results.push({ ...result, cpuMsPerRequest });
        console.log(`[${name}] ${result.rps} rps, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, CPU ms/req ${JSON.stringify(Object.fromEntries(Object.entries(cpuMsPerRequest).map(([k, v]) => [k, Number(v.toFixed(3))])))}`);
        // accepted-but-not-yet-executed runs would slow the next mode down: let the worker finish them
        await target.drain?.();
      }
    } finally {
      await target.close();
    }
  }

  console.log('');
  printTable(results, ['sdk-mem', 'sdk-pg', 'sdk-grpc'].filter((b) => results.some((r) => r.name === b)));

  console.log('\nCPU ms per request (measured window; postgres and redis are machine-wide):');
  const groups = ['server', 'worker', 'postgres', 'redis'];
  console.log(['target'.padEnd(20), ...groups.map((g) => g.padStart(9)), 'total'.padStart(9)].join(' '));
  for (const r of results) {
    const total = Object.values(r.cpuMsPerRequest).reduce((a, b) => a + b, 0);
    console.log([r.name.padEnd(20), ...groups.map((g) => fmt(r.cpuMsPerRequest[g], 3).padStart(9)), fmt(total, 3).padStart(9)].join(' '));
  }

  const by = (n: string) => results.find((r) => r.name === n);
  const targets: Array<[string, string, string, number]> = [
    ['returnImmediately vs in-memory SDK', 'ours', 'sdk-mem', 1.0],
    ['blocking vs in-memory SDK', 'ours blocking', 'sdk-mem blocking', 0.5],
    ['blocking vs SDK on Postgres', 'ours blocking', 'sdk-pg blocking', 1.2],
  ];
  // through us vs calling the same upstream directly: what durability costs (no target, a figure)
  for (const [a, b] of [['proxy blocking', 'sdk-mem blocking'], ['proxy', 'sdk-mem']] as const) {
    const ra = by(a);
    const rb = by(b);
    if (ra && rb) console.log(`  price of durability: ${`${a} / ${b}`.padEnd(34)} ${(ra.rps / rb.rps).toFixed(2)}x req/s, p50 ${fmt(ra.p50Ms, 1)} vs ${fmt(rb.p50Ms, 1)} ms`);
  }
  console.log('\nTargets (req/s ratio):');
  for (const [label, a, b, want] of targets) {
    const ra = by(a);
    const rb = by(b);
    if (!ra || !rb) continue;
    const ratio = ra.rps / rb.rps;
    console.log(`  ${label.padEnd(38)} ${ratio.toFixed(2)}x (target >= ${want.toFixed(1)}x): ${ratio >= want ? 'MET' : `NOT MET (${((want - ratio) / want * 100).toFixed(0)}% short)`}`);
  }
  for (const [a, b] of [['ours', 'fastify+pg'], ['ours', 'sdk-pg'], ['ours', 'bare'], ['ours-grpc', 'sdk-grpc'], ['ours-grpc blocking', 'sdk-grpc blocking'], ['ours-grpc', 'ours'], ['ours-grpc blocking', 'ours blocking']] as const) {
    const ra = by(a);
    const rb = by(b);
    if (ra && rb) console.log(`  ${`${a} / ${b}`.padEnd(38)} ${(ra.rps / rb.rps).toFixed(2)}x`);
  }

  const out = process.env.BENCH_OUT ?? repoPath(`bench/results/send-message-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  if (out) {
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, cpus: cpus().length, durationSeconds, warmupSeconds, connections, results }, null, 2));
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
