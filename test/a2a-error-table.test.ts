import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SendMessageRequest } from '@a2a-js/sdk';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { decodeErrorInfo, decodeStatus, isGrpcError, type GrpcA2AError } from '@a2a-js/sdk/errors/grpc';
import type { A2AExtensionPlugin } from '#libs/extensions';
import { A2A_ERRORS, A2AError, GRPC_CODES, toGrpcError, toRestError, type A2AErrorType } from '#libs/a2a';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { A2AGrpcServer } from '../apps/api/src/grpc/a2a-grpc.server.js';

/**
 * One error table (`A2A_ERRORS`) drives the error answers of all three bindings (A2A v1.0 §5.4):
 * the table matches the spec row by row, each edge reads it, and each row's error, provoked
 * through the public API of JSON-RPC v1.0 over HTTP, HTTP+JSON and gRPC (the SDK gRPC
 * transport), answers with that row's JSON-RPC code, HTTP status and gRPC status.
 */

/**
 * A2A v1.0 §5.4 "Error Code Mappings", copied verbatim from `docs/specification.md` of
 * github.com/a2aproject/A2A after the 1.0.0 release (the table `@a2a-js/sdk@1.3.0` implements in
 * `GRPC_ERROR_STATUS` / `REST_ERROR_HTTP_STATUS`).
 */
const SPEC_5_4 = `
| A2A Error Type                        | JSON-RPC Code | gRPC Status           | HTTP Status                 |
| :------------------------------------ | :------------ | :-------------------- | :-------------------------- |
| \`TaskNotFoundError\`                   | \`-32001\`      | \`NOT_FOUND\`           | \`404 Not Found\`             |
| \`TaskNotCancelableError\`              | \`-32002\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
| \`PushNotificationNotSupportedError\`   | \`-32003\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
| \`UnsupportedOperationError\`           | \`-32004\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
| \`ContentTypeNotSupportedError\`        | \`-32005\`      | \`INVALID_ARGUMENT\`    | \`400 Bad Request\`           |
| \`InvalidAgentResponseError\`           | \`-32006\`      | \`INTERNAL\`            | \`500 Internal Server Error\` |
| \`ExtendedAgentCardNotConfiguredError\` | \`-32007\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
| \`ExtensionSupportRequiredError\`       | \`-32008\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
| \`VersionNotSupportedError\`            | \`-32009\`      | \`FAILED_PRECONDITION\` | \`400 Bad Request\`           |
`;

interface SpecRow {
  type: A2AErrorType;
  code: number;
  grpc: string;
  http: number;
}

