import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { sendMessageRpc } from './support/a2a-rpc.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43 row 4: a tenant's `a2a` upstream answering 100 MiB must not blow up the shared worker.
 * The worker runs in its own process (dist/apps/worker/src/main.js) and its RSS is read from
 * /proc: its peak (VmHWM, reset through clear_refs before each attack) against its RSS just before.
 * The upstream (in this process) answers SendMessage with 100 MiB of JSON — chunked, or with a
 * Content-Length — and a stream with one 100 MiB event. Each run fails with the budget's reason
 * ("the upstream's answer exceeds 4194304 bytes"), the worker stops reading (the upstream sees its
 * connection closed long before 100 MiB), RSS grows by a bounded amount, and the worker goes on
 * serving other runs.
 */
const MiB = 1024 * 1024;
const HUGE = 100 * MiB;
const BUDGET = 4 * MiB; // RUNTIME_MAX_ANSWER_BYTES / RUNTIME_MAX_EVENT_BYTES defaults
/** Most a single hostile answer, and three at once, may grow the worker's RSS (MiB). */
const MAX_GROWTH_ONE_MIB = 32;
const MAX_GROWTH_THREE_MIB = 64;

let stack: Stack;
let upstream: http.Server;
let base: string;
let worker: ChildProcess;
const agents: Record<string, PublishedAgent> = {};
/** What the upstream was asked (path, JSON-RPC method) and how many bytes of each answer it got out. */
const calls: Array<{ path: string; method: string; sent: number; closedEarly: boolean }> = [];

const PAD = Buffer.alloc(MiB, 'x');

/** Write `total` bytes of padding to `res` (backpressure respected), then `tail`; counts what left. */
function pump(res: http.ServerResponse, call: { sent: number; closedEarly: boolean }, total: number, tail: string): void {
  let left = total;
  res.once('close', () => {
    if (!res.writableFinished) call.closedEarly = true;
  });
  const next = (): void => {
    while (left > 0 && !res.destroyed) {
      const n = Math.min(left, PAD.length);
      left -= n;
      call.sent += n;
      if (!res.write(n === PAD.length ? PAD : PAD.subarray(0, n))) return void res.once('drain', next);
    }
    if (!res.destroyed) res.end(tail);
  };
  next();
}

const task = (state: string, extra = '') => `{"id":"up-task","contextId":"up-ctx","status":{"state":"${state}"${extra}}}`;

function upstreamHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', () => {
    const rpc = JSON.parse(raw) as { id: number; method: string };
    const path = req.url ?? '';
    const call = { path, method: rpc.method, sent: 0, closedEarly: false };
    calls.push(call);
    const ok = (result: string) => {
      const body = `{"jsonrpc":"2.0","id":${rpc.id},"result":${result}}`;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    };
    const message = (text: string) => `{"message":{"messageId":"m-${calls.length}","role":"ROLE_AGENT","parts":[{"text":"${text}"}]}}`;
    if (path === '/small') return ok(message('hello back'));
    if (path === '/http-json-chunked' || path === '/http-json-length') {
      // the http runtime's JSON answer: { operations: [...] } and 100 MiB beside it
      const head = '{"operations":[{"op":"status","status":"completed"}],"pad":"';
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
      if (path === '/http-json-length') headers['content-length'] = head.length + HUGE + 2;
      res.writeHead(200, headers);
      res.write(head);
      return pump(res, call, HUGE, '"}');
    }
    if (path === '/json-chunked' || path === '/json-length') {
      // a valid answer whose 100 MiB sit in a field nobody reads: read whole, it costs its size
      const head = `{"jsonrpc":"2.0","id":${rpc.id},"result":${message('ok')},"pad":"`;
      const tail = '"}';
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
      if (path === '/json-length') headers['content-length'] = Buffer.byteLength(head) + HUGE + tail.length;
      res.writeHead(200, headers);
      res.write(head);
      return pump(res, call, HUGE, tail);
    }
    if (path === '/stream') {
      if (rpc.method === 'GetTask') return ok(task('TASK_STATE_WORKING'));
      if (rpc.method === 'CancelTask') return ok(task('TASK_STATE_CANCELED'));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // SendStreamingMessage: the task first (its id is learned), then one 100 MiB event
      if (rpc.method === 'SendStreamingMessage') res.write(`data: {"jsonrpc":"2.0","id":${rpc.id},"result":{"task":${task('TASK_STATE_WORKING')}}}\n\n`);
      const head = `data: {"jsonrpc":"2.0","id":${rpc.id},"result":{"statusUpdate":{"taskId":"up-task","contextId":"up-ctx","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"big","role":"ROLE_AGENT","parts":[{"text":"`;
      res.write(head);
      return pump(res, call, HUGE, '"}]}}}}}\n\n');
    }
    res.writeHead(404).end();
  });
}

