import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunExecuteJob } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { RunExecutor } from '#libs/execution';
import { RuntimeSecretService } from '#libs/registry';
import { DispatchRelay, RuntimeOperations } from '#libs/runs';
import { createWorkerApp } from '../apps/worker/src/worker.factory.js';
import { TEST_DATABASE_URL } from './support/env.js';
import { seedAgent } from './support/fixtures.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * One live execution per trigger (docs/architecture.md "The fence"), seen from outside the
 * executor: what a backend receives and what the log holds.
 * - A slow execution that a takeover replaced is aborted at its next heartbeat: its backend
 *   request is closed, the backend is not told the run was canceled, nothing more is appended;
 *   the resumed execution finishes the run with every operation once (the backend's second call is
 *   the recorded takeover's).
 * - Two copies of one dispatch — in one job, or in two at once — run once: one backend call.
 * - Dispatches parked behind an agent's cap are held: the relay's safety net does not send them
 *   again while they wait (it did after twice its interval when every job was active).
 * - A database outage that outlasts EXECUTION_OUTAGE_RETRY_MS lets a resumable run go instead of
 *   failing it; it is resumed and completes once the database is back.
 * The worker reaches PostgreSQL through a TCP proxy this file controls; the API (and its sweeper
 * and relay) do not.
 */
class PgProxy {
  refusing = false;
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => {
    client.on('error', () => undefined);
    if (this.refusing) return void client.destroy();
    const upstream = net.connect(5432, '127.0.0.1');
    upstream.on('error', () => client.destroy());
    this.sockets.add(client).add(upstream);
    client.on('close', () => (this.sockets.delete(client), upstream.destroy()));
    upstream.on('close', () => (this.sockets.delete(upstream), client.destroy()));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Refuse (and drop every open connection), or pass again. */
  refuse(on: boolean): void {
    this.refusing = on;
    if (on) for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.refuse(true);
    await new Promise((r) => this.server.close(r));
  }
}

const SIGNING_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const HEARTBEAT_MS = 600;
const CHUNKS = 12;

/** What the backend saw: each run request (webhook-id, trigger, whether the client hung up first) and each cancel. */
interface BackendRequest {
  path: string;
  webhookId: string;
  trigger: string;
  runId: string;
  closedEarly: boolean;
}

let proxy: PgProxy;
let stack: Stack;
let worker: INestApplicationContext;
let runs: TestRuns;
let backend: http.Server;
let backendBase: string;
const requests: BackendRequest[] = [];
const cancels: string[] = [];

/** The backend's answer, with ids: working, CHUNKS chunks of one artifact (`every` ms apart), completed. */
function answer(): object[] {
  const ops: object[] = [{ op: 'status', status: 'working', id: 'w' }];
  for (let i = 0; i < CHUNKS; i++) ops.push({ op: 'artifact', artifactId: 'out', parts: [{ text: `c${i};` }], append: i > 0, lastChunk: i === CHUNKS - 1, id: `a${i}` });
  ops.push({ op: 'status', status: 'completed', id: 'done' });
  return ops;
}

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      if (req.url === '/cancel') {
        cancels.push(raw);
        return void res.writeHead(200).end();
      }
      const body = JSON.parse(raw) as { run: { runId: string }; trigger: { kind: string } };
      const rec: BackendRequest = { path: req.url ?? '', webhookId: String(req.headers['webhook-id']), trigger: body.trigger.kind, runId: body.run.runId, closedEarly: false };
      requests.push(rec);
      const every = req.url === '/slow' ? 250 : 40;
      const ops = answer();
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      let i = 0;
      res.on('close', () => {
        if (i < ops.length) rec.closedEarly = true;
      });
      const next = () => {
        if (res.destroyed) return;
        if (i === ops.length) return void res.end();
        res.write(`${JSON.stringify(ops[i++])}\n`);
        setTimeout(next, every);
      };
      next();
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendBase = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;

  proxy = new PgProxy();
  await proxy.start();
  stack = await startStack({
    worker: false,
    env: {
      HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8',
      RUNTIME_SECRET_ENCRYPTION_SECRET: 'execution-fence-test-encryption',
      EXECUTION_HEARTBEAT_MS: String(HEARTBEAT_MS),
      RUN_SWEEP_INTERVAL_MS: String(HEARTBEAT_MS / 2),
      // short, so a run that waited in the queue longer is stale when it starts (see the parked case)
      RUN_STALE_AFTER_MS: '2000',
      OUTBOX_RELAY_INTERVAL_MS: '100',
      OUTBOX_REDELIVER_MS: '1500',
      EXECUTION_OUTAGE_RETRY_MS: '1000',
      WORKER_CONCURRENCY: '8',
      EXECUTION_MAX_PER_AGENT: '1',
    },
  });
  const url = new URL(TEST_DATABASE_URL);
  url.host = `127.0.0.1:${proxy.port}`;
  worker = await createWorkerApp({ ...stack.env, DATABASE_URL: url.toString(), DATABASE_CONNECT_TIMEOUT_MS: '500', DATABASE_STATEMENT_TIMEOUT_MS: '1000' });
  runs = runsOf(stack.api);
}, 60_000);

