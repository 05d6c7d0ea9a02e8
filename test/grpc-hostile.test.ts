import { randomBytes, randomUUID } from 'node:crypto';
import type http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as sdk from '@a2a-js/sdk';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import { decodeErrorInfo, decodeStatus } from '@a2a-js/sdk/errors/grpc';
import { A2AGrpcServer } from '../apps/api/src/grpc/a2a-grpc.server.js';
import { runGrpcFuzz } from '../bench/lib/fuzz.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { connect, encodeRequest, grpcFrame, rawCall, startCall, type RawCall } from './support/grpc-raw.js';
import { prng } from './support/prng.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43 on the gRPC listener, with real HTTP/2 and @grpc/grpc-js clients as the attacker:
 * what a stranger can hold before authentication (per-address caps on open calls and on calls
 * without a valid key, the smaller message limit before authentication, HTTP/2's stream limit),
 * a key's prefix no longer spending the key's rate limit (row 10), error trailers bounded (row
 * 11), malformed protobuf, NUL characters, bad compression and a bad grpc-timeout answered
 * INVALID_ARGUMENT and the stream cap RESOURCE_EXHAUSTED (row 13). Memory and /healthz under these
 * attacks are measured in test/grpc-hostile-process.test.ts.
 */
const CALLS_PER_ADDRESS = 12;
const PREAUTH_PER_ADDRESS = 6;
const PREAUTH_MESSAGE = 64 * 1024;
const PER_KEY = 300;

let stack: Stack;
let target: string;
let grpcServer: A2AGrpcServer;
let tenant: string;
let keyedTenant: string;
let key: string;
let Client: grpc.ServiceClientConstructor;
let client: grpc.Client & Record<string, any>;

beforeAll(async () => {
  stack = await startStack({
    worker: false,
    env: {
      GRPC_PORT: '0',
      GRPC_MAX_CALLS_PER_ADDRESS: String(CALLS_PER_ADDRESS),
      GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS: String(PREAUTH_PER_ADDRESS),
      GRPC_PREAUTH_MAX_MESSAGE_BYTES: String(PREAUTH_MESSAGE),
      GRPC_RECEIVE_TIMEOUT_MS: '20000',
      RATE_LIMIT_PER_KEY: String(PER_KEY),
      MAX_STREAMS_PER_CALLER: '2',
    },
  });
  await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'open',
    transports: ['JSONRPC', 'GRPC'],
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
  tenant = `${stack.orgSlug}/open`;
  await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'keyed', transports: ['JSONRPC', 'GRPC'], security: { scheme: 'apiKey' } });
  keyedTenant = `${stack.orgSlug}/keyed`;
  key = (await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] })).body.key;
  grpcServer = stack.api.get(A2AGrpcServer);
  target = `http://127.0.0.1:${grpcServer.port}`;
  Client = grpc.makeGenericClientConstructor(A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
  client = new Client(`127.0.0.1:${grpcServer.port}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
});

afterAll(async () => {
  client?.close();
  await stack?.close();
});

const md = (entries: Record<string, string> = {}) => {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
};

/** A unary call with the generic client: its error (null when it succeeded) and response. */
function unary(method: string, request: unknown, metadata: grpc.Metadata = md()): Promise<{ err: grpc.ServiceError | null; res: any }> {
  return new Promise((resolve) => client[method](request, metadata, { deadline: Date.now() + 15_000 }, (err: grpc.ServiceError | null, res: unknown) => resolve({ err, res })));
}

const send = (text: string, extra: Record<string, unknown> = {}) =>
  sdk.SendMessageRequest.fromJSON({ tenant, message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra }, configuration: { returnImmediately: true } });

/** Until the gate holds no call (every call ended and was released). */
async function gateEmpty(): Promise<void> {
  await expect.poll(() => grpcServer.gate.counts, { timeout: 5_000, interval: 50 }).toEqual({ open: 0, preauth: 0 });
}

/** `n` SendMessage calls on `session` that announce a message and never finish it. */
function openCalls(session: http2.ClientHttp2Session, n: number, metadata: Record<string, string> = {}): RawCall[] {
  return Array.from({ length: n }, () => {
    const call = startCall(session, 'SendMessage', metadata, 20_000);
    call.stream.write(grpcFrame(Buffer.alloc(0), 1_000));
    return call;
  });
}

describe('what a stranger can hold before authentication', () => {
  it('the listener advertises GRPC_MAX_CONCURRENT_STREAMS (100) per connection', async () => {
    const session = await connect(target);
    try {
      expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
    } finally {
      session.destroy();
    }
  });

  it('calls without a valid key: GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS at once, then RESOURCE_EXHAUSTED unread; a key is still served; another address is not affected', async () => {
    const session = await connect(target);
    const other = await connect(target, '127.0.0.9');
    try {
      const held = openCalls(session, PREAUTH_PER_ADDRESS);
      await expect.poll(() => grpcServer.gate.counts.preauth).toBe(PREAUTH_PER_ADDRESS);
      const refused = await rawCall(session, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }));
      expect(refused.status).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(refused.message).toContain('GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS');
      // the same call with a valid key is not one before authentication: served (an unknown task)
      expect((await rawCall(session, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }), { 'x-api-key': key })).status).toBe(grpc.status.NOT_FOUND);
      expect((await rawCall(other, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }))).status).toBe(grpc.status.NOT_FOUND);
      for (const c of held) c.stream.close();
      await gateEmpty();
      expect((await rawCall(session, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }))).status).toBe(grpc.status.NOT_FOUND);
    } finally {
      session.destroy();
      other.destroy();
    }
  });

  it('open calls: GRPC_MAX_CALLS_PER_ADDRESS at once from one address over all its connections, with a key too; then RESOURCE_EXHAUSTED', async () => {
    const sessions = await Promise.all([connect(target), connect(target)]);
    try {
      const held = [...openCalls(sessions[0]!, CALLS_PER_ADDRESS / 2, { 'x-api-key': key }), ...openCalls(sessions[1]!, CALLS_PER_ADDRESS / 2, { 'x-api-key': key })];
      await expect.poll(() => grpcServer.gate.counts.open).toBe(CALLS_PER_ADDRESS);
      const refused = await rawCall(sessions[0]!, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }), { 'x-api-key': key });
      expect(refused.status).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(refused.message).toContain('GRPC_MAX_CALLS_PER_ADDRESS');
      for (const c of held) c.stream.close();
      await gateEmpty();
    } finally {
      for (const s of sessions) s.destroy();
    }
  });

  it('a health Watch stays open without holding a place before authentication (only its open call counts)', async () => {
    const session = await connect(target);
    try {
      const watch = startCall(session, '/grpc.health.v1.Health/Watch', {}, 20_000);
      let frames = 0;
      watch.stream.on('data', () => frames++);
      watch.stream.end(grpcFrame(Buffer.alloc(0)));
      await expect.poll(() => frames).toBeGreaterThan(0);
      expect(grpcServer.gate.counts).toEqual({ open: 1, preauth: 0 });
      watch.stream.close();
      await gateEmpty();
    } finally {
      session.destroy();
    }
  });

  it('a message over GRPC_PREAUTH_MAX_MESSAGE_BYTES is RESOURCE_EXHAUSTED without a valid key, served with one (up to REQUEST_BODY_LIMIT_BYTES)', async () => {
    const big = 'x'.repeat(PREAUTH_MESSAGE + 10_000);
    const anonymous = await unary('sendMessage', send(big));
    expect(anonymous.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(anonymous.err?.details).toContain('GRPC_PREAUTH_MAX_MESSAGE_BYTES');
    const wrongKey = await unary('sendMessage', send(big), md({ 'x-api-key': `aaas_${key.slice(5, 13)}_${'w'.repeat(32)}` }));
    expect(wrongKey.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const keyed = await unary('sendMessage', send(big), md({ 'x-api-key': key }));
    expect(keyed.err).toBeNull();
    expect(keyed.res.task?.id ?? keyed.res.payload?.value?.id).toBeTruthy();
    const tooBig = await unary('sendMessage', send('x'.repeat(1024 * 1024 + 10)), md({ 'x-api-key': key }));
    expect(tooBig.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await gateEmpty();
  });
});

describe('row 10: a key is counted only once it authenticated', () => {
  it(`${PER_KEY + 100} calls presenting the key's prefix with wrong secrets leave the key served; they count against their address`, async () => {
    const prefix = /^aaas_([A-Za-z0-9]{8})_/.exec(key)![1]!;
    const codes = new Map<number, number>();
    for (let i = 0; i < PER_KEY + 100; i++) {
      const { err } = await unary('getTask', sdk.GetTaskRequest.fromJSON({ tenant: keyedTenant, id: randomUUID() }), md({ 'x-api-key': `aaas_${prefix}_${randomBytes(16).toString('hex')}` }));
      codes.set(err?.code ?? 0, (codes.get(err?.code ?? 0) ?? 0) + 1);
    }
    // the address's failures: UNAUTHENTICATED, then (past RATE_LIMIT_AUTH_FAILURES_PER_IP) RESOURCE_EXHAUSTED
    expect(codes.get(grpc.status.UNAUTHENTICATED)).toBeGreaterThan(0);
    expect(codes.get(grpc.status.RESOURCE_EXHAUSTED)).toBeGreaterThan(0);
    const { err } = await unary('getTask', sdk.GetTaskRequest.fromJSON({ tenant: keyedTenant, id: randomUUID() }), md({ 'x-api-key': key }));
    expect(err?.code).toBe(grpc.status.NOT_FOUND);
  }, 60_000);
});

