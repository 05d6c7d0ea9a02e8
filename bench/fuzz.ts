/**
 * `npm run fuzz`: the hostile-input fuzz of test/fuzz.test.ts and test/grpc-hostile.test.ts,
 * longer, against our API and a worker in their own processes: every HTTP surface (JSON-RPC,
 * HTTP+JSON, admin, run archive import), then the gRPC listener (raw frames and structured requests of every RPC).
 * Prints each status histogram and every failure (HTTP: 5xx, -32603, no answer; gRPC: INTERNAL,
 * UNKNOWN, DATA_LOSS, UNAVAILABLE, a reset, no answer in 5 s). Env: FUZZ_COUNT (default 20,000
 * HTTP requests), FUZZ_GRPC_COUNT (default FUZZ_COUNT gRPC calls), FUZZ_SEED (default: random,
 * printed), FUZZ_CONCURRENCY (16). Exit code 1 when any request failed.
 */
import { startOursProcesses } from './ours/ours.js';
import { runFuzz, runGrpcFuzz, type FuzzReport } from './lib/fuzz.js';
import { freePort } from './lib/own-services.js';
import { envNumber } from './lib/stats.js';

const count = envNumber('FUZZ_COUNT', 20_000);
const grpcCount = envNumber('FUZZ_GRPC_COUNT', count);
const seed = envNumber('FUZZ_SEED', Math.floor(Math.random() * 2 ** 31));
const concurrency = envNumber('FUZZ_CONCURRENCY', 16);

function print(what: string, report: FuzzReport, seconds: number): boolean {
  console.log(`\n${what}: ${report.requests} in ${seconds.toFixed(1)} s`);
  console.log('status histogram:');
  for (const [status, n] of Object.entries(report.histogram).sort()) console.log(`  ${status.padEnd(20)} ${n}`);
  if (report.failures.length === 0) return true;
  console.log(`\n${report.failures.length} failure(s) (first 20):`);
  for (const f of report.failures) console.log(`- ${f.status}: ${f.request}\n    → ${f.body}`);
  return false;
}

const grpcPort = await freePort();
const ours = await startOursProcesses({
  transports: ['JSONRPC', 'HTTP+JSON', 'GRPC'],
  capabilities: { streaming: true },
  apiEnv: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_IP: '0', RATE_LIMIT_AUTH_FAILURES_PER_IP: '0', A2A_BLOCKING_TIMEOUT_MS: '2000', GRPC_PORT: String(grpcPort), HOST: '127.0.0.1' },
});
try {
  console.log(`fuzz: ${count} HTTP requests and ${grpcCount} gRPC calls, seed ${seed}, against ${ours.base} and 127.0.0.1:${grpcPort}`);
  let t0 = Date.now();
  // run archive imports go to an organization with no runs (and an agent `echo`), past "has runs"
  const orgRes = await fetch(`${ours.base}/v1/organizations`, { method: 'POST', headers: { authorization: `Bearer ${ours.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ slug: `fuzz-${seed}`, name: 'Fuzz imports' }) });
  const importKey = orgRes.ok ? ((await orgRes.json()) as { adminKey: { key: string } }).adminKey.key : undefined;
  if (importKey) {
    const post = (path: string, body: unknown) => fetch(`${ours.base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${importKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await post('/v1/agents', { slug: 'echo', name: 'Echo', description: 'fuzzed imports' });
    await post('/v1/agents/echo/revisions', { protocolProfiles: { a2a: { skillsProjection: [{ id: 'echo', name: 'Echo', description: 'Echoes', tags: ['fuzz'] }] } }, runtime: { kind: 'scripted', rules: [] } });
  }
  const http = await runFuzz({ baseUrl: ours.base, adminKey: ours.key, agentPath: new URL(ours.url).pathname, ...(importKey && { importKey }) }, { count, seed, concurrency });
  const httpOk = print('HTTP', http, (Date.now() - t0) / 1000);
  t0 = Date.now();
  const grpc = await runGrpcFuzz({ grpcUrl: `http://127.0.0.1:${grpcPort}`, tenant: 'bench/echo', key: ours.key }, { count: grpcCount, seed, concurrency });
  const grpcOk = print('gRPC', grpc, (Date.now() - t0) / 1000);
  if (httpOk && grpcOk) console.log('\nHTTP: no 5xx, no -32603, no request without an answer; gRPC: no INTERNAL / UNKNOWN / DATA_LOSS / UNAVAILABLE, no reset, no call unanswered in 5 s');
  else process.exitCode = 1;
} finally {
  await ours.close();
}
