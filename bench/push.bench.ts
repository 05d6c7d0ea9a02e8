/**
 * Push delivery benchmark: deliveries per second per worker, and lag from append to receipt.
 *
 *   npm run bench:push
 *
 * Our API and worker(s) run in child processes (compiled tree, a fresh database each phase). This
 * process runs a healthy local receiver (node:http, keep-alive, answers 204 at once). Every task
 * is a SendMessage (returnImmediately) with a push config (v1.0) pointing at the receiver; the
 * agent's rule makes BENCH_EVENTS events per task (working, artifact chunks, completed), each of
 * them one push delivery. For every delivery the receiver records its receipt time and the order
 * in which each task's sequences first arrive.
 *
 * Two phases:
 * - live: BENCH_TASKS tasks at BENCH_RATE tasks/s; one worker executes them and delivers, after
 *   an unmeasured warm-up of BENCH_WARMUP_TASKS tasks at the same rate on the same processes. Lag =
 *   receipt − commit (the log's `occurredAt`, read from the admin API afterwards): p50 / p90 /
 *   p99 / max, and p50 / p99 by the entry's sequence (3 = the task's first delivered entry: a
 *   lag that grows along a task is a delivery chain; a flat one is waiting or CPU), and per task
 *   its first entry's commit → its last entry's receipt. Target: lag p99 ≤ 50 ms to a healthy
 *   receiver.
 * - drain: BENCH_DRAIN_TASKS tasks are executed by a worker that does not deliver (no push
 *   secret); once every run has ended, a second worker that only delivers starts, and its
 *   deliveries per second are measured from its first receipt to its last — the delivery path
 *   alone, not bounded by the offered load nor shared with executions. Target: ≥ 2,000
 *   deliveries/s per worker. `BENCH_DRAIN_TASKS=0` skips the phase.
 * Both phases: every (task, sequence) must arrive (missing is an error), none out of order per
 * task (a sequence first received after a higher one of its task), duplicates (by webhook-id)
 * counted. CPU ms per delivery of the worker, the API and PostgreSQL (this database / others)
 * over each phase's window.
 *
 * Env: BENCH_TASKS (default 300), BENCH_WARMUP_TASKS (default 200), BENCH_RATE tasks/s (default 100), BENCH_EVENTS per task
 * (default 10: working, 8 artifact chunks, completed), BENCH_DRAIN_TASKS (default 500),
 * BENCH_DATABASE_URL, BENCH_PROFILE_DIR (CPU profiles of the children).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { startChildServer } from './lib/child-server.js';
import { startOursProcesses, type OursProcesses } from './ours/ours.js';
import { Samples, cpuDelta, cpuSnapshot, envNumber, formatTable, loadAverage, nowMs, round, type CpuSnapshot } from './lib/stats.js';

const TASKS = envNumber('BENCH_TASKS', 300);
const RATE = envNumber('BENCH_RATE', 100);
const EVENTS = Math.max(3, envNumber('BENCH_EVENTS', 10));
const DRAIN_TASKS = envNumber('BENCH_DRAIN_TASKS', 500);
const WARMUP_TASKS = envNumber('BENCH_WARMUP_TASKS', 200);
const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_push';
const DB_NAME = new URL(DB).pathname.slice(1);
const SECRET = 'bench-only-push-encryption-secret';
const PUSH_ENV = { PUSH_ALLOWED_CIDRS: '127.0.0.0/8', PUSH_SWEEP_INTERVAL_MS: '500' };

/** The receiver: first receipt time per `<task>:<sequence>`, duplicates, and order inversions per task. */
class Receiver {
  receipts = new Map<string, number>();
  duplicates = 0;
  outOfOrder = 0;
  private highest = new Map<string, number>();
  onFirst?: () => void;
  reset(): void {
    this.receipts = new Map();
    this.highest = new Map();
    this.duplicates = 0;
    this.outOfOrder = 0;
  }
  record(task: string, seq: number, at: number): void {
    const key = `${task}:${seq}`;
    if (this.receipts.has(key)) {
      this.duplicates++;
      return;
    }
    if (this.receipts.size === 0) this.onFirst?.();
    this.receipts.set(key, at);
    if (seq < (this.highest.get(task) ?? 0)) this.outOfOrder++;
    else this.highest.set(task, seq);
  }
}

function rules() {
  return [
    {
      match: { text: '^go' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'artifact', artifactId: 'a', content: { text: 'x'.repeat(EVENTS - 2) }, chunks: EVENTS - 2 },
        { type: 'status', status: 'completed' },
      ],
    },
  ];
}

