import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, SendMessageRequest, Task, taskStateToJSON, TaskState } from '@a2a-js/sdk';
import { ClientFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { A2AError as SdkA2AError, RequestMalformedError, TaskNotCancelableError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import { missingRequiredCardFields, type AgentCard } from '#libs/a2a';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The A2A v1.0 HTTP+JSON binding (§11): the official SDK client forced onto its REST transport,
 * and raw HTTP for every route (incl. the `/{tenant}/` twins), the status codes and the exact
 * `google.rpc.Status` error bodies.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong: {{input}}' }] },
  ],
};

const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';
const DOMAIN = 'a2a-protocol.org';

interface RestResult {
  status: number;
  headers: Headers;
  body: any;
}

/**
 * One raw HTTP call. `body`: objects as JSON, strings verbatim. `version` → `A2A-Version`
 * (default 1.0; null = no header). `contentType` defaults to application/json when a body is sent.
 */
async function rest(
  method: string,
  url: string,
  opts: { body?: unknown; version?: string | null; headers?: Record<string, string>; contentType?: string } = {},
): Promise<RestResult> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  const version = opts.version === undefined ? '1.0' : opts.version;
  if (version !== null) headers['a2a-version'] = version;
  let payload: string | undefined;
  if (opts.body !== undefined) {
    headers['content-type'] = opts.contentType ?? 'application/json';
    payload = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  }
  const res = await fetch(url, { method, headers, body: payload });
  const text = await res.text();
  let body: unknown = undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  return { status: res.status, headers: res.headers, body };
}

const userMessage = (text: string, extra: object = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

/** The exact error body of the binding (A2A v1.0 §11.6). */
function errorBody(code: number, status: string, reason: string, metadata?: Record<string, string>) {
  return {
    error: {
      code,
      status,
      message: expect.any(String),
      details: [{ '@type': ERROR_INFO, reason, domain: DOMAIN, ...(metadata ? { metadata } : {}) }],
    },
  };
}

async function rejection(p: Promise<unknown>): Promise<SdkA2AError & { statusCode?: number }> {
  try {
    await p;
  } catch (e) {
    return e as SdkA2AError & { statusCode?: number };
  }
  throw new Error('expected the call to fail');
}

const state = (t: Task) => taskStateToJSON(t.status!.state);
const texts = (msgs: Array<{ parts: Array<{ content?: { $case: string; value: unknown } }> }>) =>
  msgs.map((m) => m.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''));

function send(text: string, configuration: object = {}) {
  return SendMessageRequest.fromJSON({ message: userMessage(text), configuration });
}

let stack: Stack;
let echo: PublishedAgent;
let base: string;
let client: A2AClient;

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
  base = `${stack.baseUrl}${echo.basePath}`;
  client = await new ClientFactory({ transports: [new RestTransportFactory()] }).createFromUrl(`${base}/`);
});

afterAll(async () => {
  await stack?.close();
});