/** VmRSS and VmHWM (peak RSS) of a process, in MiB. */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Reset the peak RSS of `pid` to its current RSS (Linux clear_refs "5"). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

const db = () => stack.api.get(DatabaseService);
async function finalStatus(runId: string): Promise<{ status: string; text: string } | undefined> {
  const rows = await db().query<{ payload: any }>(`SELECT payload FROM run_events WHERE run_id = $1 AND type = 'run.status_changed' ORDER BY sequence DESC LIMIT 1`, [runId]);
  const p = rows[0]?.payload;
  if (!p || !['completed', 'failed', 'canceled', 'rejected'].includes(p.status)) return undefined;
  return { status: p.status, text: (p.message?.parts ?? []).map((x: { text?: string }) => x.text ?? '').join('') };
}

async function start(slug: string): Promise<string> {
  const res = await sendMessageRpc(`${stack.baseUrl}${agents[slug]!.basePath}`, 'go', { returnImmediately: true });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.result.task.id as string;
}

/** The run's final status and its message, once it has one (within 60 s). */
async function settled(runId: string): Promise<{ status: string; text: string }> {
  for (const t0 = Date.now(); Date.now() - t0 < 60_000; await new Promise((r) => setTimeout(r, 50))) {
    const out = await finalStatus(runId);
    if (out) return out;
  }
  throw new Error(`run ${runId} did not settle within 60 s`);
}

/** Run `attack` against the worker: its RSS before, its peak during, the growth (MiB). */
async function measured<T>(attack: () => Promise<T>): Promise<{ result: T; before: number; peak: number; growth: number }> {
  resetPeak(worker.pid!);
  const before = memory(worker.pid!).rss;
  const result = await attack();
  const peak = memory(worker.pid!).peak;
  return { result, before, peak, growth: peak - before };
}

const report = (what: string, m: { before: number; peak: number; growth: number }, answers: typeof calls) =>
  process.stdout.write(
    `[answer-budget] ${what}: worker RSS ${m.before.toFixed(0)} MiB before, peak ${m.peak.toFixed(0)} MiB, +${m.growth.toFixed(0)} MiB; ` +
      `the upstream got out ${answers.map((c) => `${(c.sent / MiB).toFixed(1)} MiB`).join(', ')} of 100 MiB\n`,
  );

beforeAll(async () => {
  upstream = http.createServer(upstreamHandler);
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  stack = await startStack({ worker: false, env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', RUNTIME_SECRET_ENCRYPTION_SECRET: 'answer-budget-test-encryption-secret' } });
  expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/runtime-secrets', { name: 'hook', value: `whsec_${randomBytes(24).toString('base64')}` })).status).toBe(201);
  for (const [slug, path, streaming] of [
    ['small', '/small', false],
    ['json-chunked', '/json-chunked', false],
    ['json-length', '/json-length', false],
    ['stream', '/stream', true],
  ] as const) {
    agents[slug] = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug,
      runtime: { kind: 'a2a', url: `${base}${path}`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', streaming, timeoutMs: 120_000 },
    });
  }
  for (const slug of ['http-json-chunked', 'http-json-length']) {
    agents[slug] = await publishAgent(stack.baseUrl, stack.adminKey, { slug, runtime: { kind: 'http', url: `${base}/${slug}`, secret: 'hook', retries: 0, timeoutMs: 120_000 } });
  }
  worker = spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
  // warm up: the worker has run the a2a runtime (and loaded the SDK) before anything is measured
  expect(await settled(await start('small'))).toEqual({ status: 'completed', text: 'hello back' });
}, 120_000);

afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    worker.kill('SIGTERM');
    await new Promise((r) => worker.once('exit', r));
  }
  await stack?.close();
  upstream?.closeAllConnections();
  await new Promise<void>((r) => (upstream ? upstream.close(() => r()) : r()));
});

