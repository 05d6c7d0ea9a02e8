import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { testEnv } from './env.js';

/**
 * The compiled API (dist/apps/api/src/main.js, built by `npm test`'s set-up) in a process of its
 * own, for tests that measure it (its RSS, its /healthz latency) while they stress it; nothing
 * else of the test shares its memory or its event loop.
 */
export const API_BUILT = existsSync('dist/apps/api/src/main.js');

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface ApiProcess {
  child: ChildProcess;
  baseUrl: string;
  /** `http://127.0.0.1:<GRPC_PORT>` */
  grpcUrl: string;
  grpcPort: number;
  adminKey: string;
  /** Resident set size of the process now (bytes), from /proc. */
  rss(): number;
  /** One GET /healthz: its latency (ms) and status. */
  healthz(): Promise<{ ms: number; status: number }>;
  stop(): Promise<void>;
}

/** Start the API with a gRPC listener, `env` over the test environment (`nodeArgs` before the script); resolves once /healthz answers. */
export async function startApiProcess(env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<ApiProcess> {
  const [port, grpcPort] = [await freePort(), await freePort()];
  const adminKey = `aaas_${alnum(8)}_${alnum(32)}`;
  const child = spawn(process.execPath, [...nodeArgs, 'dist/apps/api/src/main.js'], {
    env: {
      ...process.env,
      ...testEnv(),
      LOG_LEVEL: 'error',
      REDIS_PREFIX: `aaas-test-${randomUUID().slice(0, 8)}`,
      BOOTSTRAP_ORG_SLUG: `org-${randomUUID().slice(0, 8)}`,
      BOOTSTRAP_ADMIN_KEY: adminKey,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const healthz = async () => {
    const t0 = performance.now();
    const res = await fetch(`${baseUrl}/healthz`);
    await res.arrayBuffer();
    return { ms: performance.now() - t0, status: res.status };
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the API exited with ${child.exitCode}`);
    try {
      if ((await healthz()).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('the API did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    child,
    baseUrl,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    grpcPort,
    adminKey,
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) * 1024,
    healthz,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }),
  };
}

/**
 * Polls `url` every `everyMs` from a process of its own (so the attacker's event loop, busy in the
 * test's process, does not delay the probe) and prints each answer's latency (ms) or `fail`.
 */
const PROBE = `
const [url, every] = process.argv.slice(1);
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true });
(function next() {
  const t0 = performance.now();
  const req = http.get(url, { agent, timeout: 5000 }, (res) => {
    res.resume();
    res.on('end', () => { process.stdout.write((res.statusCode === 200 ? (performance.now() - t0).toFixed(2) : 'fail') + '\\n'); setTimeout(next, Number(every)); });
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', () => { process.stdout.write('fail\\n'); setTimeout(next, Number(every)); });
})();
`;

/**
 * Watch a process while `attack` runs: /healthz every `everyMs` from a probe process of its own
 * (latencies; `failedHealthz` counts errors and non-200s), RSS every `everyMs` (peak). Returns what
 * the attack returned and the figures. The attack runs in this (the test's) process at the lowest
 * CPU priority (nice 19; the API and the probe keep theirs): a real attacker is on another
 * machine, and on a small one its writes would otherwise be measured as the API's latency.
 */
export async function measureDuring<T>(api: ApiProcess, attack: () => Promise<T>, everyMs = 50): Promise<{ result: T; healthzMs: number[]; failedHealthz: number; peakRss: number }> {
  const healthzMs: number[] = [];
  let failedHealthz = 0;
  let peakRss = api.rss();
  const probe = spawn(process.execPath, ['-e', PROBE, `${api.baseUrl}/healthz`, String(everyMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let buffered = '';
  probe.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      if (line === 'fail') failedHealthz++;
      else healthzMs.push(Number(line));
    }
  });
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, api.rss());
  }, everyMs);
  // the probe's first answer: it is polling before the attack starts
  while (healthzMs.length + failedHealthz === 0) await new Promise((r) => setTimeout(r, 10));
  const priority = os.getPriority();
  os.setPriority(19);
  try {
    const result = await attack();
    peakRss = Math.max(peakRss, api.rss());
    return { result, healthzMs, failedHealthz, peakRss };
  } finally {
    clearInterval(sampler);
    probe.kill();
    try {
      os.setPriority(priority);
    } catch {
      // raising a priority again needs privileges: the rest of this file runs at nice 19
    }
  }
}

export const MiB = 1024 * 1024;