function send(ours: OursProcesses, hook: string, i: number): Promise<string> {
  return fetch(ours.url, {
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
    .then((j: any) => j.result.task.id as string);
}

async function waitFor(receiver: Receiver, expected: number, timeoutMs = 180_000): Promise<void> {
  const deadline = nowMs() + timeoutMs;
  while (receiver.receipts.size < expected && nowMs() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/** Every projected event of these tasks with its commit time (sequences after the caller's message). */
async function projectedEvents(ours: OursProcesses, taskIds: string[]): Promise<Array<{ key: string; committedAt: number }>> {
  const out: Array<{ key: string; committedAt: number }> = [];
  for (const id of taskIds) {
    const res = await fetch(`${ours.base}/v1/runs/${id}/events?limit=100`, { headers: { authorization: `Bearer ${ours.key}` } });
    const events = ((await res.json()) as { events: Array<{ sequence: number; occurredAt: string; event: { type: string; payload: any } }> }).events;
    for (const e of events) {
      if (e.event.type === 'run.created' || (e.event.type === 'message.added' && e.event.payload.message.role === 'user')) continue;
      out.push({ key: `${id}:${e.sequence}`, committedAt: Date.parse(e.occurredAt) });
    }
  }
  return out;
}

function rateOf(receiver: Receiver): number {
  const times = [...receiver.receipts.values()].sort((a, b) => a - b);
  return times.length > 1 ? receiver.receipts.size / ((times.at(-1)! - times[0]!) / 1000) : Number.NaN;
}

function cpuLine(cpu: Record<string, number>, deliveries: number): string {
  return Object.entries(cpu)
    .map(([k, v]) => `${k} ${round(v / Math.max(1, deliveries), 3)}`)
    .join(', ');
}

/** Send `n` tasks at RATE tasks/s (JSON-RPC ids from `from`); resolves to their task ids. */
async function offer(ours: OursProcesses, hook: string, n: number, from: number): Promise<string[]> {
  const t0 = nowMs();
  const sends: Array<Promise<string>> = [];
  for (let i = 0; i < n; i++) {
    const wait = t0 + (i * 1000) / RATE - nowMs();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sends.push(send(ours, hook, from + i));
  }
  return Promise.all(sends);
}

async function live(receiver: Receiver, hook: string): Promise<{ rate: number; p99: number; missing: number; outOfOrder: number }> {
  receiver.reset();
  const ours = await startOursProcesses({ databaseUrl: DB, capabilities: { pushNotifications: true }, rules: rules(), env: { PUSH_ENCRYPTION_SECRET: SECRET, ...PUSH_ENV } });
  try {
    const pids = { api: ours.api.pid, worker: ours.worker?.pid };
    // warm-up, unmeasured: the same load on the same processes (JIT, pools, caches), every delivery received
    if (WARMUP_TASKS > 0) {
      await offer(ours, hook, WARMUP_TASKS, TASKS);
      await waitFor(receiver, WARMUP_TASKS * EVENTS);
      receiver.reset();
    }
    const cpu0 = cpuSnapshot(pids, DB_NAME);
    const taskIds = await offer(ours, hook, TASKS, 0);
    await waitFor(receiver, TASKS * EVENTS);
    const cpu = cpuDelta(cpu0, cpuSnapshot(pids, DB_NAME));
    const lag = new Samples();
    // lag by the entry's place in its task (1 = the first delivered entry): whether it grows along a task
    const bySeq = new Map<number, Samples>();
    // per task: its first entry's commit and its last entry's receipt (what a receiver waits for the whole task)
    const span = new Map<string, { first: number; last: number }>();
    let missing = 0;
    for (const e of await projectedEvents(ours, taskIds)) {
      const at = receiver.receipts.get(e.key);
      if (at === undefined) missing++;
      else {
        const task = e.key.split(':')[0]!;
        const t = span.get(task) ?? { first: Infinity, last: -Infinity };
        span.set(task, { first: Math.min(t.first, e.committedAt), last: Math.max(t.last, at) });
        lag.push(at - e.committedAt);
        const seq = Number(e.key.split(':')[1]);
        if (!bySeq.has(seq)) bySeq.set(seq, new Samples());
        bySeq.get(seq)!.push(at - e.committedAt);
      }
    }
    const s = lag.summary();
    const rate = rateOf(receiver);
    console.log(`live: ${TASKS} tasks at ${RATE}/s, ${EVENTS} events each (offered ${RATE * EVENTS} deliveries/s), 1 worker executing and delivering`);
    console.log(
      formatTable(
        ['deliveries', 'duplicates', 'missing', 'out of order', 'per s', 'lag p50 ms', 'p90', 'p99', 'max'],
        [[String(receiver.receipts.size), String(receiver.duplicates), String(missing), String(receiver.outOfOrder), String(round(rate, 1)), String(s.p50Ms), String(s.p90Ms), String(s.p99Ms), String(s.maxMs)]],
      ),
    );
    console.log(`CPU ms per delivery (executions included): ${cpuLine(cpu, receiver.receipts.size)}`);
    const whole = new Samples();
    for (const t of span.values()) whole.push(t.last - t.first);
    console.log(`task, first entry's commit → last entry's receipt: p50 ${whole.summary().p50Ms} / p99 ${whole.summary().p99Ms} ms`);
    console.log(`lag p50 / p99 ms by sequence: ${[...bySeq].sort((a, b) => a[0] - b[0]).map(([q, v]) => `${q}: ${v.summary().p50Ms} / ${v.summary().p99Ms}`).join(', ')}`);
    return { rate, p99: s.p99Ms, missing, outOfOrder: receiver.outOfOrder };
  } finally {
    await ours.close();
  }
}

async function drain(receiver: Receiver, hook: string): Promise<{ rate: number; missing: number; outOfOrder: number }> {
  receiver.reset();
  // the API keeps the secret (it stores configs); the executing worker has none, so it delivers nothing
  const ours = await startOursProcesses({ databaseUrl: DB, capabilities: { pushNotifications: true }, rules: rules(), env: PUSH_ENV, apiEnv: { PUSH_ENCRYPTION_SECRET: SECRET } });
  try {
    const taskIds: string[] = [];
    for (let i = 0; i < DRAIN_TASKS; i += 32) {
      taskIds.push(...(await Promise.all(Array.from({ length: Math.min(32, DRAIN_TASKS - i) }, (_, j) => send(ours, hook, i + j)))));
    }
    await ours.drain(300_000);
    if (receiver.receipts.size > 0) throw new Error(`the executing worker delivered ${receiver.receipts.size} events`);
    let cpu0: CpuSnapshot | undefined;
    let pids: Record<string, number | undefined> = {};
    receiver.onFirst = () => (cpu0 = cpuSnapshot(pids, DB_NAME));
    const nodeArgs = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
    const deliverer = await startChildServer({ script: 'bench/ours/worker.mjs', env: { ...ours.env, PUSH_ENCRYPTION_SECRET: SECRET }, startTimeoutMs: 30_000, nodeArgs });
    pids = { api: ours.api.pid, 'delivering worker': deliverer.pid };
    try {
      await waitFor(receiver, DRAIN_TASKS * EVENTS);
      const cpu = cpu0 ? cpuDelta(cpu0, cpuSnapshot(pids, DB_NAME)) : {};
      let missing = 0;
      for (const e of await projectedEvents(ours, taskIds)) if (!receiver.receipts.has(e.key)) missing++;
      const rate = rateOf(receiver);
      console.log(`drain: ${DRAIN_TASKS} ended tasks × ${EVENTS} events, delivered by one worker that only delivers (first to last receipt)`);
      console.log(
        formatTable(
          ['deliveries', 'duplicates', 'missing', 'out of order', 'per s'],
          [[String(receiver.receipts.size), String(receiver.duplicates), String(missing), String(receiver.outOfOrder), String(round(rate, 1))]],
        ),
      );
      console.log(`CPU ms per delivery: ${cpuLine(cpu, receiver.receipts.size)}`);
      return { rate, missing, outOfOrder: receiver.outOfOrder };
    } finally {
      receiver.onFirst = undefined;
      await deliverer.close();
    }
  } finally {
    await ours.close();
  }
}

async function main(): Promise<void> {
  const receiver = new Receiver();
  const server = http.createServer({ keepAlive: true }, (req, res) => {
    const at = nowMs();
    req.resume();
    req.on('end', () => {
      receiver.record(String(req.headers['x-a2a-task-id']), Number(req.headers['x-a2a-sequence']), at);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  console.log(`push bench: node ${process.version}, load ${loadAverage().join(' ')}`);
  const l = await live(receiver, hook);
  const d = DRAIN_TASKS > 0 ? await drain(receiver, hook) : undefined;
  console.log(`Targets (load now ${loadAverage().join(' ')}):`);
  if (d) console.log(`  deliveries/s per worker  ${round(d.rate, 1)} (target >= 2000, drain): ${d.rate >= 2000 ? 'MET' : 'NOT MET'}`);
  console.log(`  lag p99                  ${l.p99} ms (target <= 50 ms, live): ${l.p99 <= 50 ? 'MET' : 'NOT MET'}`);
  const missing = l.missing + (d?.missing ?? 0);
  const outOfOrder = l.outOfOrder + (d?.outOfOrder ?? 0);
  console.log(`  missing ${missing}, out of order ${outOfOrder} (target 0 each): ${missing === 0 && outOfOrder === 0 ? 'MET' : 'NOT MET'}`);
  server.close();
  if (missing > 0 || outOfOrder > 0) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
