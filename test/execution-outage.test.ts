import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { RuntimeSecretService } from '#libs/registry';
import type { RunEvent, SequencedOutputEnvelope } from '#libs/contracts';
import { createWorkerApp } from '../apps/worker/src/worker.factory.js';
import { TEST_DATABASE_URL } from './support/env.js';
import { seedAgent } from './support/fixtures.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Executions ride out a short PostgreSQL outage. The worker reaches PostgreSQL through a TCP proxy
 * the test controls (the API, and its sweeper, do not): while scripted runs (several steps with
 * waits) and http runs (a backend streaming operations over seconds) are mid-way, the proxy first
 * swallows the database's answers (appends commit but their answers are lost), then refuses and
 * drops every connection for 3 s, then passes again. Every run completes, and each log is gapless
 * 1..N with every message, artifact chunk and status exactly once, in the runtime's order.
 */
type Mode = 'pass' | 'refuse' | 'swallow';

class PgProxy {
  mode: Mode = 'pass';
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => {
    client.on('error', () => undefined);
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    if (this.mode === 'refuse') return void client.destroy();
    const upstream = net.connect(5432, '127.0.0.1');
    upstream.on('error', () => client.destroy());
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    // `swallow`: the database gets every statement (and commits it) but its answers never arrive
    client.on('data', (d) => this.mode !== 'refuse' && upstream.write(d));
    upstream.on('data', (d) => this.mode === 'pass' && client.write(d));
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Switch mode; `cut` also drops every open connection. */
  set(mode: Mode, cut: boolean): void {
    this.mode = mode;
    if (cut) for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.set('refuse', true);
    await new Promise((r) => this.server.close(r));
  }
}

/** The http agent's signing key: a runtime secret of its organization (stored encrypted, read by the worker before the outage). */
const SIGNING_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const HTTP_OPS = 8;
const SCRIPTED = {
  kind: 'scripted',
  rules: [
    {
      match: { text: '.*' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'message', text: 'step 1' },
        { type: 'wait', ms: 600 },
        { type: 'artifact', artifactId: 'report', name: 'report.txt', content: { text: 'abcdefghijkl' }, chunks: 3 },
        { type: 'wait', ms: 600 },
        { type: 'message', text: 'step 2' },
        { type: 'wait', ms: 600 },
        { type: 'message', text: 'step 3' },
        { type: 'wait', ms: 600 },
        { type: 'message', text: 'step 4' },
        { type: 'wait', ms: 600 },
        { type: 'status', status: 'completed', message: 'done' },
      ],
    },
  ],
};

let proxy: PgProxy;
let stack: Stack;
let worker: INestApplicationContext;
let runs: TestRuns;
let backend: http.Server;
let backendUrl: string;