afterAll(async () => {
  proxy?.refuse(false);
  await worker?.close();
  await stack?.close();
  await proxy?.close();
  await new Promise<void>((r) => backend?.close(() => r()));
});

const db = () => stack.api.get(DatabaseService);

/** An http agent whose backend is `path` (with a cancelUrl), its signing secret stored for its organization. */
async function httpAgent(path: string) {
  const seed = await seedAgent(db(), { kind: 'http', url: `${backendBase}${path}`, cancelUrl: `${backendBase}/cancel`, secret: 'fence-backend', retries: 0 });
  await stack.api.get(RuntimeSecretService).create(seed.orgId, 'fence-backend', SIGNING_SECRET);
  return seed;
}

type Seed = Awaited<ReturnType<typeof httpAgent>>;

const start = (seed: Seed, text = 'go') =>
  runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });

/** The run's log as `type[:opId]`, and its duplicated operation ids. */
async function logOf(runId: string): Promise<{ shape: string[]; duplicated: string[]; epoch: number }> {
  const rows = await db().query<{ type: string; op: string | null }>(`SELECT type, payload->>'opId' AS op FROM run_events WHERE run_id = $1 ORDER BY sequence`, [runId]);
  const ops = rows.flatMap((r) => (r.op ? [r.op] : []));
  const [{ epoch }] = await db().query<{ epoch: number }>('SELECT execution_epoch AS epoch FROM runs WHERE id = $1', [runId]);
  return { shape: rows.map((r) => (r.op ? `${r.type}:${r.op}` : r.type)), duplicated: ops.filter((o, i) => ops.indexOf(o) !== i), epoch };
}

/** Every operation of the backend's answer exactly once, after `prefix` bookkeeping events. */
function expectWholeAnswerOnce(shape: string[]): void {
  const ops = shape.filter((s) => s.includes(':'));
  expect(ops).toEqual(['run.status_changed:w', ...Array.from({ length: CHUNKS }, (_, i) => `artifact.updated:a${i}`), 'run.status_changed:done']);
}

