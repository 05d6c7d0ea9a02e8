/**
 * Push delivery benchmark: deliveries per second and lag from append to receipt.
 *
 *   npm run bench:push
 *
 * Our API and one worker run in child processes (compiled tree, fresh `aaas_bench_push`
 * database). This process runs a healthy local receiver (node:http, keep-alive, answers 204 at
 * once) and sends BENCH_TASKS SendMessage calls (returnImmediately) at BENCH_RATE tasks/s, each
 * with a push config (v1.0) pointing at the receiver. The agent's rule makes BENCH_EVENTS events
 * per task (working, artifact chunks, completed), so the worker delivers about
 * BENCH_TASKS × BENCH_EVENTS pushes. For every delivery the receiver records its receipt time;
 * afterwards the commit time of each event is read from the admin API (the log's `occurredAt`),
 * and lag = receipt − commit. Every (task, sequence) must arrive (duplicates by webhook-id are
 * counted, gaps are errors).
 *
 * Figures only (never asserted): deliveries/s over the window from the first to the last
 * receipt, lag p50 / p90 / p99 / max, CPU ms per delivery of the worker, the API and PostgreSQL.
 * Targets: ≥ 1,000 deliveries/s per worker, lag p99 ≤ 50 ms to a healthy receiver.
 *
 * Env: BENCH_TASKS (default 300), BENCH_RATE tasks/s (default 100), BENCH_EVENTS per task
 * (default 10: working, 8 artifact chunks, completed), BENCH_DATABASE_URL.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { startOursProcesses } from './ours/ours.js';
import { Samples, cpuDelta, cpuSnapshot, envNumber, formatTable, loadAverage, nowMs, round } from './lib/stats.js';

const TASKS = envNumber('BENCH_TASKS', 300);
const RATE = envNumber('BENCH_RATE', 100);
const EVENTS = Math.max(3, envNumber('BENCH_EVENTS', 10));
const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_push';

async function main(): Promise<void> {
  const receipts = new Map<string, number>();
  let duplicates = 0;
  const server = http.createServer({ keepAlive: true }, (req, res) => {
    const at = nowMs();
    req.resume();
    req.on('end', () => {
      const key = `${req.headers['x-a2a-task-id']}:${req.headers['x-a2a-sequence']}`;
      if (receipts.has(key)) duplicates++;
      else receipts.set(key, at);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

  const ours = await startOursProcesses({
    databaseUrl: DB,
    capabilities: { pushNotifications: true },
    rules: [
      {
        match: { text: '^go' },
        steps: [
          { type: 'status', status: 'working' },
          { type: 'artifact', artifactId: 'a', content: { text: 'x'.repeat(EVENTS - 2) }, chunks: EVENTS - 2 },
          { type: 'status', status: 'completed' },
        ],
      },
    ],
    env: { PUSH_ENCRYPTION_SECRET: 'bench-only-push-encryption-secret', PUSH_ALLOWED_CIDRS: '127.0.0.0/8', PUSH_SWEEP_INTERVAL_MS: '500' },
  });
  const cpu0 = cpuSnapshot({ api: ours.api.pid, worker: ours.worker?.pid }, 'aaas_bench_push');
  const t0 = nowMs();
  const taskIds: string[] = [];
  const sends: Array<Promise<void>> = [];
  for (let i = 0; i < TASKS; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - nowMs();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sends.push(
      fetch(ours.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: i,
          method: 'SendMessage',
          params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] }, configuration: { returnImmediately: true, taskPushNotificationConfig: { url: hook } } },
        }),
      })
        .then((r) => r.json())
        .then((j: any) => void taskIds.push(j.result.task.id)),
    );
  }
  await Promise.all(sends);
  // every task has EVENTS projected events (sequences 3 .. EVENTS + 2)
  const expected = TASKS * EVENTS;
  const deadline = nowMs() + 120_000;
  while (receipts.size < expected && nowMs() < deadline) await new Promise((r) => setTimeout(r, 100));
  const cpu1 = cpuSnapshot({ api: ours.api.pid, worker: ours.worker?.pid }, 'aaas_bench_push');

  const lag = new Samples();
  let missing = 0;
  for (const id of taskIds) {
    const res = await fetch(`${ours.base}/v1/runs/${id}/events?limit=100`, { headers: { authorization: `Bearer ${ours.key}` } });
    const events = ((await res.json()) as { events: Array<{ sequence: number; occurredAt: string; event: { type: string; payload: any } }> }).events;
    for (const e of events) {
      if (e.event.type === 'run.created' || (e.event.type === 'message.added' && e.event.payload.message.role === 'user')) continue;
      const at = receipts.get(`${id}:${e.sequence}`);
      if (at === undefined) missing++;
      else lag.push(at - Date.parse(e.occurredAt));
    }
  }
  const times = [...receipts.values()].sort((a, b) => a - b);
  const windowS = times.length > 1 ? (times.at(-1)! - times[0]!) / 1000 : Number.NaN;
  const rate = receipts.size / windowS;
  const s = lag.summary();
  const cpu = cpuDelta(cpu0, cpu1);
  console.log(`push bench: ${TASKS} tasks at ${RATE}/s, ${EVENTS} events each, 1 worker, node ${process.version}, load ${loadAverage().join(' ')}`);
  console.log(
    formatTable(
      ['deliveries', 'duplicates', 'missing', 'per s', 'lag p50 ms', 'p90', 'p99', 'max'],
      [[String(receipts.size), String(duplicates), String(missing), String(round(rate, 1)), String(s.p50Ms), String(s.p90Ms), String(s.p99Ms), String(s.maxMs)]],
    ),
  );
  console.log(`CPU ms per delivery: ${Object.entries(cpu).map(([k, v]) => `${k} ${round(v / Math.max(1, receipts.size), 3)}`).join(', ')}`);
  console.log('Targets:');
  console.log(`  deliveries/s per worker  ${round(rate, 1)} (target >= 1000): ${rate >= 1000 ? 'MET' : 'NOT MET'} — bounded here by the offered load (${round(RATE * EVENTS, 0)}/s)`);
  console.log(`  lag p99                  ${s.p99Ms} ms (target <= 50 ms): ${s.p99Ms <= 50 ? 'MET' : 'NOT MET'}`);
  await ours.close();
  server.close();
  if (missing > 0) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
