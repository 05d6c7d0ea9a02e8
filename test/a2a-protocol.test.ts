import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { isLegacyAgentCard, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The A2A JSON-RPC binding on the wire (raw fetch): version negotiation, v0.3 for header-less
 * callers, the exact error codes, endpoint security, and the Agent Cards (caching, active
 * revision, default agent at the host root).
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong: {{input}}' }] },
  ],
};

interface RpcResult {
  status: number;
  headers: Headers;
  body: any;
}

/** POST a raw body (strings verbatim). `version` → `A2A-Version` (default 1.0; null = no header). */
async function rawRpc(url: string, body: unknown, opts: { version?: string | null; headers?: Record<string, string> } = {}): Promise<RpcResult> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', ...opts.headers };
  const version = opts.version === undefined ? '1.0' : opts.version;
  if (version !== null) headers['a2a-version'] = version;
  const res = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

let rpcId = 1;
const req = (method: string, params?: unknown) => ({ jsonrpc: '2.0', id: rpcId++, method, ...(params !== undefined ? { params } : {}) });
const v1Send = (text: string, configuration?: object) => ({
  message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
  ...(configuration ? { configuration } : {}),
});
const v03Send = (text: string, configuration?: object) => ({
  message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }] },
  ...(configuration ? { configuration } : {}),
});

const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';

let stack: Stack;
let echo: PublishedAgent;
let url: string;

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo', runtime: RUNTIME });
  url = `${stack.baseUrl}${echo.basePath}`;
});

afterAll(async () => {
  await stack?.close();
});

describe('v0.3 JSON-RPC for callers without A2A-Version', () => {
  it('message/send returns a kind-tagged completed task; tasks/get applies historyLength', async () => {
    const sent = await rawRpc(url, req('message/send', v03Send('old hello', { blocking: true })), { version: null });
    expect(sent.status).toBe(200);
    const task = sent.body.result;
    expect(task).toMatchObject({ kind: 'task', status: { state: 'completed' } });
    expect(task.history).toEqual([
      { kind: 'message', messageId: expect.any(String), role: 'user', parts: [{ kind: 'text', text: 'old hello' }], contextId: task.contextId, taskId: task.id },
      { kind: 'message', messageId: expect.any(String), role: 'agent', parts: [{ kind: 'text', text: 'old hello' }], contextId: task.contextId, taskId: task.id },
    ]);

    const got = await rawRpc(url, req('tasks/get', { id: task.id, historyLength: 1 }), { version: null });
    expect(got.body.result).toMatchObject({ kind: 'task', id: task.id, status: { state: 'completed' } });
    expect(got.body.result.history.map((m: { role: string }) => m.role)).toEqual(['agent']);
  });

  it('without configuration it blocks; blocking: false returns the submitted task', async () => {
    const blocking = await rawRpc(url, req('message/send', v03Send('no config')), { version: null });
    expect(blocking.body.result.status.state).toBe('completed');
    const nonBlocking = await rawRpc(url, req('message/send', v03Send('fast', { blocking: false })), { version: null });
    expect(nonBlocking.body.result.status.state).toBe('submitted');
  });

  it('explicit A2A-Version: 0.3 works the same, answers reply rules with kind "message", and cancels', async () => {
    const reply = await rawRpc(url, req('message/send', v03Send('ping v03')), { version: '0.3' });
    expect(reply.body.result).toMatchObject({ kind: 'message', role: 'agent', parts: [{ kind: 'text', text: 'pong: ping v03' }] });
    expect(reply.body.result.contextId).toEqual(expect.any(String));

    const held = await rawRpc(url, req('message/send', v03Send('hold it', { blocking: false })), { version: '0.3' });
    const canceled = await rawRpc(url, req('tasks/cancel', { id: held.body.result.id }), { version: '0.3' });
    expect(canceled.body.result).toMatchObject({ kind: 'task', id: held.body.result.id, status: { state: 'canceled' } });
    const again = await rawRpc(url, req('tasks/cancel', { id: held.body.result.id }), { version: '0.3' });
    // v0.3 errors carry no ErrorInfo data
    expect(again.body.error).toEqual({ code: -32002, message: expect.any(String) });
  });

  it('v0.3 errors: unknown task -32001, bad params -32602, v1.0 method names -32601, streaming -32004, push -32003', async () => {
    const cases: Array<[unknown, number]> = [
      [req('tasks/get', { id: randomUUID() }), -32001],
      [req('message/send', { message: { kind: 'message', messageId: 'm', role: 'agent', parts: [{ kind: 'text', text: 'x' }] } }), -32602],
      [req('SendMessage', v1Send('x')), -32601],
      [req('message/stream', v03Send('x')), -32004],
      [req('tasks/pushNotificationConfig/set', { taskId: 'x', pushNotificationConfig: { url: 'https://x.test' } }), -32003],
    ];
    for (const [body, code] of cases) {
      const r = await rawRpc(url, body, { version: null });
      expect(r.status).toBe(200);
      expect(r.body.error.code).toBe(code);
      expect(r.body.error.data).toBeUndefined();
    }
  });
});

