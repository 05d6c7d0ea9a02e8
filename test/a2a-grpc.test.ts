import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as grpc from '@grpc/grpc-js';
import health from 'grpc-health-check';
import { SendMessageRequest, StreamResponse, Task, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { decodeErrorInfo, decodeStatus, isGrpcError, type GrpcA2AError } from '@a2a-js/sdk/errors/grpc';
import type { A2AExtensionPlugin } from '#libs/extensions';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';
import { A2AGrpcServer } from '../apps/api/src/grpc/a2a-grpc.server.js';

/**
 * The A2A gRPC binding (A2A v1.0 §10) with the official `@a2a-js/sdk` gRPC client as the peer:
 * every RPC of lf.a2a.v1.A2AService, streaming, cut-and-resume with request metadata
 * `last-event-id`, extensions, authentication, the §5.4 status codes with ErrorInfo, health —
 * and one scenario that tells the same story over JSON-RPC, HTTP+JSON and gRPC.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'multi',
      match: { text: '^multi' },
      steps: [
        { type: 'status', status: 'working', message: 'Starting' },
        { type: 'artifact', artifactId: 'report', name: 'report.txt', content: { text: 'abcdef' }, chunks: 2 },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
    {
      name: 'paced',
      match: { text: '^paced' },
      steps: [
        { type: 'status', status: 'working', message: 'one' },
        { type: 'wait', ms: 300 },
        { type: 'status', status: 'working', message: 'two' },
        { type: 'wait', ms: 300 },
        { type: 'status', status: 'working', message: 'three' },
        { type: 'wait', ms: 300 },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong' }] },
  ],
};

const STAMP_URI = 'https://example.test/extensions/grpc-stamp/v1';
const stamp: A2AExtensionPlugin<{ prefix: string }> = {
  uri: STAMP_URI,
  description: 'Appends a stamp part to every message (test extension).',
  params: z.strictObject({ prefix: z.string().min(1) }),
  onMessage: (m, p) => ({ ...m, parts: [...m.parts, { text: `${p.prefix} stamped` }] }),
};

const PROFILE = {
  capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true },
  extendedCard: { description: 'the extended card', skillsProjection: [{ id: 'secret', name: 'Secret', description: 'for members', tags: ['x'] }] },
};

let stack: Stack;
let agent: PublishedAgent;
let secured: PublishedAgent;
let strict: PublishedAgent;
let grpcAddress: string;
let client: A2AClient;
let invokeKey: string;
let weakKey: string;

const send = (text: string, configuration?: Record<string, unknown>) =>
  SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] }, ...(configuration ? { configuration } : {}) });

async function cardOf(a: PublishedAgent): Promise<any> {
  return (await fetch(a.cardUrl)).json();
}

async function grpcClientFor(a: PublishedAgent): Promise<A2AClient> {
  return new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(await cardOf(a));
}

/** The SDK's gRPC error, with the ErrorInfo decoded from `grpc-status-details-bin`. */
async function grpcFailure(p: Promise<unknown> | (() => Promise<unknown>)): Promise<{ err: GrpcA2AError; status: number; reason: string; domain: string; metadata: Record<string, string> }> {
  let caught: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    caught = e;
  }
  expect(isGrpcError(caught), String(caught)).toBe(true);
  const err = caught as GrpcA2AError;
  expect(err.statusDetailsBin).toBeDefined();
  const status = decodeStatus(err.statusDetailsBin!);
  expect(status.code).toBe(err.status);
  expect(status.details[0]!.typeUrl).toBe('type.googleapis.com/google.rpc.ErrorInfo');
  const info = decodeErrorInfo(status.details[0]!.value);
  return { err, status: err.status, reason: info.reason, domain: info.domain, metadata: info.metadata };
}

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const eventIdOf = (ev: StreamResponse): string | undefined => (ev.payload?.value as { metadata?: Record<string, unknown> } | undefined)?.metadata?.eventId as string | undefined;

