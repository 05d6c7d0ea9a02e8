// Bench child: our API app from the compiled tree (dist/), exactly as bench/ours/api-server.mjs,
// plus a tiny probe server on a second loopback port so a bench can look inside the process:
//   GET  /stats  -> memory (VmRSS from /proc/self/status, process.memoryUsage()), event-loop
//                   utilisation, event-loop delay (p50/p99/max, beyond the 5 ms sampling
//                   interval) and CPU time SINCE THE PREVIOUS
//                   /stats call, open SSE streams and followed runs.
//   POST /gc     -> full GC (twice), then the same as /stats. --expose-gc is switched on at
//                   runtime, so no node flag is needed.
//   POST /heapsnapshot -> writes a V8 heap snapshot into the OS temp dir, answers {"file": …}
//                   (for digging into memory per stream; blocks the process while it writes).
// Prints {"url": "<api base url>", "probeUrl": "<probe base url>"} when ready. Exits when its
// parent closes stdin (or on SIGTERM, closing the app first so --cpu-prof profiles are written).
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer } from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createApiApp } from '../../dist/apps/api/src/app.factory.js';
import { SseHeartbeat } from '../../dist/apps/api/src/common/sse.js';
import { RunStreamHub } from '../../dist/libs/runs/src/index.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const app = await createApiApp({ LOG_LEVEL: 'silent' });
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address();

const optional = (token) => {
  try {
    return app.get(token, { strict: false });
  } catch {
    return null;
  }
};
const heartbeat = optional(SseHeartbeat);
const hub = optional(RunStreamHub);

// the histogram records whole timer intervals, so the delay is a value minus the resolution
const RESOLUTION_MS = 5;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
delay.enable();
let lastElu = performance.eventLoopUtilization();
let lastCpu = process.cpuUsage();

function vmRssKb() {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : null;
}

function stats() {
  const elu = performance.eventLoopUtilization(lastElu);
  lastElu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage(lastCpu);
  lastCpu = process.cpuUsage();
  const ms = (ns) => Math.max(0, Math.round(ns / 1e4 - RESOLUTION_MS * 100) / 100);
  const out = {
    pid: process.pid,
    vmRssKb: vmRssKb(),
    memory: process.memoryUsage(),
    elu: Math.round(elu.utilization * 1000) / 1000,
    windowMs: Math.round(elu.idle + elu.active),
    cpuUserMs: Math.round(cpu.user / 1000),
    cpuSystemMs: Math.round(cpu.system / 1000),
    loopDelayMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) },
    sseStreams: heartbeat ? heartbeat.size : null,
    hub: hub ? hub.stats() : null,
  };
  delay.reset();
  return out;
}

const probe = createServer((req, res) => {
  if (req.url === '/heapsnapshot' && req.method === 'POST') {
    const file = v8.writeHeapSnapshot(path.join(tmpdir(), `api-${process.pid}-${Date.now()}.heapsnapshot`));
    const body = JSON.stringify({ file });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    return;
  }
  if (req.url === '/gc' && req.method === 'POST') {
    gc();
    gc();
  } else if (req.url !== '/stats') {
    res.writeHead(404).end();
    return;
  }
  const body = JSON.stringify(stats());
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
});
await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', async () => {
  probe.close();
  probe.closeAllConnections?.();
  await app.close();
  process.exit(0);
});
console.log(JSON.stringify({ url: `http://127.0.0.1:${port}`, probeUrl: `http://127.0.0.1:${probe.address().port}` }));