describe('Agent Card', () => {
  it('lists the HTTP+JSON interface (1.0) at the same base URL as JSON-RPC when the binding enables it', async () => {
    const card = (await (await fetch(echo.cardUrl)).json()) as AgentCard;
    expect(card.supportedInterfaces).toEqual([
      { url: base, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: base, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      { url: base, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
    ]);
    expect(missingRequiredCardFields(card)).toEqual([]);
    // the v0.3 card lists only what speaks 0.3
    const v03 = (await (await fetch(echo.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as { additionalInterfaces: unknown[] };
    expect(v03.additionalInterfaces).toEqual([{ url: base, transport: 'JSONRPC' }]);
  });

  it('does not list HTTP+JSON for a JSON-RPC-only binding, whose REST routes are 404', async () => {
    const rpcOnly = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rpc-only', runtime: RUNTIME });
    const card = (await (await fetch(rpcOnly.cardUrl)).json()) as AgentCard;
    expect(card.supportedInterfaces.map((i) => i.protocolBinding)).toEqual(['JSONRPC', 'JSONRPC']);
    const r = await rest('POST', `${stack.baseUrl}${rpcOnly.basePath}/message:send`, { body: { message: userMessage('x') } });
    expect(r.status).toBe(404);
    expect(r.body).toEqual(errorBody(404, 'NOT_FOUND', 'METHOD_NOT_FOUND'));
  });
});

describe('HTTP+JSON with the official SDK client (RestTransportFactory only)', () => {
  it('picks the HTTP+JSON interface', () => {
    expect(client.transport.protocolName).toBe('HTTP+JSON');
    expect(client.protocolVersion).toBe('1.0');
  });

  it('SendMessage (blocking) returns the completed echo; returnImmediately the submitted task; a reply rule a Message', async () => {
    const task = (await client.sendMessage(send('hello rest'))) as Task;
    expect('messageId' in task).toBe(false);
    expect(state(task)).toBe('TASK_STATE_COMPLETED');
    expect(task.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);
    expect(texts(task.history)).toEqual(['hello rest', 'hello rest']);

    const quick = (await client.sendMessage(send('hold quick', { returnImmediately: true }))) as Task;
    expect(state(quick)).toBe('TASK_STATE_SUBMITTED');
    await client.cancelTask({ tenant: '', id: quick.id, metadata: undefined });

    const reply = await client.sendMessage(send('ping rest'));
    expect('messageId' in reply).toBe(true);
    expect(texts([reply as never])).toEqual(['pong: ping rest']);
  });

  it('GetTask applies historyLength (unset = all, 1 = the newest, 0 = none)', async () => {
    const task = (await client.sendMessage(send('history please'))) as Task;
    const all = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
    expect(all.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);
    const one = await client.getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(one.history.map((m) => m.role)).toEqual([Role.ROLE_AGENT]);
    const none = await client.getTask({ tenant: '', id: task.id, historyLength: 0 });
    expect(none.history).toEqual([]);
    expect(none.status!.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it('CancelTask cancels a live task; a second cancel is TaskNotCancelableError (400, §5.4)', async () => {
    const held = (await client.sendMessage(send('hold me', { returnImmediately: true }))) as Task;
    const canceled = await client.cancelTask({ tenant: '', id: held.id, metadata: undefined });
    expect(canceled.id).toBe(held.id);
    expect(state(canceled)).toBe('TASK_STATE_CANCELED');

    const e = await rejection(client.cancelTask({ tenant: '', id: held.id, metadata: undefined }));
    expect(e).toBeInstanceOf(TaskNotCancelableError);
    expect(e.name).toBe('TaskNotCancelableError');
    expect(e.reason).toBe('TASK_NOT_CANCELABLE');
    expect(e.statusCode).toBe(400);
  });

  it('an unknown task is TaskNotFoundError (404), also for ids that are not UUIDs', async () => {
    for (const id of [randomUUID(), 'no-such-task', 'a:b']) {
      const e = await rejection(client.getTask({ tenant: '', id, historyLength: undefined }));
      expect(e).toBeInstanceOf(TaskNotFoundError);
      expect(e.statusCode).toBe(404);
    }
    const e = await rejection(client.cancelTask({ tenant: '', id: randomUUID(), metadata: undefined }));
    expect(e).toBeInstanceOf(TaskNotFoundError);
  });

  it('ListTasks pages through the tasks; bad params are RequestMalformedError (400)', async () => {
    const contextId = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const t = (await client.sendMessage(SendMessageRequest.fromJSON({ message: userMessage(`list ${i}`, { contextId }) }))) as Task;
      ids.push(t.id);
    }
    const first = await client.listTasks({ tenant: '', contextId, status: 0, pageSize: 2, pageToken: '', historyLength: 0, statusTimestampAfter: undefined, includeArtifacts: false });
    expect(first.tasks.map((t) => t.id)).toEqual([ids[2], ids[1]]);
    expect(first).toMatchObject({ pageSize: 2, totalSize: 3 });
    expect(first.nextPageToken).not.toBe('');
    expect(first.tasks.every((t) => t.history.length === 0)).toBe(true);
    const second = await client.listTasks({ tenant: '', contextId, status: 0, pageSize: 2, pageToken: first.nextPageToken, historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false });
    expect(second.tasks.map((t) => t.id)).toEqual([ids[0]]);
    expect(second.nextPageToken).toBe('');
    expect(second.tasks[0]!.history).toHaveLength(2);

    const completed = await client.listTasks({ tenant: '', contextId, status: TaskState.TASK_STATE_COMPLETED, pageSize: 10, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false });
    expect(completed.totalSize).toBe(3);
    const working = await client.listTasks({ tenant: '', contextId, status: TaskState.TASK_STATE_WORKING, pageSize: 10, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false });
    expect(working).toMatchObject({ tasks: [], totalSize: 0, nextPageToken: '' });

    const bad = await rejection(client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 101, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false }));
    expect(bad).toBeInstanceOf(RequestMalformedError);
    expect(bad.statusCode).toBe(400);
    const badToken = await rejection(client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 1, pageToken: 'bm90LWEtdG9rZW4', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false }));
    expect(badToken).toBeInstanceOf(RequestMalformedError);
  });
});

describe('HTTP+JSON on the wire', () => {
  it('POST /message:send answers 200 application/json with the bare SendMessageResponse (application/a2a+json accepted)', async () => {
    for (const contentType of ['application/json', 'application/a2a+json', 'application/json; charset=utf-8']) {
      const r = await rest('POST', `${base}/message:send`, { body: { message: userMessage('raw hello') }, contentType });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Object.keys(r.body)).toEqual(['task']);
      expect(r.body.task).toMatchObject({ status: { state: 'TASK_STATE_COMPLETED' }, history: [{ role: 'ROLE_USER' }, { role: 'ROLE_AGENT', parts: [{ text: 'raw hello' }] }] });
    }
    const reply = await rest('POST', `${base}/message:send`, { body: { message: userMessage('ping wire') } });
    expect(reply.body).toEqual({ message: { messageId: expect.any(String), contextId: expect.any(String), role: 'ROLE_AGENT', parts: [{ text: 'pong: ping wire' }] } });
  });

  it('GET /tasks/{id} (historyLength / history_length), POST /tasks/{id}:cancel with or without a body', async () => {
    const sent = await rest('POST', `${base}/message:send`, { body: { message: userMessage('get me') } });
    const id: string = sent.body.task.id;
    const got = await rest('GET', `${base}/tasks/${id}?historyLength=1`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id, contextId: sent.body.task.contextId, status: { state: 'TASK_STATE_COMPLETED' } });
    expect(got.body.history.map((m: { role: string }) => m.role)).toEqual(['ROLE_AGENT']);
    const snake = await rest('GET', `${base}/tasks/${id}?history_length=0`);
    expect(snake.body.history).toBeUndefined();

    for (const body of [undefined, {}, { metadata: { why: 'test' } }]) {
      const held = await rest('POST', `${base}/message:send`, { body: { message: userMessage('hold wire'), configuration: { returnImmediately: true } } });
      const canceled = await rest('POST', `${base}/tasks/${held.body.task.id}:cancel`, { body });
      expect(canceled.status).toBe(200);
      expect(canceled.body).toMatchObject({ id: held.body.task.id, status: { state: 'TASK_STATE_CANCELED' } });
    }
  });

  it('GET /tasks answers a ListTasksResponse with all four fields (empty token on the last page)', async () => {
    const contextId = randomUUID();
    const one = await rest('POST', `${base}/message:send`, { body: { message: userMessage('only one', { contextId }) } });
    const r = await rest('GET', `${base}/tasks?contextId=${contextId}&includeArtifacts=false&A2A-Version=1.0`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ tasks: [expect.objectContaining({ id: one.body.task.id, contextId })], nextPageToken: '', pageSize: 50, totalSize: 1 });
    const snake = await rest('GET', `${base}/tasks?context_id=${contextId}&page_size=1&history_length=0`);
    expect(snake.body).toMatchObject({ tasks: [{ id: one.body.task.id }], nextPageToken: '', pageSize: 1, totalSize: 1 });
    expect(snake.body.tasks[0].history).toBeUndefined();
  });

  it('serves every route under /{tenant}/ for the organization slug; another tenant is 404 TaskNotFound', async () => {
    const t = `${base}/${echo.orgSlug}`;
    const sent = await rest('POST', `${t}/message:send`, { body: { message: userMessage('tenant hello') } });
    expect(sent.status).toBe(200);
    const id: string = sent.body.task.id;
    expect((await rest('GET', `${t}/tasks/${id}`)).body).toMatchObject({ id, status: { state: 'TASK_STATE_COMPLETED' } });
    expect((await rest('GET', `${t}/tasks?contextId=${sent.body.task.contextId}`)).body).toMatchObject({ tasks: [{ id }], totalSize: 1 });
    const held = await rest('POST', `${t}/message:send`, { body: { message: userMessage('hold tenant'), configuration: { returnImmediately: true } } });
    expect((await rest('POST', `${t}/tasks/${held.body.task.id}:cancel`)).body).toMatchObject({ status: { state: 'TASK_STATE_CANCELED' } });

    const other = `${base}/someone-else`;
    const attempts: Array<[string, string, unknown?]> = [
      ['POST', `${other}/message:send`, { message: userMessage('x') }],
      ['GET', `${other}/tasks/${id}`],
      ['GET', `${other}/tasks`],
      ['POST', `${other}/tasks/${id}:cancel`],
    ];
    for (const [method, url, body] of attempts) {
      const r = await rest(method, url, { body });
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', { tenant: 'someone-else' }));
    }
  });

  it('refuses a non-JSON Content-Type with 415 and malformed JSON with 400', async () => {
    for (const contentType of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
      const r = await rest('POST', `${base}/message:send`, { body: JSON.stringify({ message: userMessage('x') }), contentType });
      expect(r.status, contentType).toBe(415);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body).toEqual(errorBody(415, 'INVALID_ARGUMENT', 'CONTENT_TYPE_NOT_SUPPORTED', { contentType }));
    }
    // a body without any Content-Type is refused too; a cancel without a body needs none
    const untyped = await fetch(`${base}/message:send`, { method: 'POST', headers: { 'a2a-version': '1.0' }, body: new Uint8Array(Buffer.from('{}')) });
    expect(untyped.status).toBe(415);
    expect(await untyped.json()).toEqual(errorBody(415, 'INVALID_ARGUMENT', 'CONTENT_TYPE_NOT_SUPPORTED', { contentType: 'none' }));
    const bodyless = await rest('POST', `${base}/tasks/${randomUUID()}:cancel`, { headers: { 'content-type': 'text/plain' } });
    expect(bodyless.body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', expect.any(Object)));
    const malformed = await rest('POST', `${base}/message:send`, { body: '{"message":' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual(errorBody(400, 'INVALID_ARGUMENT', 'INVALID_PARAMS'));
    expect(malformed.body.error.message).toMatch(/^invalid JSON/);
    const cancelMalformed = await rest('POST', `${base}/tasks/${randomUUID()}:cancel`, { body: '{' });
    expect(cancelMalformed.status).toBe(400);
  });

  it('answers an unknown task with 404 TASK_NOT_FOUND naming the task', async () => {
    const id = randomUUID();
    for (const [method, url] of [
      ['GET', `${base}/tasks/${id}`],
      ['POST', `${base}/tasks/${id}:cancel`],
    ] as const) {
      const r = await rest(method, url);
      expect(r.status).toBe(404);
      expect(r.body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', { taskId: id }));
    }
    // a task id with dashes but not a UUID: routed as an id, then not found
    const dashed = await rest('GET', `${base}/tasks/not-a-uuid-at-all`);
    expect(dashed.body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', { taskId: 'not-a-uuid-at-all' }));
  });

  it('answers unknown routes under the agent path with 404 METHOD_NOT_FOUND, and routes not offered with their capability error', async () => {
    const notFound: Array<[string, string]> = [
      ['GET', `${base}/nope`],
      ['GET', `${base}/tasks/${randomUUID()}/more`],
      ['DELETE', `${base}/tasks/${randomUUID()}`],
      ['PUT', `${base}/message:send`],
      ['GET', `${base}/message:send`],
      ['POST', `${base}/tasks/${randomUUID()}:archive`],
      ['POST', `${base}/a/b/c/d`],
    ];
    for (const [method, url] of notFound) {
      const r = await rest(method, url);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.body, `${method} ${url}`).toEqual(errorBody(404, 'NOT_FOUND', 'METHOD_NOT_FOUND'));
    }
    const push = await rest('POST', `${base}/tasks/${randomUUID()}/pushNotificationConfigs`, { body: { url: 'https://x.test/hook' } });
    expect(push.status).toBe(400);
    expect(push.body).toEqual(errorBody(400, 'FAILED_PRECONDITION', 'PUSH_NOTIFICATION_NOT_SUPPORTED'));
    const pushT = await rest('GET', `${base}/${echo.orgSlug}/tasks/${randomUUID()}/pushNotificationConfigs/c1`);
    expect(pushT.body).toEqual(errorBody(400, 'FAILED_PRECONDITION', 'PUSH_NOTIFICATION_NOT_SUPPORTED'));
    const ext = await rest('GET', `${base}/extendedAgentCard`);
    expect(ext.body).toEqual(errorBody(400, 'FAILED_PRECONDITION', 'UNSUPPORTED_OPERATION'));
    // the card and the JSON-RPC endpoint under the same path are untouched
    expect((await fetch(echo.cardUrl)).status).toBe(200);
    const rpc = await rest('POST', base, { body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: randomUUID() } } });
    expect(rpc.body).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32001 } });
    const unknownAgent = await rest('GET', `${stack.baseUrl}/a2a/${echo.orgSlug}/nobody/tasks`);
    expect(unknownAgent.status).toBe(404);
    expect(unknownAgent.body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', { orgSlug: echo.orgSlug, agentSlug: 'nobody' }));
  });

  it.each<[string, string, string, unknown?]>([
    ['pageSize 0', 'GET', '/tasks?pageSize=0'],
    ['pageSize 101', 'GET', '/tasks?pageSize=101'],
    ['pageSize not a number', 'GET', '/tasks?pageSize=ten'],
    ['unknown status', 'GET', '/tasks?status=TASK_STATE_DONE'],
    ['status out of range', 'GET', '/tasks?status=9'],
    ['bad timestamp', 'GET', '/tasks?statusTimestampAfter=yesterday'],
    ['timestamp without zone', 'GET', '/tasks?statusTimestampAfter=2026-01-01T00:00:00'],
    ['garbage pageToken', 'GET', '/tasks?pageToken=garbage'],
    ['repeated parameter', 'GET', '/tasks?pageSize=1&pageSize=2'],
    ['includeArtifacts not a boolean', 'GET', '/tasks?includeArtifacts=yes'],
    ['negative historyLength', 'GET', `/tasks/${randomUUID()}?historyLength=-1`],
    ['no message', 'POST', '/message:send', {}],
    ['body not an object', 'POST', '/message:send', [1]],
    ['agent role', 'POST', '/message:send', { message: { ...userMessage('x'), role: 'ROLE_AGENT' } }],
    ['no parts', 'POST', '/message:send', { message: { ...userMessage('x'), parts: [] } }],
    ['empty body', 'POST', '/message:send', ''],
  ])('400 INVALID_ARGUMENT for bad params: %s', async (_name, method, path, body) => {
    const r = await rest(method, `${base}${path}`, { body });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(errorBody(400, 'INVALID_ARGUMENT', 'INVALID_PARAMS', r.body?.error?.details?.[0]?.metadata));
  });

  it('A2A-Version: 1.0 (also 1.0.x or ?A2A-Version=1.0) is required; absent (= 0.3), 0.3 and unknown versions are 400 VERSION_NOT_SUPPORTED', async () => {
    for (const version of [null, '', '0.3', '0.3.0', '9.9', 'latest']) {
      const r = await rest('GET', `${base}/tasks`, { version });
      expect(r.status, String(version)).toBe(400);
      expect(r.body).toEqual(errorBody(400, 'FAILED_PRECONDITION', 'VERSION_NOT_SUPPORTED', expect.objectContaining({ supported: '1.0' })));
    }
    expect((await rest('GET', `${base}/tasks`, { version: '1.0.3' })).status).toBe(200);
    expect((await rest('GET', `${base}/tasks?A2A-Version=1.0`, { version: null })).status).toBe(200);
    const sent = await rest('POST', `${base}/message:send`, { body: { message: userMessage('v') }, version: null });
    expect(sent.status).toBe(400);
  });

  it('does not list or serve another agent’s tasks', async () => {
    const other = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'other', runtime: RUNTIME, transports: ['HTTP+JSON'] });
    const otherBase = `${stack.baseUrl}${other.basePath}`;
    const theirs = await rest('POST', `${otherBase}/message:send`, { body: { message: userMessage('mine') } });
    expect(theirs.status).toBe(200);
    const id: string = theirs.body.task.id;
    expect((await rest('GET', `${otherBase}/tasks/${id}`)).status).toBe(200);
    expect((await rest('GET', `${base}/tasks/${id}`)).body).toEqual(errorBody(404, 'NOT_FOUND', 'TASK_NOT_FOUND', { taskId: id }));
    expect((await rest('POST', `${base}/tasks/${id}:cancel`)).status).toBe(404);
    const listed = await rest('GET', `${base}/tasks?contextId=${theirs.body.task.contextId}`);
    expect(listed.body).toEqual({ tasks: [], nextPageToken: '', pageSize: 50, totalSize: 0 });
  });
});