describe('row 11: error trailers are bounded', () => {
  it('a 100,000-character id is answered NOT_FOUND at once; the message and ErrorInfo echo at most a few hundred characters of it', async () => {
    const id = 'i'.repeat(100_000);
    const t0 = performance.now();
    const { err } = await unary('getTask', sdk.GetTaskRequest.fromJSON({ tenant, id }), md({ 'x-api-key': key }));
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(err?.code).toBe(grpc.status.NOT_FOUND);
    expect(Buffer.byteLength(err!.details)).toBeLessThanOrEqual(512);
    const details = err!.metadata.get('grpc-status-details-bin')[0] as Buffer;
    expect(details.length).toBeLessThan(2_048);
    const status = decodeStatus(details);
    expect(status.message.length).toBeLessThanOrEqual(400);
    const info = decodeErrorInfo(status.details[0]!.value);
    expect(info.reason).toBe('TASK_NOT_FOUND');
    for (const v of Object.values(info.metadata)) expect(v.length).toBeLessThanOrEqual(200);
  });
});

describe('row 13: malformed input is a client error, never INTERNAL', () => {
  it('bytes that are no protobuf of the method: INVALID_ARGUMENT with ErrorInfo, for every method', async () => {
    const session = await connect(target);
    try {
      const random = prng(43);
      const samples = [Buffer.from([0xff, 0xff, 0xff]), Buffer.from([0x0a, 0x05, 0x01]), Buffer.from([0x0b]), Buffer.from([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f])];
      for (let i = 0; i < 40; i++) samples.push(Buffer.from(Array.from({ length: 1 + Math.floor(random() * 64) }, () => Math.floor(random() * 256))));
      const methods = ['SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask', 'CreateTaskPushNotificationConfig', 'GetExtendedAgentCard'];
      const codes = new Map<number | null, number>();
      for (const [i, bytes] of samples.entries()) {
        const outcome = await rawCall(session, methods[i % methods.length]!, grpcFrame(bytes), { 'x-api-key': key }, 10_000);
        codes.set(outcome.status, (codes.get(outcome.status) ?? 0) + 1);
        expect(outcome.status, `${methods[i % methods.length]} ${bytes.toString('hex')}`).not.toBe(grpc.status.INTERNAL);
        expect(outcome.status).not.toBeNull();
      }
      // most random bytes do not decode at all
      expect(codes.get(grpc.status.INVALID_ARGUMENT)).toBeGreaterThan(samples.length / 2);
      const garbage = await rawCall(session, 'GetTask', grpcFrame(Buffer.from([0xff, 0xff, 0xff])));
      expect(garbage.status).toBe(grpc.status.INVALID_ARGUMENT);
      const info = decodeErrorInfo(decodeStatus(Buffer.from(garbage.headers['grpc-status-details-bin']!, 'base64')).details[0]!.value);
      expect(info.reason).toBe('INVALID_PARAMS');
      expect(garbage.message).toMatch(/not a valid GetTask request message/);
    } finally {
      session.destroy();
    }
  });

  it('a NUL in the tenant, in a message extension or in a text part, and nesting past 64 levels: INVALID_ARGUMENT naming the field, before anything is looked up', async () => {
    const nulTenant = await unary('getTask', sdk.GetTaskRequest.fromJSON({ tenant: `${stack.orgSlug}\u0000/open`, id: randomUUID() }));
    expect(nulTenant.err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(nulTenant.err?.details).toMatch(/^tenant: .*NUL/);
    const nulExtension = await unary('sendMessage', send('hi', { extensions: ['https://example.test/ext\u0000'] }), md({ 'x-api-key': key }));
    expect(nulExtension.err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(nulExtension.err?.details).toMatch(/^message\.extensions\.0: .*NUL/);
    const nulText = await unary('sendMessage', send('a\u0000b'));
    expect(nulText.err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100; i++) deep = { d: deep };
    const nested = await unary('sendMessage', send('hi', { metadata: deep }));
    expect(nested.err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(nested.err?.details).toMatch(/nested deeper than 64/);
  });

  it('a message that does not decompress (grpc-encoding gzip) and an unparsable grpc-timeout: INVALID_ARGUMENT; a well-compressed one is served', async () => {
    const session = await connect(target);
    try {
      const bad = await rawCall(session, 'GetTask', grpcFrame(Buffer.from('not gzip at all'), undefined, true), { 'grpc-encoding': 'gzip' });
      expect(bad.status).toBe(grpc.status.INVALID_ARGUMENT);
      const body = encodeRequest('getTask', { tenant, id: randomUUID() }).subarray(5);
      const good = await rawCall(session, 'GetTask', grpcFrame(gzipSync(body), undefined, true), { 'grpc-encoding': 'gzip' });
      expect(good.status).toBe(grpc.status.NOT_FOUND);
      const timeout = await rawCall(session, 'GetTask', encodeRequest('getTask', { tenant, id: randomUUID() }), { 'grpc-timeout': `${'9'.repeat(5_000)}x` });
      expect(timeout.status).toBe(grpc.status.INVALID_ARGUMENT);
      expect(timeout.headerBytes).toBeLessThan(1_024);
    } finally {
      session.destroy();
    }
  });

  it('a caller past MAX_STREAMS_PER_CALLER gets RESOURCE_EXHAUSTED, not INVALID_ARGUMENT', async () => {
    const streams = [0, 1].map(() => client.sendStreamingMessage(send('hold'), md({ 'x-api-key': key })) as grpc.ClientReadableStream<unknown>);
    // cancelled below: their CANCELLED is expected
    for (const s of streams) s.on('error', () => undefined);
    try {
      for (const s of streams) await new Promise((resolve) => s.once('data', resolve));
      const third = client.sendStreamingMessage(send('hold'), md({ 'x-api-key': key })) as grpc.ClientReadableStream<unknown>;
      const err = await new Promise<grpc.ServiceError>((resolve) => {
        third.on('data', () => undefined);
        third.on('error', resolve);
      });
      expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(err.details).toContain('too many open streams');
    } finally {
      for (const s of streams) s.cancel();
    }
  });
});

describe('bounded gRPC fuzz (npm run fuzz runs a longer one)', () => {
  it('1,500 hostile calls, raw and structured (fixed seed): no INTERNAL, UNKNOWN, DATA_LOSS or UNAVAILABLE, none unanswered in 5 s', async () => {
    const report = await runGrpcFuzz({ grpcUrl: target, tenant, key }, { count: 1_500, seed: 43, concurrency: 8 });
    expect(report.requests + (report.histogram['client-refused'] ?? 0)).toBe(1_500);
    expect(report.failures, JSON.stringify(report.failures, null, 1)).toEqual([]);
    // the fuzz reached the code, not only one error path
    expect(Object.keys(report.histogram)).toEqual(expect.arrayContaining(['OK(message)', 'INVALID_ARGUMENT', 'NOT_FOUND', 'FAILED_PRECONDITION']));
  }, 120_000);
});