beforeAll(async () => {
  // streams HTTP_OPS operations, one every 400 ms: a message or an artifact chunk, then completes
  backend = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      const ops: object[] = [{ op: 'status', status: 'working' }];
      for (let i = 1; i < HTTP_OPS - 1; i++) {
        ops.push(i % 2 ? { op: 'message', message: { parts: [{ text: `part ${i}` }] } } : { op: 'artifact', artifactId: 'stream', parts: [{ text: `chunk ${i}` }], append: i > 2, lastChunk: i === HTTP_OPS - 2 });
      }
      ops.push({ op: 'status', status: 'completed', message: { parts: [{ text: 'backend done' }] } });
      let i = 0;
      const next = () => {
        if (i === ops.length) return void res.end();
        res.write(`${JSON.stringify(ops[i++])}\n`);
        setTimeout(next, 400);
      };
      next();
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}/stream`;

  proxy = new PgProxy();
  await proxy.start();
  const env = { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', RUNTIME_SECRET_ENCRYPTION_SECRET: 'execution-outage-test-encryption' };
  stack = await startStack({ worker: false, env });
  const url = new URL(TEST_DATABASE_URL);
  url.host = `127.0.0.1:${proxy.port}`;
  worker = await createWorkerApp({
    ...stack.env,
    DATABASE_URL: url.toString(),
    DATABASE_CONNECT_TIMEOUT_MS: '1000',
    DATABASE_STATEMENT_TIMEOUT_MS: '1000',
  });
  runs = runsOf(stack.api);
}, 60_000);

afterAll(async () => {
  proxy?.set('pass', true);
  await worker?.close();
  await stack?.close();
  await proxy?.close();
  await new Promise<void>((r) => backend?.close(() => r()));
});

/** The events of a run after its first two (run.created, the user's message), reduced to what must appear exactly once. */
function shape(events: SequencedOutputEnvelope[]): string[] {
  return events.slice(2).map(({ event }: { event: RunEvent }) => {
    switch (event.type) {
      case 'run.status_changed':
        return `status:${event.payload.status}${event.payload.message ? `:${event.payload.message.parts.map((p) => ('text' in p ? p.text : '')).join('')}` : ''}`;
      case 'message.added':
        return `message:${event.payload.message.parts.map((p) => ('text' in p ? p.text : '')).join('')}`;
      case 'artifact.updated':
        return `artifact:${event.payload.artifactId}:${event.payload.parts.map((p) => ('text' in p ? p.text : '')).join('')}`;
      default:
        return event.type;
    }
  });
}

describe('a short database outage under running executions', () => {
  it('every scripted and http run completes, each log gapless with nothing recorded twice', async () => {
    const db = stack.api.get(DatabaseService);
    const scripted = await seedAgent(db, SCRIPTED);
    const httpAgent = await seedAgent(db, { kind: 'http', url: backendUrl, secret: 'outage-backend', retries: 0 });
    await stack.api.get(RuntimeSecretService).create(httpAgent.orgId, 'outage-backend', SIGNING_SECRET);
    const create = (seed: typeof scripted, text: string) =>
      runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
    const started = [
      ...(await Promise.all(Array.from({ length: 5 }, (_, i) => create(scripted, `scripted ${i}`)))).map((r) => ({ seed: scripted, runId: r.run.id })),
      ...(await Promise.all(Array.from({ length: 5 }, (_, i) => create(httpAgent, `http ${i}`)))).map((r) => ({ seed: httpAgent, runId: r.run.id })),
    ];
    // every run is executing and has recorded something of its own
    await expect
      .poll(async () => (await Promise.all(started.map(async (s) => (await runs.getRun(s.seed.orgId, s.runId))!.lastSequence))).every((n) => n >= 4), { timeout: 10_000, interval: 50 })
      .toBe(true);

    // appends reach the database and commit, but their answers are lost; then the database is gone for 3 s
    proxy.set('swallow', false);
    await new Promise((r) => setTimeout(r, 800));
    proxy.set('refuse', true);
    await new Promise((r) => setTimeout(r, 3_000));
    // mid-run: none of them has finished yet
    for (const s of started) expect((await runs.getRun(s.seed.orgId, s.runId))!.status).toBe('working');
    proxy.set('pass', false);

    const scriptedShape = [
      'status:working',
      'message:step 1',
      'artifact:report:abcd',
      'artifact:report:efgh',
      'artifact:report:ijkl',
      'message:step 2',
      'message:step 3',
      'message:step 4',
      'status:completed:done',
    ];
    const httpShape = ['status:working', 'message:part 1', 'artifact:stream:chunk 2', 'message:part 3', 'artifact:stream:chunk 4', 'message:part 5', 'artifact:stream:chunk 6', 'status:completed:backend done'];
    for (const s of started) {
      const run = await runs.waitUntilSettled(s.seed.orgId, s.runId, 30_000);
      expect(run.status, `run ${s.runId}`).toBe('completed');
      const events = await runs.readEvents(s.seed.orgId, s.runId, 0);
      // gapless 1..N, and N is the run's last sequence
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
      expect(run.lastSequence).toBe(events.length);
      // every message, artifact chunk and status exactly once, in the runtime's order
      expect(shape(events), `run ${s.runId}`).toEqual(s.seed === scripted ? scriptedShape : httpShape);
      const ids = events.filter((e) => e.event.type === 'message.added').map((e) => (e.event as Extract<RunEvent, { type: 'message.added' }>).payload.message.messageId);
      expect(new Set(ids).size).toBe(ids.length);
    }
    // the projections agree with the logs: one row per message, the artifact whole
    const [{ n }] = await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE run_id = ANY($1::uuid[])`, [started.map((s) => s.runId)]);
    expect(Number(n)).toBe(5 * (1 + 4 + 1) + 5 * (1 + 3 + 1));
    const view = await runs.view(scripted.orgId, started[0]!.runId);
    expect(view.artifacts.map((a) => a.parts.map((p) => ('text' in p ? p.text : '')).join(''))).toEqual(['abcdefghijkl']);
  }, 90_000);
});