describe('one live execution per trigger', () => {
  it('a slow execution a takeover replaced is aborted at its heartbeat: backend request closed, no cancel sent, nothing more appended', async () => {
    const seed = await httpAgent('/slow');
    const { run } = await start(seed);
    // mid-answer, and holding a lease (so a heartbeat has run)
    await expect.poll(async () => (await logOf(run.id)).shape.filter((s) => s.startsWith('artifact')).length, { timeout: 15_000, interval: 20 }).toBeGreaterThanOrEqual(2);
    // a sweeper decides the execution is lost (as after its lease lapsed) and takes the run over
    const ops = stack.api.get(RuntimeOperations);
    expect(await ops.resumeExecution(seed.orgId, run.id, 'the execution was lost (test)', 3)).toMatchObject({ outcome: 'resumed' });
    const settled = await runs.waitUntilSettled(seed.orgId, run.id, 30_000);
    expect(settled.status).toBe('completed');
    const log = await logOf(run.id);
    expect(log.duplicated).toEqual([]);
    expectWholeAnswerOnce(log.shape);
    expect(log.shape.filter((s) => s === 'run.execution_resumed')).toHaveLength(1);
    expect(log.epoch).toBe(1);
    // the backend: the first call hung up on by the fenced execution, the second the resumption's
    // (same webhook-id), and no cancel: the run was not canceled
    const mine = requests.filter((r) => r.runId === run.id);
    expect(mine.map((r) => r.trigger)).toEqual(['created', 'resumed']);
    expect(mine[0]!.closedEarly).toBe(true);
    expect(mine[1]!.webhookId).toBe(mine[0]!.webhookId);
    expect(cancels.filter((c) => c.includes(run.id))).toEqual([]);
  }, 60_000);

  it('copies of one dispatch run once: in one job, in two workers at once, and twice in one claim statement', async () => {
    const seed = await httpAgent('/slow');
    // EXECUTION_MAX_PER_AGENT is 1: a first run holds the agent's slot, so the next one parks in the worker
    const first = (await start(seed, 'holds the slot')).run.id;
    const { run } = await start(seed, 'copies');
    const row = async () =>
      (await db().query<{ id: string; trigger_sequence: number; job: RunExecuteJob; held: boolean }>('SELECT id::text AS id, trigger_sequence, job, relayed_at IS NOT NULL AS held FROM run_dispatches WHERE run_id = $1', [run.id]))[0];
    await expect.poll(async () => (await row())?.held, { timeout: 10_000, interval: 20 }).toBe(true);
    const r = (await row())!;
    const item = { id: r.id, triggerSequence: r.trigger_sequence, job: r.job };
    // the same dispatch twice more in this worker (one job) and twice in a second worker (one job)
    // that puts no cap on the agent (its two copies are admitted together at once)
    const second = await createWorkerApp({ ...stack.env, LOG_LEVEL: 'error', EXECUTION_MAX_PER_AGENT: '0' });
    try {
      const copies = [worker.get(RunExecutor).executeBatch([item, item]), second.get(RunExecutor).executeBatch([item, item])];
      for (const id of [first, run.id]) expect((await runs.waitUntilSettled(seed.orgId, id, 30_000)).status).toBe('completed');
      await Promise.all(copies);
    } finally {
      await second.close();
    }
    const log = await logOf(run.id);
    expect(log.duplicated).toEqual([]);
    expectWholeAnswerOnce(log.shape);
    expect(requests.filter((q) => q.runId === run.id)).toHaveLength(1);
    // the claim statement takes an id once, however often a batch names it
    const [{ id }] = await db().query<{ id: string }>(
      `INSERT INTO run_dispatches (org_id, run_id, trigger_sequence, job) VALUES ($1, $2, 1000, '{}') RETURNING id::text AS id`,
      [seed.orgId, first],
    );
    expect([...(await stack.api.get(DispatchRelay).claim([id, id, id], { owner: 'test-claimer', ttlMs: 1_000, idleForMs: 0 })).keys()]).toEqual([id]);
  }, 60_000);

  it('dispatches parked behind an agent cap are held: the relay does not send them again while they wait, nor a sweeper take them for lost when they start', async () => {
    const seed = await httpAgent('/slow');
    const resent = async () => (await stack.api.get(Metrics).dispatchesRelayed.get()).values.find((v) => v.labels.path === 'sweep')?.value ?? 0;
    const before = await resent();
    // EXECUTION_MAX_PER_AGENT is 1: the first runs (about 3.5 s), the others park in the worker
    const started: string[] = [];
    for (let i = 0; i < 4; i++) started.push((await start(seed, `parked ${i}`)).run.id);
    const rows = async () => db().query<{ run_id: string; held: boolean }>(`SELECT run_id, relayed_at IS NOT NULL AS held FROM run_dispatches WHERE run_id = ANY($1::uuid[])`, [started]);
    await expect.poll(async () => (await rows()).filter((r) => r.held).length, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(3);
    // twice the relay's interval and past OUTBOX_REDELIVER_MS: every job is active, the queue idle;
    // the safety net leaves the held rows alone (before, it sent each of them again)
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await rows()).length).toBeGreaterThan(0);
    expect(await resent()).toBe(before);
    // each waited longer than RUN_STALE_AFTER_MS (2 s) before it started: its claim took its
    // lease, so no sweeper resumed it in the instant before its first heartbeat (one did, and its
    // backend was called twice)
    for (const id of started) {
      const settled = await runs.waitUntilSettled(seed.orgId, id, 60_000);
      expect(settled.status).toBe('completed');
      const log = await logOf(id);
      expect(log.duplicated).toEqual([]);
      expect(log.shape).not.toContain('run.execution_resumed');
      expect(requests.filter((r) => r.runId === id)).toHaveLength(1);
    }
  }, 90_000);

  it('an outage that outlasts EXECUTION_OUTAGE_RETRY_MS lets a resumable run go: resumed, not failed, once the database is back', async () => {
    // a worker whose lease (1.5 × 2 s) outlives the outage: no sweeper can take the run over
    // meanwhile, so what happens to it is the execution's own doing
    await worker.close();
    const url = new URL(TEST_DATABASE_URL);
    url.host = `127.0.0.1:${proxy.port}`;
    worker = await createWorkerApp({ ...stack.env, DATABASE_URL: url.toString(), DATABASE_CONNECT_TIMEOUT_MS: '500', DATABASE_STATEMENT_TIMEOUT_MS: '1000', EXECUTION_HEARTBEAT_MS: '2000' });
    const seed = await httpAgent('/slow');
    const { run } = await start(seed, 'through an outage');
    await expect.poll(async () => (await logOf(run.id)).shape.filter((s) => s.startsWith('artifact')).length, { timeout: 15_000, interval: 20 }).toBeGreaterThanOrEqual(2);
    // the worker loses the database for longer than its writes retry (1 s); failing the run (a
    // durable failRun, retried for 1 s more) would have reached it again: the run was failed
    proxy.refuse(true);
    await new Promise((r) => setTimeout(r, 1_600));
    proxy.refuse(false);
    const settled = await runs.waitUntilSettled(seed.orgId, run.id, 30_000);
    expect(settled.status).toBe('completed');
    const log = await logOf(run.id);
    expect(log.shape).not.toContain('run.status_changed:failed');
    expect(log.duplicated).toEqual([]);
    expectWholeAnswerOnce(log.shape);
    expect(log.shape.filter((s) => s === 'run.execution_resumed').length).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