function parseSpecTable(md: string): SpecRow[] {
  const rows: SpecRow[] = [];
  for (const line of md.split('\n')) {
    const m = /^\|\s*`(\w+)Error`\s*\|\s*`(-\d+)`\s*\|\s*`([A-Z_]+)`\s*\|\s*`(\d{3}) [^`]+`\s*\|$/.exec(line.trim());
    if (m) rows.push({ type: m[1] as A2AErrorType, code: Number(m[2]), grpc: m[3]!, http: Number(m[4]) });
  }
  return rows;
}

describe('the error table (unit)', () => {
  const spec = parseSpecTable(SPEC_5_4);

  it('has the nine A2A-specific rows of §5.4', () => {
    expect(spec).toHaveLength(9);
  });

  it.each(spec.map((r) => [r.type, r] as const))('%s: JSON-RPC code, gRPC status and HTTP status are the spec row', (type, row) => {
    expect(A2A_ERRORS[type], type).toBeDefined();
    expect({ code: A2A_ERRORS[type].code, grpc: A2A_ERRORS[type].grpc, http: A2A_ERRORS[type].http }).toEqual({ code: row.code, grpc: row.grpc, http: row.http });
  });

  it.each(Object.keys(A2A_ERRORS) as A2AErrorType[])('%s: every edge answers from the table row', (type) => {
    const row = A2A_ERRORS[type];
    const e = new A2AError(type, 'm', { metadata: { k: 'v' } });
    const reason = ('wireReason' in row ? row.wireReason : undefined) ?? row.reason;
    // JSON-RPC
    expect(e.code).toBe(row.code);
    expect(e.toErrorInfo()).toMatchObject({ reason: row.reason, domain: 'a2a-protocol.org', metadata: { k: 'v' } });
    // HTTP+JSON
    const rest = toRestError(e);
    expect(rest.httpStatus).toBe(row.http);
    expect(rest.body.error).toMatchObject({ code: row.http, status: row.grpc, details: [{ reason }] });
    // gRPC
    const g = toGrpcError(e);
    expect(g.code).toBe(GRPC_CODES[row.grpc]);
    expect(g.codeName).toBe(row.grpc);
    const st = decodeStatus(g.statusDetails);
    expect(st.code).toBe(g.code);
    expect(decodeErrorInfo(st.details[0]!.value)).toMatchObject({ reason, domain: 'a2a-protocol.org', metadata: { k: 'v' } });
  });

  it('an unavailable InternalError is 503 / UNAVAILABLE on HTTP+JSON and gRPC, whatever its row', () => {
    const e = new A2AError('InternalError', 'database down', { unavailable: true });
    expect(toRestError(e).httpStatus).toBe(503);
    expect(toRestError(e).body.error.status).toBe('UNAVAILABLE');
    expect(toGrpcError(e).codeName).toBe('UNAVAILABLE');
    expect(e.code).toBe(-32603);
  });

  it('the A2A-specific JSON-RPC codes are distinct', () => {
    const codes = spec.map((r) => A2A_ERRORS[r.type].code);
    expect(new Set(codes).size).toBe(codes.length);
  });
});

// --- every row on every binding, through the public API -------------------------------------

const EXT_URI = 'https://example.test/extensions/error-table/v1';
const ext: A2AExtensionPlugin<{ prefix: string }> = {
  uri: EXT_URI,
  description: 'A required extension (test).',
  params: z.strictObject({ prefix: z.string().min(1) }),
  onMessage: (m) => m,
};

const ALL = ['JSONRPC', 'HTTP+JSON', 'GRPC'] as const;
let stack: Stack;
let full: PublishedAgent; // streaming, extended card configured, text/plain input only
let bare: PublishedAgent; // no capabilities
let declared: PublishedAgent; // extended card declared, none configured
let strict: PublishedAgent; // a required extension
let secured: PublishedAgent; // apiKey
let rpcOnly: PublishedAgent; // JSON-RPC only (not served over gRPC)
let invokeKey: string;
let weakKey: string;
let grpcAddress: string;
let doneTaskId: string;

type Outcome = { httpStatus?: number; code?: number; reason?: string; grpcStatus?: number };

/** A JSON-RPC v1.0 call over HTTP; `raw` replaces the body. */
async function rpc(agent: PublishedAgent, method: string, params: unknown, o: { key?: string; version?: string | null; raw?: string; contentType?: string } = {}): Promise<Outcome> {
  const version = o.version === undefined ? '1.0' : o.version;
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': o.contentType ?? 'application/json', ...(version !== null ? { 'a2a-version': version } : {}), ...(o.key ? { 'x-api-key': o.key } : {}) },
    body: o.raw ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { error?: { code: number; data?: Array<{ reason: string }> } };
  return { httpStatus: res.status, code: body.error?.code, reason: body.error?.data?.[0]?.reason };
}

/** An HTTP+JSON call. */
async function rest(agent: PublishedAgent, method: string, path: string, o: { key?: string; version?: string | null; body?: unknown; raw?: string } = {}): Promise<Outcome & { status?: string }> {
  const version = o.version === undefined ? '1.0' : o.version;
  const res = await fetch(`${stack.baseUrl}${agent.basePath}${path}`, {
    method,
    headers: { ...(method !== 'GET' ? { 'content-type': 'application/json' } : {}), ...(version !== null ? { 'a2a-version': version } : {}), ...(o.key ? { 'x-api-key': o.key } : {}) },
    ...(method !== 'GET' ? { body: o.raw ?? JSON.stringify(o.body ?? {}) } : {}),
  });
  const body = (await res.json()) as { error?: { code: number; status: string; details?: Array<{ reason: string }> } };
  expect(body.error?.code).toBe(res.status);
  return { httpStatus: res.status, status: body.error?.status, reason: body.error?.details?.[0]?.reason };
}

/** A gRPC call through the SDK's gRPC transport (it skips the client-side capability checks). */
async function grpcCall(agent: PublishedAgent, call: (t: any, tenant: string) => Promise<unknown>): Promise<Outcome> {
  const card = (await (await fetch(agent.cardUrl)).json()) as never;
  const t = await new GrpcTransportFactory().create(grpcAddress, card);
  let caught: unknown;
  try {
    const r = await call(t, `${agent.orgSlug}/${agent.slug}`);
    if (r && typeof (r as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') for await (const _ of r as AsyncIterable<unknown>) void _;
  } catch (e) {
    caught = e;
  }
  expect(isGrpcError(caught), String(caught)).toBe(true);
  const err = caught as GrpcA2AError;
  const info = decodeErrorInfo(decodeStatus(err.statusDetailsBin!).details[0]!.value);
  return { grpcStatus: err.status, reason: info.reason };
}

const msg = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text, ...extra }] });
const sdkSend = (text: string, extra: Record<string, unknown> = {}) => SendMessageRequest.fromJSON({ message: msg(text, extra) });
const md = (h: Record<string, string>) => ({ serviceParameters: h });

interface Provocation {
  jsonrpc?: () => Promise<Outcome>;
  rest?: () => Promise<Outcome & { status?: string }>;
  grpc?: () => Promise<Outcome>;
}

/** How each row is provoked on each binding; a binding left out says why in NOT_PROVOKABLE. */
const PROVOKE: Partial<Record<A2AErrorType, Provocation>> = {
  TaskNotFound: {
    jsonrpc: () => rpc(full, 'GetTask', { id: randomUUID() }),
    rest: () => rest(full, 'GET', `/tasks/${randomUUID()}`),
    grpc: () => grpcCall(full, (t, tenant) => t.getTask({ tenant, id: randomUUID(), historyLength: undefined })),
  },
  TaskNotCancelable: {
    jsonrpc: () => rpc(full, 'CancelTask', { id: doneTaskId }),
    rest: () => rest(full, 'POST', `/tasks/${doneTaskId}:cancel`),
    grpc: () => grpcCall(full, (t, tenant) => t.cancelTask({ tenant, id: doneTaskId, metadata: undefined })),
  },
  PushNotificationNotSupported: {
    jsonrpc: () => rpc(bare, 'ListTaskPushNotificationConfigs', { taskId: randomUUID() }),
    rest: () => rest(bare, 'GET', `/tasks/${randomUUID()}/pushNotificationConfigs`),
    grpc: () => grpcCall(bare, (t, tenant) => t.listTaskPushNotificationConfig({ tenant, taskId: randomUUID(), pageSize: 0, pageToken: '' })),
  },
  UnsupportedOperation: {
    jsonrpc: () => rpc(bare, 'SendStreamingMessage', { message: msg('x') }),
    rest: () => rest(bare, 'POST', '/message:stream', { body: { message: msg('x') } }),
    grpc: () => grpcCall(bare, (t, tenant) => t.sendMessageStream({ ...sdkSend('x'), tenant })),
  },
  ContentTypeNotSupported: {
    jsonrpc: () => rpc(full, 'SendMessage', { message: msg('x', { mediaType: 'image/png' }) }),
    rest: () => rest(full, 'POST', '/message:send', { body: { message: msg('x', { mediaType: 'image/png' }) } }),
    grpc: () => grpcCall(full, (t, tenant) => t.sendMessage({ ...sdkSend('x', { mediaType: 'image/png' }), tenant })),
  },
  ExtendedAgentCardNotConfigured: {
    jsonrpc: () => rpc(declared, 'GetExtendedAgentCard', {}, { key: invokeKey }),
    rest: () => rest(declared, 'GET', '/extendedAgentCard', { key: invokeKey }),
    grpc: () => grpcCall(declared, (t, tenant) => t.getExtendedAgentCard({ tenant }, md({ 'x-api-key': invokeKey }))),
  },
  ExtensionSupportRequired: {
    jsonrpc: () => rpc(strict, 'SendMessage', { message: msg('x') }),
    rest: () => rest(strict, 'POST', '/message:send', { body: { message: msg('x') } }),
    grpc: () => grpcCall(strict, (t, tenant) => t.sendMessage({ ...sdkSend('x'), tenant })),
  },
  VersionNotSupported: {
    jsonrpc: () => rpc(full, 'GetTask', { id: randomUUID() }, { version: '9.9' }),
    rest: () => rest(full, 'GET', '/tasks', { version: null }),
    grpc: () => grpcCall(full, (t, tenant) => t.getTask({ tenant, id: randomUUID(), historyLength: undefined }, md({ 'a2a-version': '0.3' }))),
  },
  ParseError: {
    jsonrpc: () => rpc(full, '', null, { raw: '{"jsonrpc": "2.0", ' }),
    rest: () => rest(full, 'POST', '/message:send', { raw: '{"message": ' }),
  },
  InvalidRequest: {
    jsonrpc: () => rpc(full, '', null, { raw: JSON.stringify({ id: 1, method: 'GetTask', params: {} }) }),
  },
  MethodNotFound: {
    jsonrpc: () => rpc(full, 'NoSuchMethod', {}),
    rest: () => rest(full, 'GET', '/no-such-route'),
    grpc: () => grpcCall({ ...full, slug: rpcOnly.slug }, (t, tenant) => t.getTask({ tenant, id: randomUUID(), historyLength: undefined })),
  },
  InvalidParams: {
    jsonrpc: () => rpc(full, 'SendMessage', { message: { ...msg('x'), role: 'ROLE_AGENT' } }),
    rest: () => rest(full, 'POST', '/message:send', { body: { message: { ...msg('x'), role: 'ROLE_AGENT' } } }),
    grpc: () => grpcCall(full, (t, tenant) => t.sendMessage({ ...SendMessageRequest.fromJSON({ message: { ...msg('x'), role: 'ROLE_AGENT' } }), tenant })),
  },
  Unauthenticated: {
    jsonrpc: () => rpc(secured, 'GetTask', { id: randomUUID() }),
    rest: () => rest(secured, 'GET', `/tasks/${randomUUID()}`),
    grpc: () => grpcCall(secured, (t, tenant) => t.getTask({ tenant, id: randomUUID(), historyLength: undefined })),
  },
  Unauthorized: {
    jsonrpc: () => rpc(secured, 'GetTask', { id: randomUUID() }, { key: weakKey }),
    rest: () => rest(secured, 'GET', `/tasks/${randomUUID()}`, { key: weakKey }),
    grpc: () => grpcCall(secured, (t, tenant) => t.getTask({ tenant, id: randomUUID(), historyLength: undefined }, md({ 'x-api-key': weakKey }))),
  },
};

/** Rows or bindings that the public API cannot provoke, and why. */
const NOT_PROVOKABLE: Record<string, string> = {
  'InvalidAgentResponse:*': 'the platform runs its own runtimes and never relays another agent’s response as its own',
  'InternalError:*': 'a bug or an outage; the outage case (503 / UNAVAILABLE) is test/database-outage.test.ts',
  'ParseError:grpc': 'protobuf framing: a gRPC request body is never JSON',
  'InvalidRequest:rest': 'HTTP+JSON has no request envelope',
  'InvalidRequest:grpc': 'gRPC has no request envelope',
};

/** JSON-RPC errors travel with HTTP 200, except those the HTTP edge answers itself (§3.3.2). */
const JSONRPC_HTTP: Partial<Record<A2AErrorType, number>> = { Unauthenticated: 401, Unauthorized: 403 };

beforeAll(async () => {
  stack = await startStack({ extensions: [ext], env: { GRPC_PORT: '0' } });
  grpcAddress = `localhost:${stack.api.get(A2AGrpcServer).port}`;
  const runtime = { kind: 'scripted', rules: [] };
  full = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'et-full',
    runtime,
    transports: [...ALL],
    a2a: { defaultInputModes: ['text/plain'], capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true }, extendedCard: { description: 'members' } } as never,
  });
  bare = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'et-bare', runtime, transports: [...ALL] });
  declared = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'et-declared', runtime, transports: [...ALL], a2a: { capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: true } } });
  strict = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'et-strict', runtime, transports: [...ALL], a2a: { extensions: [{ uri: EXT_URI, required: true, params: { prefix: 'p' } }] } as never });
  secured = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'et-secured', runtime, transports: [...ALL], security: { scheme: 'apiKey' } });
  rpcOnly = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'et-rpc-only', runtime, transports: ['JSONRPC'] });
  const mk = async (scopes: string[]) => (await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: scopes.join('+'), scopes })).body.key;
  invokeKey = await mk(['a2a:invoke']);
  weakKey = await mk(['platform']);
  const done = await fetch(`${stack.baseUrl}${full.basePath}/message:send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ message: msg('plain'), configuration: { returnImmediately: false } }),
  });
  const task = ((await done.json()) as { task: { id: string; status: { state: string } } }).task;
  expect(task.status.state).toBe('TASK_STATE_COMPLETED');
  doneTaskId = task.id;
});

