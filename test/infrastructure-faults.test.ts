import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { decodeErrorInfo, decodeStatus, isGrpcError } from '@a2a-js/sdk/errors/grpc';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import { Redis } from 'ioredis';
import { A2AGrpcServer } from '../apps/api/src/grpc/a2a-grpc.server.js';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { TEST_DATABASE_URL } from './support/env.js';
import { freePort, TestRedis } from './support/redis-server.js';
import { readSse } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * PostgreSQL up and answering, but refusing to write: disk full (SQLSTATE 53100, raised by a
 * BEFORE INSERT OR UPDATE trigger on every table) and read-only (`default_transaction_read_only`
 * set on the database and every session ended, as after a failover to a standby: 25006). Every
 * write a client asks for is refused as retryable on every binding — 503 with Retry-After
 * (JSON-RPC v1.0 and v0.3, HTTP+JSON, the admin API), gRPC UNAVAILABLE with `retry-after` in its
 * trailers — and leaves nothing behind; reads go on being served. Once the fault is lifted, the
 * very same request (same messageId, same Idempotency-Key) succeeds, once. A stream open across a
 * full disk stays open and carries the rest of its run once there is room: the worker waited and
 * retried its appends instead of failing the run.
 *
 * Redis out of memory, read-only (a replica), cut from its master (MASTERDOWN) or down: no request
 * waits on it (rate limits fail open, wake-ups and dispatches are fire-and-forget, a blocking
 * SendMessage waits its own timeout), so clients never see the fault; the runs accepted meanwhile
 * complete once it is lifted.
 */
const RETRY_AFTER = '2';
const RUNTIME = {
  kind: 'scripted',
  rules: [
    // first: on a tie of match lengths the earlier rule wins
    { match: { text: '^slow.*' }, steps: [{ type: 'status', status: 'working' }, { type: 'wait', ms: 800 }, { type: 'message', text: 'late' }, { type: 'status', status: 'completed' }] },
    { match: { text: '.*' }, steps: [{ type: 'message', text: 'ok' }, { type: 'status', status: 'completed' }] },
  ],
};
const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';
const TRIGGER = 'zz_test_disk_full';

let stack: Stack;
let agent: PublishedAgent;
let base: string;
let db: pg.Client;
let dbName: string;
let grpcClient: A2AClient;
let rawGrpc: grpc.Client & Record<string, any>;
let tenant: string;
/** A task recorded before any fault: reads of it go on during one. */
let before: string;

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** The stack of the PostgreSQL faults (all three bindings), a client of its own to the database, and the gRPC clients. */
async function startPgStack(): Promise<void> {
  stack = await startStack({ env: { GRPC_PORT: '0', A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'faults',
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON', 'GRPC'],
    a2a: { capabilities: { streaming: true } },
  });
  base = `${stack.baseUrl}${agent.basePath}`;
  tenant = `${agent.orgSlug}/${agent.slug}`;
  db = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await db.connect();
  dbName = (await db.query<{ name: string }>('SELECT current_database() AS name')).rows[0]!.name;
  const card = (await (await fetch(agent.cardUrl)).json()) as Parameters<ClientFactory['createFromAgentCard']>[0];
  grpcClient = await new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(card);
  const Ctor = grpc.makeGenericClientConstructor(A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
  rawGrpc = new Ctor(`127.0.0.1:${stack.api.get(A2AGrpcServer).port}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
  const sent = await rpcV1('SendMessage', { message: v1Message(randomUUID(), 'before the faults') });
  expect(sent.status).toBe(200);
  before = sent.body.result.task.id;
}

async function stopPgStack(): Promise<void> {
  // whatever happened, the database is left writable for the files after this one
  await setDiskFull(false).catch(() => undefined);
  await db?.query(`ALTER DATABASE ${ident(dbName)} RESET default_transaction_read_only`).catch(() => undefined);
  await db?.end().catch(() => undefined);
  rawGrpc?.close();
  await stack?.close();
}

// ---- the faults -------------------------------------------------------------------------------

/** Disk full: every row written to any table (partitions included) fails with SQLSTATE 53100. */
async function setDiskFull(on: boolean): Promise<void> {
  const tables = (
    await db.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> '_prisma_migrations'`,
    )
  ).rows.map((r) => r.name);
  if (on) {
    await db.query(`CREATE OR REPLACE FUNCTION ${TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'could not extend file "base/16384/16385": No space left on device' USING ERRCODE = '53100', HINT = 'Check free disk space.'; END $$`);
    for (const t of tables) await db.query(`CREATE TRIGGER ${TRIGGER} BEFORE INSERT OR UPDATE ON ${ident(t)} FOR EACH ROW EXECUTE FUNCTION ${TRIGGER}()`);
  } else {
    for (const t of tables) await db.query(`DROP TRIGGER IF EXISTS ${TRIGGER} ON ${ident(t)}`);
  }
}

/**
 * Read-only: the database's sessions start read-only (a standby, or an operator's
 * `default_transaction_read_only`); every session of the stack is ended so its pools reconnect
 * (what a failover does). Writes fail with SQLSTATE 25006.
 */
async function setReadOnly(on: boolean): Promise<void> {
  await db.query(on ? `ALTER DATABASE ${ident(dbName)} SET default_transaction_read_only = on` : `ALTER DATABASE ${ident(dbName)} RESET default_transaction_read_only`);
  await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  // the stack's pools drop the ended sessions when their sockets close (a few ms on loopback)
  await new Promise((r) => setTimeout(r, 300));
}

// ---- the bindings -----------------------------------------------------------------------------

const v1Message = (messageId: string, text: string) => ({ messageId, role: 'ROLE_USER', parts: [{ text }] });
const v03Message = (messageId: string, text: string) => ({ kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text }] });