beforeAll(async () => {
  stack = await startStack({
    extensions: [stamp],
    env: { GRPC_PORT: '0', STREAM_POLL_INTERVAL_MS: '250', A2A_BLOCKING_TIMEOUT_MS: '10000', PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret', PUSH_ALLOWED_CIDRS: '127.0.0.0/8' },
  });
  const transports = ['JSONRPC', 'HTTP+JSON', 'GRPC'] as const;
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'grpc-agent', runtime: RUNTIME, transports: [...transports], a2a: PROFILE });
  secured = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'grpc-secured', runtime: RUNTIME, transports: [...transports], a2a: PROFILE, security: { scheme: 'apiKey' } });
  strict = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'grpc-strict',
    runtime: RUNTIME,
    transports: [...transports],
    a2a: { extensions: [{ uri: STAMP_URI, required: true, params: { prefix: '[req]' } }] },
  });
  const mk = async (scopes: string[]) => (await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: scopes.join('+'), scopes })).body.key;
  invokeKey = await mk(['a2a:invoke']);
  weakKey = await mk(['platform']);
  grpcAddress = `localhost:${stack.api.get(A2AGrpcServer).port}`;
  client = await grpcClientFor(agent);
});

afterAll(async () => {
  await stack?.close();
});

describe('discovery and routing', () => {
  it('the card lists GRPC (host:port, tenant org/agent, 1.0) only when the binding enables it', async () => {
    const card = await cardOf(agent);
    expect(card.supportedInterfaces).toContainEqual({ url: grpcAddress, protocolBinding: 'GRPC', tenant: `${agent.orgSlug}/grpc-agent`, protocolVersion: '1.0' });
    const httpOnly = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'grpc-off', runtime: RUNTIME, transports: ['JSONRPC'] });
    expect((await cardOf(httpOnly)).supportedInterfaces.map((i: { protocolBinding: string }) => i.protocolBinding)).not.toContain('GRPC');
    // addressing it over gRPC anyway: the agent is not served there (NOT_FOUND, as HTTP answers 404)
    const c = new ClientFactory({ transports: [new GrpcTransportFactory()] });
    const forced = await c.createFromAgentCard({ ...(await cardOf(agent)), supportedInterfaces: [{ url: grpcAddress, protocolBinding: 'GRPC', tenant: `${agent.orgSlug}/grpc-off`, protocolVersion: '1.0' }] });
    const f = await grpcFailure(forced.getTask({ tenant: '', id: randomUUID(), historyLength: undefined }));
    expect(f.status).toBe(grpc.status.NOT_FOUND);
    expect(f.reason).toBe('METHOD_NOT_FOUND');
  });

  it('a missing or malformed tenant is INVALID_ARGUMENT; an unknown agent NOT_FOUND', async () => {
    for (const tenant of ['', 'no-slash', 'a/b/c']) {
      const f = await grpcFailure(rawGetTask(tenant));
      expect(f.status, tenant).toBe(grpc.status.INVALID_ARGUMENT);
      expect(f.reason).toBe('INVALID_PARAMS');
    }
    const unknown = await grpcFailure(rawGetTask(`${agent.orgSlug}/nobody`));
    expect(unknown.status).toBe(grpc.status.NOT_FOUND);
    expect(unknown.reason).toBe('TASK_NOT_FOUND');
  });

  it('a message larger than REQUEST_BODY_LIMIT_BYTES is RESOURCE_EXHAUSTED, and nothing is created', async () => {
    const t = await new GrpcTransportFactory().create(grpcAddress, await cardOf(agent));
    const contextId = randomUUID();
    const big = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), contextId, role: 'ROLE_USER', parts: [{ text: 'x'.repeat(1024 * 1024 + 10) }] } });
    const err = await t.sendMessage({ ...big, tenant: `${agent.orgSlug}/grpc-agent` }).then(() => null, (e: unknown) => e as { status?: number });
    expect(err?.status).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const listed = await client.listTasks({ tenant: '', contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
    expect(listed.tasks).toEqual([]);
  });

  it('grpc.health.v1 reports SERVING for the server and for lf.a2a.v1.A2AService', async () => {
    const Health = grpc.makeGenericClientConstructor(health.service as grpc.ServiceDefinition, 'Health');
    const h = new Health(grpcAddress, grpc.credentials.createInsecure()) as any;
    for (const service of ['', 'lf.a2a.v1.A2AService']) {
      const r = await new Promise<any>((res, rej) => h.check({ service }, (e: unknown, v: unknown) => (e ? rej(e) : res(v))));
      expect(r.status).toBe('SERVING');
    }
    h.close();
  });
});