describe('JSON-RPC errors (v1.0): exact codes, HTTP 200, ErrorInfo in data', () => {
  it.each<[string, () => unknown, number, string, { version?: string | null }?]>([
    ['unknown task', () => req('GetTask', { id: randomUUID() }), -32001, 'TASK_NOT_FOUND'],
    ['bad params (no parts)', () => req('SendMessage', { message: { messageId: 'm', role: 'ROLE_USER', parts: [] } }), -32602, 'INVALID_PARAMS'],
    ['bad params (agent role)', () => req('SendMessage', { message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'x' }] } }), -32602, 'INVALID_PARAMS'],
    ['bad params (no message)', () => req('SendMessage', {}), -32602, 'INVALID_PARAMS'],
    ['bad params (negative historyLength)', () => req('GetTask', { id: 'x', historyLength: -1 }), -32602, 'INVALID_PARAMS'],
    ['malformed JSON', () => '{"jsonrpc":"2.0","id":1,"method":', -32700, 'PARSE_ERROR'],
    ['unknown method', () => req('DoSomething', {}), -32601, 'METHOD_NOT_FOUND'],
    ['v0.3 method name under 1.0', () => req('message/send', v03Send('x')), -32601, 'METHOD_NOT_FOUND'],
    ['unsupported version', () => req('SendMessage', v1Send('x')), -32009, 'VERSION_NOT_SUPPORTED', { version: '9.9' }],
    ['invalid request (no jsonrpc)', () => ({ id: 5, method: 'GetTask', params: { id: 'x' } }), -32600, 'INVALID_REQUEST'],
    ['invalid request (bad id type)', () => ({ jsonrpc: '2.0', id: { a: 1 }, method: 'GetTask', params: { id: 'x' } }), -32600, 'INVALID_REQUEST'],
    ['batch', () => [req('GetTask', { id: 'x' }), req('GetTask', { id: 'y' })], -32600, 'INVALID_REQUEST'],
    ['streaming not offered', () => req('SendStreamingMessage', v1Send('x')), -32004, 'UNSUPPORTED_OPERATION'],
    ['ListTasks with pageSize out of range', () => req('ListTasks', { pageSize: 101 }), -32602, 'INVALID_PARAMS'],
    ['push config not supported', () => req('CreateTaskPushNotificationConfig', { taskId: 'x', url: 'https://x.test/hook' }), -32003, 'PUSH_NOTIFICATION_NOT_SUPPORTED'],
    ['push config on SendMessage', () => req('SendMessage', v1Send('x', { taskPushNotificationConfig: { url: 'https://x.test/hook' } })), -32003, 'PUSH_NOTIFICATION_NOT_SUPPORTED'],
    ['extended card not offered', () => req('GetExtendedAgentCard', {}), -32004, 'UNSUPPORTED_OPERATION'],
    ['media type not accepted', () => req('SendMessage', { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ data: { a: 1 }, mediaType: 'application/json' }] } }), -32005, 'CONTENT_TYPE_NOT_SUPPORTED'],
  ])('%s → %i', async (_name, body, code, reason, opts = {}) => {
    const b = body();
    const r = await rawRpc(url, b, opts);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toMatchObject({ jsonrpc: '2.0', error: { code, message: expect.any(String), data: [{ '@type': ERROR_INFO, reason, domain: 'a2a-protocol.org' }] } });
    const echoedId = typeof b === 'object' && b !== null && !Array.isArray(b) && (typeof (b as { id?: unknown }).id === 'number') ? (b as { id: number }).id : null;
    expect(r.body.id).toBe(echoedId);
  });

  it('a patch version (1.0.7) negotiates 1.0, as does ?A2A-Version=1.0; a v1.0 method without the header is a 0.3 call (-32601)', async () => {
    const patch = await rawRpc(url, req('SendMessage', v1Send('patchy')), { version: '1.0.7' });
    expect(patch.body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
    const query = await rawRpc(`${url}?A2A-Version=1.0`, req('SendMessage', v1Send('by query')), { version: null });
    expect(query.body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
    const headerless = await rawRpc(url, req('SendMessage', v1Send('no header')), { version: null });
    expect(headerless.body.error.code).toBe(-32601);
  });

  it('refuses a non-JSON Content-Type with ContentTypeNotSupported (-32005, HTTP 415)', async () => {
    const r = await rawRpc(url, JSON.stringify(req('GetTask', { id: 'x' })), { headers: { 'content-type': 'text/plain' } });
    expect(r.status).toBe(415);
    expect(r.body.error).toMatchObject({ code: -32005, message: expect.stringContaining('Content-Type') });
  });

  it('accepts application/a2a+json bodies and snake_case fields', async () => {
    const r = await rawRpc(
      url,
      req('SendMessage', { message: { message_id: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'snake' }] }, configuration: { return_immediately: true } }),
      { headers: { 'content-type': 'application/a2a+json' } },
    );
    expect(r.body.result.task.status.state).toBe('TASK_STATE_SUBMITTED');
    // ProtoJSON output: default values omitted
    expect(r.body.result.task.artifacts).toBeUndefined();
    expect(r.body.result.task.metadata).toBeUndefined();
  });

  it('an unknown organization or agent is HTTP 404 with a JSON-RPC error body, in the caller\'s version shape', async () => {
    const r = await rawRpc(`${stack.baseUrl}/a2a/no-such-org/echo`, req('GetTask', { id: 'x' }));
    expect(r.status).toBe(404);
    expect(r.body).toMatchObject({ jsonrpc: '2.0', id: expect.any(Number), error: { code: -32001, message: expect.stringContaining('not found'), data: [{ '@type': ERROR_INFO }] } });
    const v03 = await rawRpc(`${stack.baseUrl}/a2a/${echo.orgSlug}/nobody`, req('tasks/get', { id: 'x' }), { version: null });
    expect(v03.status).toBe(404);
    expect(v03.body.error.data).toBeUndefined();
    const card = await fetch(`${stack.baseUrl}/a2a/${echo.orgSlug}/nobody/.well-known/agent-card.json`);
    expect(card.status).toBe(404);
  });

  it('does not shadow the admin API or the docs', async () => {
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'GET', '/v1/organization')).status).toBe(200);
    expect((await fetch(`${stack.baseUrl}/docs/openapi.json`)).status).toBe(200);
  });
});