interface HttpAnswer {
  status: number;
  retryAfter: string | null;
  contentType: string | null;
  body: any;
}

async function http(url: string, init: RequestInit): Promise<HttpAnswer> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), contentType: res.headers.get('content-type'), body: text ? JSON.parse(text) : undefined };
}

const rpcV1 = (method: string, params: unknown) =>
  http(base, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) });
const rpcV03 = (method: string, params: unknown) =>
  http(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) });
const rest = (path: string, body?: unknown) =>
  http(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'a2a-version': '1.0', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
const createAgent = (slug: string, idempotencyKey: string) => adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug, name: slug, description: 'made during a fault' }, { 'idempotency-key': idempotencyKey });

/** A gRPC SendMessage by grpc-js itself (the SDK's client does not hand out trailers): its status and trailers. */
function rawGrpcSend(messageId: string): Promise<{ code: number; trailers: grpc.Metadata; details: string }> {
  const request = SendMessageRequest.fromJSON({ tenant, message: v1Message(messageId, 'raw grpc') });
  return new Promise((resolve) => {
    rawGrpc.sendMessage(request, new grpc.Metadata(), (err: grpc.ServiceError | null) => {
      resolve(err ? { code: err.code, trailers: err.metadata, details: err.details } : { code: grpc.status.OK, trailers: new grpc.Metadata(), details: '' });
    });
  });
}

const grpcRequest = (messageId: string, text: string) => SendMessageRequest.fromJSON({ message: v1Message(messageId, text) });

/** The SDK's gRPC error for a call: its status and the ErrorInfo of `grpc-status-details-bin`. */
async function grpcFailure(call: () => Promise<unknown>): Promise<{ status: number; reason: string; metadata: Record<string, string>; message: string }> {
  let caught: unknown;
  try {
    await call();
  } catch (e) {
    caught = e;
  }
  expect(isGrpcError(caught), `expected a gRPC error, got ${String(caught)}`).toBe(true);
  const err = caught as { status: number; statusDetailsBin?: Buffer; message: string };
  expect(err.statusDetailsBin, err.message).toBeDefined();
  const info = decodeErrorInfo(decodeStatus(err.statusDetailsBin!).details[0]!.value);
  return { status: err.status, reason: info.reason, metadata: info.metadata, message: err.message };
}

/** The messageIds each binding sends during a fault, and sends again once it is lifted. */
interface Attempt {
  rpcV1: string;
  rpcV03: string;
  rest: string;
  grpc: string;
  rawGrpc: string;
  streamV1: string;
  streamRest: string;
  /** admin: the new agent's slug and the request's Idempotency-Key */
  slug: string;
  idempotencyKey: string;
}