afterAll(async () => {
  await stack?.close();
});

describe('every row on every binding (public API)', () => {
  const types = Object.keys(A2A_ERRORS) as A2AErrorType[];

  it('every row is provoked on every binding, or says why it cannot be', () => {
    for (const type of types) {
      for (const binding of ['jsonrpc', 'rest', 'grpc'] as const) {
        const provoked = PROVOKE[type]?.[binding] !== undefined;
        const excused = NOT_PROVOKABLE[`${type}:*`] ?? NOT_PROVOKABLE[`${type}:${binding}`];
        expect(provoked !== (excused !== undefined), `${type} on ${binding}`).toBe(true);
      }
    }
  });

  const cases = types.flatMap((type) => (['jsonrpc', 'rest', 'grpc'] as const).filter((b) => PROVOKE[type]?.[b]).map((b) => [type, b] as const));

  it.each(cases)('%s over %s answers its table row', async (type, binding) => {
    const row = A2A_ERRORS[type];
    const reason = ('wireReason' in row ? row.wireReason : undefined) ?? row.reason;
    const got = await PROVOKE[type]![binding]!();
    if (binding === 'jsonrpc') {
      expect({ httpStatus: got.httpStatus, code: got.code, reason: got.reason }).toEqual({ httpStatus: JSONRPC_HTTP[type] ?? 200, code: row.code, reason: row.reason });
    } else if (binding === 'rest') {
      expect(got).toEqual({ httpStatus: row.http, status: row.grpc, reason });
    } else {
      expect({ grpcStatus: got.grpcStatus, reason: got.reason }).toEqual({ grpcStatus: GRPC_CODES[row.grpc], reason });
    }
  });

  it('a JSON-RPC request whose Content-Type is not JSON is ContentTypeNotSupported (-32005, HTTP 415), whether or not the server has a parser for it', async () => {
    for (const contentType of ['text/plain', 'text/xml', 'application/x-www-form-urlencoded']) {
      const got = await rpc(full, 'GetTask', { id: randomUUID() }, { contentType, raw: '<x/>' });
      expect([got.httpStatus, got.code], contentType).toEqual([415, -32005]);
    }
  });

  it('an HTTP+JSON request whose Content-Type is not JSON is 415 (HTTP media-type semantics), status and reason of ContentTypeNotSupported', async () => {
    const res = await fetch(`${stack.baseUrl}${full.basePath}/message:send`, { method: 'POST', headers: { 'content-type': 'text/plain', 'a2a-version': '1.0' }, body: JSON.stringify({ message: msg('x') }) });
    expect(res.status).toBe(415);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 415, status: 'INVALID_ARGUMENT', details: [{ reason: 'CONTENT_TYPE_NOT_SUPPORTED' }] });
  });
});