describe('apiKey-secured binding', () => {
  let secure: PublishedAgent;
  let secureUrl: string;
  let invokeKey: string;
  let weakKey: string;
  let otherOrgKey: string;

  beforeAll(async () => {
    secure = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'secure', runtime: RUNTIME, security: { scheme: 'apiKey' } });
    secureUrl = `${stack.baseUrl}${secure.basePath}`;
    const mk = async (scopes: string[]) => {
      const r = await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: scopes.join('+'), scopes });
      expect(r.status).toBe(201);
      return r.body.key;
    };
    invokeKey = await mk(['a2a:invoke']);
    weakKey = await mk(['platform']);
    const org = await adminRequest<{ adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: `sec-${randomUUID().slice(0, 8)}`, name: 'Sec' });
    otherOrgKey = org.body.adminKey.key;
  });

  it('rejects a missing, unknown or other-organization key with 401, WWW-Authenticate and a JSON-RPC error', async () => {
    const attempts: Array<Record<string, string>> = [{}, { 'x-api-key': 'aaas_AAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBB' }, { authorization: 'Bearer nonsense' }, { 'x-api-key': otherOrgKey }];
    for (const headers of attempts) {
      const r = await rawRpc(secureUrl, req('SendMessage', v1Send('let me in')), { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/Bearer/);
      expect(r.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, data: [{ reason: 'UNAUTHENTICATED' }] } });
    }
  });

  it('rejects a key of the organization without a2a:invoke or admin with 403', async () => {
    const r = await rawRpc(secureUrl, req('SendMessage', v1Send('let me in')), { headers: { 'x-api-key': weakKey } });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: -32000, message: expect.stringContaining('a2a:invoke'), data: [{ reason: 'PERMISSION_DENIED' }] });
  });

  it('accepts an a2a:invoke key in X-API-Key and an admin key as a Bearer token; the SDK client passes it as a service parameter', async () => {
    const viaHeader = await rawRpc(secureUrl, req('SendMessage', v1Send('hello secure')), { headers: { 'x-api-key': invokeKey } });
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
    const viaBearer = await rawRpc(secureUrl, req('GetTask', { id: viaHeader.body.result.task.id }), { headers: { authorization: `Bearer ${stack.adminKey}` } });
    expect(viaBearer.body.result.id).toBe(viaHeader.body.result.task.id);

    const client = await new ClientFactory().createFromUrl(`${secureUrl}/`);
    const task = (await client.sendMessage(
      SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'sdk secure' }] } }),
      { serviceParameters: { 'X-API-Key': invokeKey } },
    )) as Task;
    expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_COMPLETED');
    await expect(client.getTask({ tenant: '', id: task.id, historyLength: undefined })).rejects.toThrow(/401|UNAUTHENTICATED|API key/);
  });

  it('serves the card publicly, declaring the apiKey scheme and requirement', async () => {
    const res = await fetch(secure.cardUrl);
    expect(res.status).toBe(200);
    const card = (await res.json()) as any;
    expect(card.securitySchemes).toEqual({ apiKey: { apiKeySecurityScheme: { description: expect.any(String), location: 'header', name: 'X-API-Key' } } });
    expect(card.securityRequirements).toEqual([{ schemes: { apiKey: {} } }]);
  });
});