describe('HTTP+JSON endpoint security (apiKey binding)', () => {
  let secureBase: string;
  let invokeKey: string;
  let weakKey: string;
  let otherOrgKey: string;

  beforeAll(async () => {
    const secure = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'secure-rest', runtime: RUNTIME, transports: ['HTTP+JSON', 'JSONRPC'], security: { scheme: 'apiKey' } });
    secureBase = `${stack.baseUrl}${secure.basePath}`;
    const mk = async (scopes: string[]) => {
      const r = await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: scopes.join('+'), scopes });
      expect(r.status).toBe(201);
      return r.body.key;
    };
    invokeKey = await mk(['a2a:invoke']);
    weakKey = await mk(['platform']);
    const org = await adminRequest<{ adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: `rest-${randomUUID().slice(0, 8)}`, name: 'Rest' });
    otherOrgKey = org.body.adminKey.key;
  });

  it('401 UNAUTHENTICATED with WWW-Authenticate for a missing, unknown or other-organization key; 403 PERMISSION_DENIED without a2a:invoke', async () => {
    const attempts: Array<Record<string, string>> = [{}, { 'x-api-key': 'aaas_AAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBB' }, { authorization: 'Bearer nonsense' }, { 'x-api-key': otherOrgKey }];
    for (const headers of attempts) {
      const r = await rest('GET', `${secureBase}/tasks`, { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/Bearer/);
      expect(r.body).toEqual(errorBody(401, 'UNAUTHENTICATED', 'UNAUTHENTICATED'));
    }
    const weak = await rest('POST', `${secureBase}/message:send`, { body: { message: userMessage('x') }, headers: { 'x-api-key': weakKey } });
    expect(weak.status).toBe(403);
    expect(weak.body).toEqual(errorBody(403, 'PERMISSION_DENIED', 'PERMISSION_DENIED', { requiredScope: 'a2a:invoke' }));
  });

  it('serves a key with a2a:invoke (header or bearer), also through the SDK REST client', async () => {
    const sent = await rest('POST', `${secureBase}/message:send`, { body: { message: userMessage('secure hi') }, headers: { 'x-api-key': invokeKey } });
    expect(sent.status).toBe(200);
    const got = await rest('GET', `${secureBase}/tasks/${sent.body.task.id}`, { headers: { authorization: `Bearer ${stack.adminKey}` } });
    expect(got.body.id).toBe(sent.body.task.id);

    const c = await new ClientFactory({ transports: [new RestTransportFactory()] }).createFromUrl(`${secureBase}/`);
    const task = (await c.sendMessage(send('sdk secure rest'), { serviceParameters: { 'X-API-Key': invokeKey } })) as Task;
    expect(state(task)).toBe('TASK_STATE_COMPLETED');
    const e = await rejection(c.getTask({ tenant: '', id: task.id, historyLength: undefined }));
    expect(e.statusCode).toBe(401);
  });
});