describe('issue #43 row 4: a tenant upstream answering 100 MiB to the a2a runtime', () => {
  it('a 100 MiB JSON answer to SendMessage (chunked) fails the run with the budget as reason; RSS growth bounded', async () => {
    const m = await measured(async () => settled(await start('json-chunked')));
    const call = calls.filter((c) => c.path === '/json-chunked').at(-1)!;
    report('one 100 MiB chunked JSON answer', m, [call]);
    expect(m.result.status).toBe('failed');
    expect(m.result.text).toBe(`The upstream agent failed: the upstream's answer exceeds ${BUDGET} bytes (RUNTIME_MAX_ANSWER_BYTES)`);
    // the worker stopped reading: what left the upstream is the budget plus what sockets buffer
    expect(call.closedEarly).toBe(true);
    expect(call.sent).toBeLessThan(BUDGET + 16 * MiB);
    expect(m.growth).toBeLessThan(MAX_GROWTH_ONE_MIB);
  }, 120_000);

  it('three at once (two chunked, one with a Content-Length of 100 MiB): all fail, RSS growth bounded', async () => {
    const before = calls.length;
    const m = await measured(async () => Promise.all(['json-chunked', 'json-chunked', 'json-length'].map(async (slug) => settled(await start(slug)))));
    const answered = calls.slice(before);
    report('three 100 MiB JSON answers at once', m, answered);
    for (const r of m.result) {
      expect(r.status).toBe('failed');
      expect(r.text).toBe(`The upstream agent failed: the upstream's answer exceeds ${BUDGET} bytes (RUNTIME_MAX_ANSWER_BYTES)`);
    }
    expect(answered.map((c) => c.path).sort()).toEqual(['/json-chunked', '/json-chunked', '/json-length']);
    for (const c of answered) {
      expect(c.closedEarly).toBe(true);
      expect(c.sent).toBeLessThan(BUDGET + 16 * MiB);
    }
    expect(m.growth).toBeLessThan(MAX_GROWTH_THREE_MIB);
  }, 180_000);

  it('a stream whose second event is 100 MiB: the run fails at once (no re-subscription), the upstream task is canceled', async () => {
    const before = calls.length;
    const m = await measured(async () => settled(await start('stream')));
    report(`one 100 MiB SSE event (asked: ${calls.slice(before).map((c) => c.method).join(', ')})`, m, calls.slice(before, before + 1));
    expect(m.result.status).toBe('failed');
    expect(m.result.text).toBe(`The upstream agent failed: an event of the upstream's stream exceeds ${BUDGET} bytes (RUNTIME_MAX_EVENT_BYTES)`);
    const methods = calls.slice(before).map((c) => c.method);
    // a hostile answer is not asked for again: no GetTask / SubscribeToTask after it; the task is canceled
    expect(methods).toEqual(['SendStreamingMessage', 'CancelTask']);
    expect(calls[before]!.closedEarly).toBe(true);
    expect(calls[before]!.sent).toBeLessThan(BUDGET + 16 * MiB);
    expect(m.growth).toBeLessThan(MAX_GROWTH_ONE_MIB);
  }, 120_000);

  it('the http runtime: a 100 MiB JSON answer (chunked, or with a Content-Length) fails the run with the budget as reason', async () => {
    const before = calls.length;
    const m = await measured(async () => Promise.all(['http-json-chunked', 'http-json-length'].map(async (slug) => settled(await start(slug)))));
    const answered = calls.slice(before);
    report('two 100 MiB JSON answers of http backends at once', m, answered);
    for (const r of m.result) expect(r).toEqual({ status: 'failed', text: `The agent's backend failed: the backend's answer exceeds ${BUDGET} bytes (RUNTIME_MAX_ANSWER_BYTES)` });
    for (const c of answered) {
      expect(c.closedEarly).toBe(true);
      expect(c.sent).toBeLessThan(BUDGET + 16 * MiB);
    }
    expect(m.growth).toBeLessThan(MAX_GROWTH_THREE_MIB);
  }, 120_000);

  it('the worker is alive and serves other runs', async () => {
    expect(worker.exitCode).toBeNull();
    expect(worker.signalCode).toBeNull();
    expect(await settled(await start('small'))).toEqual({ status: 'completed', text: 'hello back' });
  }, 60_000);
});