function newAttempt(): Attempt {
  return {
    rpcV1: randomUUID(),
    rpcV03: randomUUID(),
    rest: randomUUID(),
    grpc: randomUUID(),
    rawGrpc: randomUUID(),
    streamV1: randomUUID(),
    streamRest: randomUUID(),
    slug: `faulty-${randomUUID().slice(0, 8)}`,
    idempotencyKey: randomUUID(),
  };
}

/** A 503 with Retry-After whose body is a JSON-RPC error saying the service is temporarily unavailable. */
function expectJsonRpc503(a: HttpAnswer, version: '1.0' | '0.3', what: string): void {
  expect(a.status, `${what}: ${JSON.stringify(a.body)}`).toBe(503);
  expect(a.retryAfter, what).toBe(RETRY_AFTER);
  expect(a.contentType, what).toMatch(/^application\/json/);
  expect(a.body, what).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32603, message: expect.stringContaining('temporarily unavailable') } });
  if (version === '1.0') {
    expect(a.body.error.data, what).toEqual([{ '@type': ERROR_INFO, reason: 'INTERNAL_ERROR', domain: 'a2a-protocol.org', metadata: { retryAfterSeconds: RETRY_AFTER } }]);
  } else {
    expect(a.body.error.data, what).toBeUndefined();
  }
}

function expectRest503(a: HttpAnswer, what: string): void {
  expect(a.status, `${what}: ${JSON.stringify(a.body)}`).toBe(503);
  expect(a.retryAfter, what).toBe(RETRY_AFTER);
  expect(a.contentType, what).toMatch(/^application\/json/);
  expect(a.body.error, what).toMatchObject({ code: 503, status: 'UNAVAILABLE', message: expect.stringContaining('temporarily unavailable') });
  expect(a.body.error.details, what).toEqual([{ '@type': ERROR_INFO, reason: 'INTERNAL_ERROR', domain: 'a2a-protocol.org', metadata: { retryAfterSeconds: RETRY_AFTER } }]);
}

/** Every binding refuses every write of `at` as retryable, and reads go on. */
async function expectRefusedEverywhere(at: Attempt): Promise<void> {
  expectJsonRpc503(await rpcV1('SendMessage', { message: v1Message(at.rpcV1, 'v1.0 during the fault') }), '1.0', 'JSON-RPC v1.0 SendMessage');
  expectJsonRpc503(await rpcV03('message/send', { message: v03Message(at.rpcV03, 'v0.3 during the fault') }), '0.3', 'JSON-RPC v0.3 message/send');
  expectRest503(await rest('/message:send', { message: v1Message(at.rest, 'rest during the fault') }), 'HTTP+JSON message:send');

  // streams: refused before their first event, as a plain error answer (not an SSE stream)
  expectJsonRpc503(await rpcV1('SendStreamingMessage', { message: v1Message(at.streamV1, 'stream during the fault') }), '1.0', 'JSON-RPC v1.0 SendStreamingMessage');
  expectRest503(await rest('/message:stream', { message: v1Message(at.streamRest, 'rest stream during the fault') }), 'HTTP+JSON message:stream');

  // gRPC, through the SDK's client: UNAVAILABLE with the same ErrorInfo
  const viaSdk = await grpcFailure(() => grpcClient.sendMessage(grpcRequest(at.grpc, 'grpc during the fault')));
  expect(viaSdk.status).toBe(grpc.status.UNAVAILABLE);
  expect(viaSdk.reason).toBe('INTERNAL_ERROR');
  expect(viaSdk.metadata).toEqual({ retryAfterSeconds: RETRY_AFTER });
  const streamed = await grpcFailure(async () => {
    for await (const _ of grpcClient.sendMessageStream(grpcRequest(randomUUID(), 'grpc stream during the fault'))) void _;
  });
  expect(streamed.status).toBe(grpc.status.UNAVAILABLE);
  // and by grpc-js itself: the retry hint in the trailers, as RESOURCE_EXHAUSTED carries it
  const raw = await rawGrpcSend(at.rawGrpc);
  expect(raw.code, raw.details).toBe(grpc.status.UNAVAILABLE);
  expect(raw.trailers.get('retry-after')).toEqual([RETRY_AFTER]);

  const admin = await createAgent(at.slug, at.idempotencyKey);
  expect(admin.status, JSON.stringify(admin.body)).toBe(503);
  expect(admin.headers.get('retry-after')).toBe(RETRY_AFTER);
  expect(admin.body.error).toMatchObject({ code: 'service.unavailable', message: expect.stringContaining('temporarily unavailable') });

  // nothing was recorded: no message of any attempt, no agent, no idempotency record
  const ids = [at.rpcV1, at.rpcV03, at.rest, at.grpc, at.rawGrpc, at.streamV1, at.streamRest];
  expect((await db.query('SELECT 1 FROM message_keys WHERE message_id = ANY($1::text[])', [ids])).rowCount).toBe(0);
  expect((await db.query('SELECT 1 FROM agents WHERE slug = $1', [at.slug])).rowCount).toBe(0);
  expect((await db.query('SELECT 1 FROM idempotency_records WHERE key = $1', [at.idempotencyKey])).rowCount).toBe(0);

  // reads are served meanwhile: a task, the card
  const task = await rpcV1('GetTask', { id: before });
  expect(task.status, JSON.stringify(task.body)).toBe(200);
  expect(task.body.result.id).toBe(before);
  expect((await fetch(agent.cardUrl)).status).toBe(200);
  // readiness reports PostgreSQL up: it answers, and refusing writes is not a reason to leave the
  // load balancer (every instance shares the database; clients are told to retry instead)
  const ready = (await (await fetch(`${stack.baseUrl}/readyz`)).json()) as { details: Record<string, { status: string }> };
  expect(ready.details.postgresql?.status).toBe('up');
  expect(ready.details.migrations?.status).toBe('up');
}