/** GetTask through a bare SDK transport with an explicit tenant (no card default). */
async function rawGetTask(tenant: string): Promise<unknown> {
  const t = await new GrpcTransportFactory().create(grpcAddress, await cardOf(agent));
  return t.getTask({ tenant, id: randomUUID(), historyLength: undefined });
}

describe('every RPC with the SDK gRPC client', () => {
  it('SendMessage (blocking) → completed task with history; GetTask applies historyLength; a direct reply is a message', async () => {
    const task = (await client.sendMessage(send('multi hello'))) as Task;
    expect('messageId' in task).toBe(false);
    expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_COMPLETED');
    expect(task.history.map((m) => m.parts.map((p) => p.content?.value))).toEqual([['multi hello'], ['Starting'], ['Done']]);
    expect(task.artifacts[0]).toMatchObject({ artifactId: 'report', name: 'report.txt' });
    const got = await client.getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(got.id).toBe(task.id);
    expect(got.history).toHaveLength(1);
    const reply = await client.sendMessage(send('ping'));
    expect('messageId' in reply).toBe(true);
    expect((reply as unknown as { parts: Array<{ content?: { value: unknown } }> }).parts[0]!.content!.value).toBe('pong');
  });

  it('ListTasks filters by context; CancelTask cancels, a second cancel is TaskNotCancelable (FAILED_PRECONDITION)', async () => {
    const contextId = randomUUID();
    const held = await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', contextId, parts: [{ text: 'hold on' }] }, configuration: { returnImmediately: true } }));
    const id = (held as Task).id;
    const listed = await client.listTasks({ tenant: '', contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
    expect(listed.tasks.map((t) => t.id)).toEqual([id]);
    expect(listed.totalSize).toBe(1);
    const canceled = await client.cancelTask({ tenant: '', id, metadata: undefined });
    expect(taskStateToJSON(canceled.status!.state)).toBe('TASK_STATE_CANCELED');
    const again = await grpcFailure(client.cancelTask({ tenant: '', id, metadata: undefined }));
    expect(again.status).toBe(grpc.status.FAILED_PRECONDITION);
    expect(again.reason).toBe('TASK_NOT_CANCELABLE');
    expect(again.domain).toBe('a2a-protocol.org');
    expect(again.metadata.taskId).toBe(id);
  });

  it('push notification configs: create, get, list, delete', async () => {
    const r = await client.sendMessage(send('hold for push', { returnImmediately: true }));
    const taskId = (r as Task).id;
    const created = await client.createTaskPushNotificationConfig({ tenant: '', id: '', taskId, url: 'http://127.0.0.1:9/hook', token: 'tok', authentication: undefined });
    expect(created).toMatchObject({ taskId, url: 'http://127.0.0.1:9/hook', token: 'tok' });
    expect(created.id).not.toBe('');
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId, id: created.id })).toMatchObject({ id: created.id, taskId });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' });
    expect(listed.configs.map((c) => c.id)).toEqual([created.id]);
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId, id: created.id });
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' })).configs).toEqual([]);
    const gone = await grpcFailure(client.getTaskPushNotificationConfig({ tenant: '', taskId, id: created.id }));
    expect(gone.status).toBe(grpc.status.NOT_FOUND);
    await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
  });

  it('GetExtendedAgentCard needs a key of the organization; with one it is the extended card', async () => {
    const anon = await grpcFailure(client.getAgentCard());
    expect(anon.status).toBe(grpc.status.UNAUTHENTICATED);
    const card = await client.getAgentCard({ serviceParameters: { 'x-api-key': invokeKey } });
    expect(card.description).toBe('the extended card');
    expect(card.skills.map((s) => s.id)).toEqual(['echo', 'secret']);
    expect(card.supportedInterfaces.some((i) => i.protocolBinding === 'GRPC')).toBe(true);
  });

  it('SendStreamingMessage: the task, then each update, ending after the terminal status; every event carries its id', async () => {
    const events = await drain(client.sendMessageStream(send('multi stream')));
    expect(events.map((e) => e.payload!.$case)).toEqual(['task', 'statusUpdate', 'artifactUpdate', 'artifactUpdate', 'statusUpdate']);
    const last = events.at(-1)!.payload!.value as { status: { state: TaskState } };
    expect(taskStateToJSON(last.status.state)).toBe('TASK_STATE_COMPLETED');
    const ids = events.map((e) => Number(eventIdOf(e)));
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeGreaterThan(ids[i - 1]!);
    // a direct reply: one message, its event id the reply's sequence in its reply run's log
    const reply = await drain(client.sendMessageStream(send('ping stream')));
    expect(reply.map((e) => e.payload!.$case)).toEqual(['message']);
    expect(eventIdOf(reply[0]!)).toBe('3');
  });

  it('SubscribeToTask cut and resumed with last-event-id carries exactly the events after the cursor', async () => {
    const r = await client.sendMessage(send('paced run', { returnImmediately: true }));
    const id = (r as Task).id;
    const ac = new AbortController();
    const firstPart: StreamResponse[] = [];
    for await (const ev of client.resubscribeTask({ tenant: '', id }, { signal: ac.signal })) {
      firstPart.push(ev);
      if (firstPart.length === 2) break; // the client goes away mid-stream
    }
    ac.abort();
    expect(firstPart[0]!.payload!.$case).toBe('task');
    const cursor = eventIdOf(firstPart.at(-1)!)!;
    expect(cursor).toMatch(/^\d+$/);
    const resumed = await drain(client.resubscribeTask({ tenant: '', id }, { serviceParameters: { 'last-event-id': cursor } }));
    expect(resumed.map((e) => e.payload!.$case).every((k) => k === 'statusUpdate')).toBe(true);
    expect(taskStateToJSON((resumed.at(-1)!.payload!.value as { status: { state: TaskState } }).status.state)).toBe('TASK_STATE_COMPLETED');
    // the whole log from the start: the resumed stream is exactly its tail after the cursor
    const all = await drain(client.resubscribeTask({ tenant: '', id }, { serviceParameters: { 'last-event-id': '0' } }));
    const tail = all.filter((e) => Number(eventIdOf(e)) > Number(cursor));
    expect(resumed.map((e) => StreamResponse.toJSON(e))).toEqual(tail.map((e) => StreamResponse.toJSON(e)));
    // and over SSE the same ids
    const sse = await readSse(`${stack.baseUrl}${agent.basePath}/tasks/${id}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': cursor } });
    expect(sse.frames.map((f) => f.id)).toEqual(resumed.map(eventIdOf));
  });

  it('stream errors before the first event: unknown task NOT_FOUND, terminal task FAILED_PRECONDITION (UnsupportedOperation), bad cursor INVALID_ARGUMENT', async () => {
    const unknown = await grpcFailure(drain(client.resubscribeTask({ tenant: '', id: randomUUID() })));
    expect([unknown.status, unknown.reason]).toEqual([grpc.status.NOT_FOUND, 'TASK_NOT_FOUND']);
    const done = await client.sendMessage(send('plain'));
    const doneId = (done as Task).id;
    const terminal = await grpcFailure(drain(client.resubscribeTask({ tenant: '', id: doneId })));
    expect([terminal.status, terminal.reason]).toEqual([grpc.status.FAILED_PRECONDITION, 'UNSUPPORTED_OPERATION']);
    const badCursor = await grpcFailure(drain(client.resubscribeTask({ tenant: '', id: doneId }, { serviceParameters: { 'last-event-id': 'yesterday' } })));
    expect([badCursor.status, badCursor.reason]).toEqual([grpc.status.INVALID_ARGUMENT, 'INVALID_PARAMS']);
    const pastEnd = await grpcFailure(drain(client.resubscribeTask({ tenant: '', id: doneId }, { serviceParameters: { 'last-event-id': '999999' } })));
    expect(pastEnd.status).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('unknown task NOT_FOUND with the task id; bad params INVALID_ARGUMENT; an unsupported A2A-Version is refused', async () => {
    const id = randomUUID();
    const missing = await grpcFailure(client.getTask({ tenant: '', id, historyLength: undefined }));
    expect([missing.status, missing.reason]).toEqual([grpc.status.NOT_FOUND, 'TASK_NOT_FOUND']);
    expect(missing.err.message).toContain(id);
    const badParams = await grpcFailure(client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text: 'x' }] } })));
    expect([badParams.status, badParams.reason]).toEqual([grpc.status.INVALID_ARGUMENT, 'INVALID_PARAMS']);
    // the SDK Client sends its own A2A-Version: ask through the bare transport
    const t = await new GrpcTransportFactory().create(grpcAddress, await cardOf(agent));
    const version = await grpcFailure(t.getTask({ tenant: `${agent.orgSlug}/grpc-agent`, id, historyLength: undefined }, { serviceParameters: { 'a2a-version': '0.3' } }));
    expect([version.status, version.reason]).toEqual([grpc.status.FAILED_PRECONDITION, 'VERSION_NOT_SUPPORTED']);
  });
});

describe('streaming capability, extensions and authentication', () => {
  it('an agent without streaming refuses the stream RPCs with FAILED_PRECONDITION UnsupportedOperation (§5.4)', async () => {
    const plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'grpc-no-stream', runtime: RUNTIME, transports: ['GRPC'] });
    // the SDK Client checks the card's capabilities itself: call the transport directly
    const t = await new GrpcTransportFactory().create(grpcAddress, await cardOf(plain));
    const f = await grpcFailure(drain(t.sendMessageStream({ ...send('multi x'), tenant: `${plain.orgSlug}/grpc-no-stream` })));
    expect([f.status, f.reason]).toEqual([grpc.status.FAILED_PRECONDITION, 'UNSUPPORTED_OPERATION']);
    // push is not offered either: FAILED_PRECONDITION PushNotificationNotSupported
    // (the SDK Client refuses this itself when the card says no push: call the transport)
    const push = await grpcFailure(t.listTaskPushNotificationConfig({ tenant: `${plain.orgSlug}/grpc-no-stream`, taskId: randomUUID(), pageSize: 0, pageToken: '' }));
    expect([push.status, push.reason]).toEqual([grpc.status.FAILED_PRECONDITION, 'PUSH_NOTIFICATION_NOT_SUPPORTED']);
  });

  it('a required extension not activated is FAILED_PRECONDITION; activated through a2a-extensions it acts and is echoed', async () => {
    const c = await grpcClientFor(strict);
    const refused = await grpcFailure(c.sendMessage(send('hi')));
    expect([refused.status, refused.reason]).toEqual([grpc.status.FAILED_PRECONDITION, 'EXTENSION_SUPPORT_REQUIRED']);
    const ok = await c.sendMessage(send('hi'), { serviceParameters: { 'A2A-Extensions': STAMP_URI } });
    expect((ok as Task).history[0]!.parts.map((p) => p.content?.value)).toEqual(['hi', '[req] stamped']);
    // the response header lists what was activated (raw call, to read the initial metadata)
    const Client = grpc.makeGenericClientConstructor((await import('@a2a-js/sdk/server/grpc')).A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
    const raw = new Client(grpcAddress, grpc.credentials.createInsecure()) as any;
    const md = new grpc.Metadata();
    md.set('a2a-extensions', STAMP_URI);
    const sent = await new Promise<grpc.Metadata>((resolve, reject) => {
      const call = raw.sendMessage({ tenant: `${strict.orgSlug}/grpc-strict`, message: send('hdr').message, configuration: undefined, metadata: undefined }, md, (e: unknown) => (e ? reject(e) : undefined));
      call.on('metadata', resolve);
    });
    expect(sent.get('a2a-extensions').map(String)).toEqual([STAMP_URI]);
    raw.close();
  });

  it('apiKey binding: missing or wrong key UNAUTHENTICATED, a key without a2a:invoke PERMISSION_DENIED, bearer or x-api-key accepted', async () => {
    const c = await grpcClientFor(secured);
    const getTask = (params: Record<string, string>) => c.getTask({ tenant: '', id: randomUUID(), historyLength: undefined }, { serviceParameters: params });
    const missing = await grpcFailure(getTask({}));
    expect([missing.status, missing.reason]).toEqual([grpc.status.UNAUTHENTICATED, 'UNAUTHENTICATED']);
    const wrong = await grpcFailure(getTask({ authorization: 'Bearer aaas_AAAAAAAA_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb' }));
    expect(wrong.status).toBe(grpc.status.UNAUTHENTICATED);
    const weak = await grpcFailure(getTask({ 'x-api-key': weakKey }));
    expect([weak.status, weak.reason]).toEqual([grpc.status.PERMISSION_DENIED, 'PERMISSION_DENIED']);
    // authenticated: the task is simply unknown
    for (const params of [{ authorization: `Bearer ${invokeKey}` }, { 'x-api-key': invokeKey }] as Array<Record<string, string>>) {
      expect((await grpcFailure(getTask(params))).status).toBe(grpc.status.NOT_FOUND);
    }
    // task ownership: a task created with one key is not found with another key's view
    const mine = await c.sendMessage(send('multi owned'), { serviceParameters: { 'x-api-key': invokeKey } });
    const other = await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'other', scopes: ['a2a:invoke'] });
    const notMine = await grpcFailure(c.getTask({ tenant: '', id: (mine as Task).id, historyLength: undefined }, { serviceParameters: { 'x-api-key': other.body.key } }));
    expect(notMine.status).toBe(grpc.status.NOT_FOUND);
  });

  it('calls are counted per method and status code', async () => {
    const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
    expect(text).toMatch(/aaas_grpc_requests_total\{method="GetTask",code="NOT_FOUND"\} [1-9]/);
    expect(text).toMatch(/aaas_grpc_requests_total\{method="SendStreamingMessage",code="OK"\} [1-9]/);
    expect(text).toMatch(/aaas_grpc_request_duration_seconds_count\{method="SendMessage"\} [1-9]/);
  });
});

/** A value with ids and times replaced, and gRPC's event ids dropped: what must be equal across bindings. */
function normalized(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalized);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'metadata' && x && typeof x === 'object') {
        const { eventId: _drop, ...rest } = x as Record<string, unknown>;
        if (Object.keys(rest).length > 0) out[k] = normalized(rest);
        continue;
      }
      out[k] = ['id', 'taskId', 'contextId', 'messageId'].includes(k) ? '<id>' : k === 'timestamp' ? '<time>' : normalized(x);
    }
    return out;
  }
  return v;
}

describe('one scenario, three bindings', () => {
  const SCENARIO_TEXT = 'multi same story';
  const body = () => JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: SCENARIO_TEXT }] } });

  /** Stream the scenario over a binding: the StreamResponses as ProtoJSON, their event ids, then the task (GetTask, full history). */
  const bindings: Record<string, () => Promise<{ events: unknown[]; ids: Array<string | undefined>; task: unknown }>> = {
    'JSON-RPC': async () => {
      const url = `${stack.baseUrl}${agent.basePath}`;
      const headers = { 'content-type': 'application/json', 'a2a-version': '1.0' };
      const r = await readSse(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: JSON.parse(body()) }) });
      const events = r.frames.map((f: SseFrame) => JSON.parse(f.data).result);
      const id = events[0].task.id;
      const got = (await (await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id } }) })).json()) as any;
      return { events, ids: r.frames.map((f) => f.id), task: got.result };
    },
    'HTTP+JSON': async () => {
      const base = `${stack.baseUrl}${agent.basePath}`;
      const r = await readSse(`${base}/message:stream`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: body() });
      const events = r.frames.map((f: SseFrame) => JSON.parse(f.data));
      const got = await (await fetch(`${base}/tasks/${events[0].task.id}`, { headers: { 'a2a-version': '1.0' } })).json();
      return { events, ids: r.frames.map((f) => f.id), task: got };
    },
    gRPC: async () => {
      const events = await drain(client.sendMessageStream(SendMessageRequest.fromJSON(JSON.parse(body()))));
      const id = (events[0]!.payload!.value as Task).id;
      const task = await client.getTask({ tenant: '', id, historyLength: undefined });
      return { events: events.map((e) => StreamResponse.toJSON(e)), ids: events.map(eventIdOf), task: Task.toJSON(task) };
    },
  };

  const results: Record<string, { events: unknown[]; ids: Array<string | undefined>; task: unknown }> = {};

  it.each(Object.keys(bindings))('%s: streams the task, its updates and ends completed', async (name) => {
    const r = await bindings[name]!();
    results[name] = r;
    expect(r.events.map((e) => Object.keys(e as object)[0])).toEqual(['task', 'statusUpdate', 'artifactUpdate', 'artifactUpdate', 'statusUpdate']);
    expect((r.task as { status: { state: string } }).status.state).toBe('TASK_STATE_COMPLETED');
  });

  it('all three give the same task shape, history and event sequence (ids and sequence numbers included)', () => {
    const [first, ...others] = Object.keys(bindings);
    const ref = results[first!]!;
    expect(ref).toBeDefined();
    for (const name of others) {
      const r = results[name]!;
      expect(normalized(r.task), name).toEqual(normalized(ref.task));
      expect(normalized(r.events), name).toEqual(normalized(ref.events));
      expect(r.ids, name).toEqual(ref.ids);
    }
  });
});
