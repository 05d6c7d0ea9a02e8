/**
 * `npm run fuzz`: the hostile-input fuzz of test/fuzz.test.ts, longer, against our API and a
 * worker in their own processes; prints the status histogram and every failure (5xx, -32603, no
 * answer). Env: FUZZ_COUNT (default 20,000), FUZZ_SEED (default: random, printed), FUZZ_CONCURRENCY (16).
 * Exit code 1 when any request failed.
 */
import { startOursProcesses } from './ours/ours.js';
import { runFuzz } from './lib/fuzz.js';
import { envNumber } from './lib/stats.js';

const count = envNumber('FUZZ_COUNT', 20_000);
const seed = envNumber('FUZZ_SEED', Math.floor(Math.random() * 2 ** 31));
const ours = await startOursProcesses({ transports: ['JSONRPC', 'HTTP+JSON'], capabilities: { streaming: true }, apiEnv: { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_IP: '0', RATE_LIMIT_AUTH_FAILURES_PER_IP: '0', A2A_BLOCKING_TIMEOUT_MS: '2000' } });
try {
  console.log(`fuzz: ${count} requests, seed ${seed}, against ${ours.base}`);
  const t0 = Date.now();
  const report = await runFuzz({ baseUrl: ours.base, adminKey: ours.key, agentPath: new URL(ours.url).pathname }, { count, seed, concurrency: envNumber('FUZZ_CONCURRENCY', 16) });
  console.log(`${report.requests} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  console.log('status histogram:');
  for (const [status, n] of Object.entries(report.histogram).sort()) console.log(`  ${status.padEnd(10)} ${n}`);
  if (report.failures.length > 0) {
    console.log(`\n${report.failures.length} failure(s) (first 20):`);
    for (const f of report.failures) console.log(`- ${f.status}: ${f.request}\n    → ${f.body}`);
    process.exitCode = 1;
  } else {
    console.log('\nno 5xx, no -32603, no request without an answer');
  }
} finally {
  await ours.close();
}