/** `send` until it is not refused as unavailable (the pools may still hold a session ended by the fault's lifting). */
async function untilServed<T extends { status: number }>(send: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    const answer = await send();
    if (answer.status !== 503 || i >= 20) return answer;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The fault lifted: each refused request, sent again as it was, succeeds and has exactly one effect. */
async function expectServedOnce(at: Attempt): Promise<void> {
  const v1 = await untilServed(() => rpcV1('SendMessage', { message: v1Message(at.rpcV1, 'v1.0 retried') }));
  expect(v1.status, JSON.stringify(v1.body)).toBe(200);
  expect(v1.body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
  const v03 = await untilServed(() => rpcV03('message/send', { message: v03Message(at.rpcV03, 'v0.3 retried') }));
  expect(v03.status, JSON.stringify(v03.body)).toBe(200);
  expect(v03.body.result).toMatchObject({ kind: 'task', status: { state: 'completed' } });
  const viaRest = await untilServed(() => rest('/message:send', { message: v1Message(at.rest, 'rest retried') }));
  expect(viaRest.status, JSON.stringify(viaRest.body)).toBe(200);
  expect(viaRest.body.task.status.state).toBe('TASK_STATE_COMPLETED');
  const viaGrpc = (await grpcClient.sendMessage(grpcRequest(at.grpc, 'grpc retried'))) as Task;
  expect(viaGrpc.id).toEqual(expect.any(String));
  const raw = await rawGrpcSend(at.rawGrpc);
  expect(raw.code, raw.details).toBe(grpc.status.OK);
  const admin = await untilServed(() => createAgent(at.slug, at.idempotencyKey));
  expect(admin.status, JSON.stringify(admin.body)).toBe(201);

  // the same requests once more: the same task / agent, no second effect
  expect((await rpcV1('SendMessage', { message: v1Message(at.rpcV1, 'v1.0 retried') })).body.result.task.id).toBe(v1.body.result.task.id);
  expect((await rpcV03('message/send', { message: v03Message(at.rpcV03, 'v0.3 retried') })).body.result.id).toBe(v03.body.result.id);
  const again = await createAgent(at.slug, at.idempotencyKey);
  expect(again.status).toBe(201);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.body.id).toBe(admin.body.id);

  const runs = await db.query<{ message_id: string; runs: string }>(
    'SELECT message_id, count(DISTINCT run_id) AS runs FROM message_keys WHERE message_id = ANY($1::text[]) GROUP BY message_id',
    [[at.rpcV1, at.rpcV03, at.rest, at.grpc, at.rawGrpc]],
  );
  expect(Object.fromEntries(runs.rows.map((r) => [r.message_id, Number(r.runs)]))).toEqual({ [at.rpcV1]: 1, [at.rpcV03]: 1, [at.rest]: 1, [at.grpc]: 1, [at.rawGrpc]: 1 });
  expect((await db.query('SELECT 1 FROM agents WHERE slug = $1', [at.slug])).rowCount).toBe(1);
}

describe('PostgreSQL refusing writes', () => {
  beforeAll(startPgStack);
  afterAll(stopPgStack);

  it('disk full (53100): every binding answers 503 / UNAVAILABLE with Retry-After and records nothing; lifted, the same requests succeed once', async () => {
    const at = newAttempt();
    await setDiskFull(true);
    try {
      await expectRefusedEverywhere(at);
    } finally {
      await setDiskFull(false);
    }
    await expectServedOnce(at);
  });

  it('read-only (25006, the sessions of a standby): every binding answers 503 / UNAVAILABLE with Retry-After and records nothing; lifted, the same requests succeed once', async () => {
    const at = newAttempt();
    await setReadOnly(true);
    try {
      await expectRefusedEverywhere(at);
    } finally {
      await setReadOnly(false);
    }
    await expectServedOnce(at);
  });

  it('a stream open across a disk-full spell stays open, then carries the rest of its run: the worker waited and retried its appends; no error frame', async () => {
    let fault: Promise<void> | undefined;
    let liftedAt = Infinity;
    const arrivals: number[] = [];
    const streamed = await readSse(
      base,
      { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendStreamingMessage', params: { message: v1Message(randomUUID(), 'slow through a full disk') } }) },
      {
        timeoutMs: 25_000,
        onFrame: (frame, i) => {
          arrivals.push(Date.now());
          // working: the runtime now waits 800 ms, then appends its message — into a full disk
          if (i === 1) {
            expect(JSON.parse(frame.data).result.statusUpdate.status.state).toBe('TASK_STATE_WORKING');
            fault = (async () => {
              await setDiskFull(true);
              await new Promise((r) => setTimeout(r, 2_000));
              await setDiskFull(false);
              liftedAt = Date.now();
            })();
          }
        },
      },
    );
    await fault;
    expect(streamed.status).toBe(200);
    expect(streamed.ended).toBe(true);
    expect(streamed.frames.filter((f) => f.event !== undefined)).toEqual([]);
    const results = streamed.frames.map((f) => JSON.parse(f.data).result);
    expect(results.at(-1).statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
    // everything after `working` was appended once the disk had room again
    for (const at of arrivals.slice(2)) expect(at).toBeGreaterThanOrEqual(liftedAt);
    const task = await rpcV1('GetTask', { id: results[0].task.id });
    expect(task.body.result.history.filter((m: { role: string }) => m.role === 'ROLE_AGENT').map((m: { parts: Array<{ text: string }> }) => m.parts[0]!.text)).toEqual(['late']);
  });
});

describe('Redis refusing or gone', () => {
  let redis: TestRedis;
  let control: Redis;
  let rstack: Stack;
  let rbase: string;

  beforeAll(async () => {
    redis = await TestRedis.start();
    control = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    control.on('error', () => undefined);
    rstack = await startStack({ env: { REDIS_URL: redis.url, OUTBOX_RELAY_INTERVAL_MS: '100', A2A_BLOCKING_TIMEOUT_MS: '1500' } });
    const a = await publishAgent(rstack.baseUrl, rstack.adminKey, { slug: 'redis-faults', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'], a2a: { capabilities: { streaming: true } } });
    rbase = `${rstack.baseUrl}${a.basePath}`;
  });
  afterAll(async () => {
    // the stack closes its Redis connections cleanly only while its Redis is up and writable
    await redis?.start().catch(() => undefined);
    await control?.replicaof('NO', 'ONE').catch(() => undefined);
    await rstack?.close();
    control?.disconnect();
    await redis?.stop();
  });

  const rpc = (method: string, params: unknown) =>
    http(rbase, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });

  /** Every surface answers as if Redis were fine, within its own bounds; returns the tasks it accepted. */
  async function expectUnaffected(what: string): Promise<string[]> {
    let t0 = Date.now();
    const accepted = await rpc('SendMessage', { message: v1Message(randomUUID(), `${what}: returned at once`), configuration: { returnImmediately: true } });
    expect(accepted.status, `${what}: ${JSON.stringify(accepted.body)}`).toBe(200);
    expect(accepted.body.result.task.id, what).toEqual(expect.any(String));
    expect(Date.now() - t0, what).toBeLessThan(2_000);

    // a blocking call waits its own timeout (1.5 s) for the wake-ups, then answers the task as it is
    t0 = Date.now();
    const blocking = await rpc('SendMessage', { message: v1Message(randomUUID(), `${what}: blocking`) });
    expect(blocking.status, `${what}: ${JSON.stringify(blocking.body)}`).toBe(200);
    expect(blocking.body.result.task.id, what).toEqual(expect.any(String));
    expect(Date.now() - t0, what).toBeLessThan(6_000);

    // a stream opens with the task (its wake-up subscription waits at most 1 s; the poll covers the rest)
    t0 = Date.now();
    const streamed = await readSse(
      rbase,
      { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'SendStreamingMessage', params: { message: v1Message(randomUUID(), `${what}: streamed`) } }) },
      { max: 1, timeoutMs: 5_000 },
    );
    expect(streamed.status, `${what}: ${streamed.body ?? ''}`).toBe(200);
    const first = JSON.parse(streamed.frames[0]!.data);
    expect(first.result.task.id, what).toEqual(expect.any(String));
    expect(Date.now() - t0, what).toBeLessThan(3_000);

    const task = await http(`${rbase}/tasks/${accepted.body.result.task.id}`, { headers: { 'a2a-version': '1.0' } });
    expect(task.status, what).toBe(200);
    expect((await adminRequest(rstack.baseUrl, rstack.adminKey, 'GET', '/v1/agents')).status, what).toBe(200);
    // a failed authentication is counted in Redis after the fact: still a plain 401
    const wrong = await adminRequest(rstack.baseUrl, `aaas_${randomUUID().replace(/-/g, '').slice(0, 8)}_${'c'.repeat(32)}`, 'GET', '/v1/agents');
    expect(wrong.status, what).toBe(401);
    return [accepted.body.result.task.id, blocking.body.result.task.id, first.result.task.id];
  }

  /** The runs accepted during the fault all complete once it is lifted (their dispatches were kept in the outbox). */
  async function expectCompleted(ids: string[]): Promise<void> {
    for (const id of ids) {
      await expect
        .poll(async () => (await rpc('GetTask', { id })).body.result?.status?.state, { timeout: 20_000, interval: 200 })
        .toBe('TASK_STATE_COMPLETED');
    }
  }

  it('out of memory (OOM command not allowed): clients see nothing of it', async () => {
    await control.config('SET', 'maxmemory', '1');
    let ids: string[];
    try {
      await expect(control.set('probe', '1')).rejects.toThrow(/^OOM /);
      ids = await expectUnaffected('OOM');
    } finally {
      await control.config('SET', 'maxmemory', '0');
    }
    await expectCompleted(ids);
  });

  it('read-only (a replica: READONLY), then cut from its master (MASTERDOWN): clients see nothing of it', async () => {
    const nowhere = await freePort();
    await control.replicaof('127.0.0.1', String(nowhere));
    let ids: string[];
    try {
      await expect(control.set('probe', '1')).rejects.toThrow(/^READONLY /);
      ids = await expectUnaffected('READONLY');
      await control.config('SET', 'replica-serve-stale-data', 'no');
      await expect(control.get('probe')).rejects.toThrow(/^MASTERDOWN /);
      ids.push(...(await expectUnaffected('MASTERDOWN')));
    } finally {
      await control.config('SET', 'replica-serve-stale-data', 'yes');
      await control.replicaof('NO', 'ONE');
    }
    await expectCompleted(ids);
  });

  it('down: clients see nothing of it', async () => {
    await redis.stop();
    let ids: string[];
    try {
      ids = await expectUnaffected('down');
    } finally {
      await redis.start();
    }
    await expectCompleted(ids);
  });
});