describe('Agent Cards', () => {
  it('are served as JSON with a short public Cache-Control and an ETag honoured by If-None-Match', async () => {
    const res = await fetch(echo.cardUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('public, max-age=60');
    const etag = res.headers.get('etag');
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const again = await fetch(echo.cardUrl, { headers: { 'if-none-match': etag! } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    // Last-Modified / If-Modified-Since (If-None-Match wins when both are sent)
    const lastModified = res.headers.get('last-modified')!;
    expect(Date.parse(lastModified)).toBeLessThanOrEqual(Date.now());
    expect((await fetch(echo.cardUrl, { headers: { 'if-modified-since': lastModified } })).status).toBe(304);
    expect((await fetch(echo.cardUrl, { headers: { 'if-modified-since': new Date(Date.parse(lastModified) - 1000).toUTCString() } })).status).toBe(200);
    expect((await fetch(echo.cardUrl, { headers: { 'if-modified-since': lastModified, 'if-none-match': '"other"' } })).status).toBe(200);
    expect((await fetch(echo.cardUrl, { headers: { 'if-modified-since': 'not a date' } })).status).toBe(200);
  });

  it('come in the v0.3 shape when A2A-Version: 0.3 is asked for explicitly', async () => {
    const res = await fetch(echo.cardUrl, { headers: { 'a2a-version': '0.3' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('vary')).toMatch(/A2A-Version/i);
    const card = (await res.json()) as any;
    expect(card).toMatchObject({ protocolVersion: '0.3.0', url, preferredTransport: 'JSONRPC', additionalInterfaces: [{ url, transport: 'JSONRPC' }] });
    expect(card.supportedInterfaces).toBeUndefined();
    expect(isLegacyAgentCard(card)).toBe(true);
    expect(parseLegacyAgentCard(card).supportedInterfaces.map((i) => [i.url, i.protocolVersion])).toContainEqual([url, '0.3']);
    // no header, or 1.0: the v1.0 card
    const variants: Array<Record<string, string>> = [{}, { 'a2a-version': '1.0' }];
    for (const headers of variants) {
      const v1 = (await (await fetch(echo.cardUrl, { headers })).json()) as any;
      expect(v1.supportedInterfaces).toHaveLength(2);
      expect(v1.url).toBeUndefined();
    }
  });

  it('reflect the active revision: publishing and activating a new one changes the card', async () => {
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `versioned-${randomUUID().slice(0, 6)}`, a2a: { identityProjection: { name: 'V1 name', version: '1.0.0' } } });
    const before = await fetch(agent.cardUrl);
    const cardBefore = (await before.json()) as any;
    expect(cardBefore).toMatchObject({ name: 'V1 name', version: '1.0.0' });

    const rev = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${agent.agentId}/revisions`, {
      protocolProfiles: {
        a2a: {
          identityProjection: { name: 'V2 name', description: 'Second revision', version: '2.0.0' },
          skillsProjection: [{ id: 'echo2', name: 'Echo 2', description: 'Echoes twice', tags: ['demo'] }],
          defaultOutputModes: ['text/plain', 'application/json'],
        },
      },
      runtime: { kind: 'scripted', rules: [] },
    });
    expect(rev.status).toBe(201);
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${agent.agentId}/revisions/${rev.body.id}/publish`)).status).toBe(200);
    // published but not active yet: the card still shows the active revision
    expect(((await (await fetch(agent.cardUrl)).json()) as any).version).toBe('1.0.0');
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'PUT', `/v1/agents/${agent.agentId}/active-revision`, { revisionId: rev.body.id })).status).toBe(200);

    const after = await fetch(agent.cardUrl);
    const card = (await after.json()) as any;
    expect(card).toMatchObject({ name: 'V2 name', description: 'Second revision', version: '2.0.0', defaultOutputModes: ['text/plain', 'application/json'] });
    expect(card.skills.map((s: { id: string }) => s.id)).toEqual(['echo2']);
    expect(after.headers.get('etag')).not.toBe(before.headers.get('etag'));
  });

  it('the default agent\'s card is served at the host root', async () => {
    const def = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `default-${randomUUID().slice(0, 6)}`, isDefault: true, a2a: { identityProjection: { name: 'Front Desk', version: '3.0.0' } } });
    const res = await fetch(`${stack.baseUrl}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card = (await res.json()) as any;
    expect(card.name).toBe('Front Desk');
    expect(card.supportedInterfaces[0]).toEqual({ url: `${stack.baseUrl}${def.basePath}`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' });
    // and the SDK can start from the host root
    const client = await new ClientFactory().createFromUrl(stack.baseUrl);
    const task = (await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi desk' }] } }))) as Task;
    expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_COMPLETED');
  });

  it('a host-root card is 404 when the default agent is not published', async () => {
    // moving the default flag to an agent without a revision leaves no published default
    const created = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: `nodefault-${randomUUID().slice(0, 6)}`, name: 'x', description: 'x', isDefault: true });
    expect(created.status).toBe(201);
    const res = await fetch(`${stack.baseUrl}/.well-known/agent-card.json`);
    expect(res.status).toBe(404);
  });
});
