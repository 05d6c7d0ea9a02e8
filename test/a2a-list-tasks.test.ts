import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, TaskState, taskStateToJSON, type ListTasksRequest } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * ListTasks (A2A v1.0 §3.1.4) over JSON-RPC (the SDK client and raw calls) and HTTP+JSON
 * (`GET /tasks`): filters (contextId, derived status, statusTimestampAfter), keyset pagination
 * under concurrent writes, totalSize, historyLength / includeArtifacts, exact errors for bad
 * params, and scoping to the endpoint's agent and organization.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'sleep', match: { text: '^sleep' }, steps: [{ type: 'wait', ms: 600_000 }] },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ask', match: { text: '^ask' }, steps: [{ type: 'status', status: 'input-required', message: 'Which day?' }] },
    { name: 'auth', match: { text: '^auth' }, steps: [{ type: 'status', status: 'auth-required', message: 'Sign in' }] },
    { name: 'fail', match: { text: '^fail' }, steps: [{ type: 'status', status: 'failed', message: 'nope' }] },
    { name: 'reject', match: { text: '^reject' }, steps: [{ type: 'status', status: 'rejected' }] },
    { name: 'report', match: { text: '^report' }, steps: [{ type: 'artifact', name: 'report', content: { text: 'the report' } }, { type: 'status', status: 'completed' }] },
  ],
};

let stack: Stack;
let lister: PublishedAgent;
let rpcUrl: string;
let client: A2AClient;

interface Raw {
  status: number;
  body: any;
}

/** ListTasks over JSON-RPC; with `key`, as that principal (an admin key sees every task of the agent). */
async function rpc(url: string, params: unknown, key?: string): Promise<Raw> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params }),
  });
  return { status: res.status, body: await res.json() };
}

async function restList(baseUrl: string, query: string): Promise<Raw> {
  const res = await fetch(`${baseUrl}/tasks${query ? `?${query}` : ''}`, { headers: { 'a2a-version': '1.0' } });
  return { status: res.status, body: await res.json() };
}

async function sendRaw(url: string, text: string, opts: { contextId?: string; returnImmediately?: boolean } = {}): Promise<any> {
  const { body } = (await sendMessageRpc(url, text, opts)) as { body: { result?: { task?: unknown }; error?: unknown } };
  if (!body.result?.task) throw new Error(`SendMessage failed: ${JSON.stringify(body)}`);
  return body.result.task;
}

/** A ListTasksRequest for the SDK client (ts-proto types: every field present). */
function listReq(over: Partial<ListTasksRequest> = {}): ListTasksRequest {
  return { tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: undefined, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined, ...over };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The tasks of a context in each state, created once for the filter tests. */
const ctx = randomUUID();
const byState: Record<string, string> = {};

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  lister = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'lister', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
  rpcUrl = `${stack.baseUrl}${lister.basePath}`;
  client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${rpcUrl}/`);

  byState.TASK_STATE_COMPLETED = (await sendRaw(rpcUrl, 'echo me', { contextId: ctx })).id;
  byState.TASK_STATE_INPUT_REQUIRED = (await sendRaw(rpcUrl, 'ask me', { contextId: ctx })).id;
  byState.TASK_STATE_AUTH_REQUIRED = (await sendRaw(rpcUrl, 'auth me', { contextId: ctx })).id;
  byState.TASK_STATE_FAILED = (await sendRaw(rpcUrl, 'fail me', { contextId: ctx })).id;
  byState.TASK_STATE_REJECTED = (await sendRaw(rpcUrl, 'reject me', { contextId: ctx })).id;
  byState.TASK_STATE_SUBMITTED = (await sendRaw(rpcUrl, 'sleep me', { contextId: ctx, returnImmediately: true })).id;
  byState.TASK_STATE_WORKING = (await sendRaw(rpcUrl, 'hold me', { contextId: ctx, returnImmediately: true })).id;
  const toCancel = (await sendRaw(rpcUrl, 'hold then cancel', { contextId: ctx, returnImmediately: true })).id;
  await client.cancelTask({ tenant: '', id: toCancel, metadata: undefined });
  byState.TASK_STATE_CANCELED = toCancel;
  await waitFor('the hold task to work', async () => {
    const t = await client.getTask({ tenant: '', id: byState.TASK_STATE_WORKING!, historyLength: 0 });
    return taskStateToJSON(t.status!.state) === 'TASK_STATE_WORKING' ? true : undefined;
  });
});

afterAll(async () => {
  // the long-running tasks end with the test (cancel is idempotent enough for cleanup)
  for (const id of [byState.TASK_STATE_SUBMITTED, byState.TASK_STATE_WORKING]) {
    if (id) await client.cancelTask({ tenant: '', id, metadata: undefined }).catch(() => undefined);
  }
  await stack?.close();
});

describe('ListTasks filters', () => {
  it('contextId: every task of the context, newest status first, with totalSize', async () => {
    const r = await client.listTasks(listReq({ contextId: ctx }));
    expect(r.totalSize).toBe(8);
    expect(r.pageSize).toBe(50);
    expect(r.nextPageToken).toBe('');
    expect(new Set(r.tasks.map((t) => t.id))).toEqual(new Set(Object.values(byState)));
    const stamps = r.tasks.map((t) => t.status!.timestamp!);
    expect([...stamps].sort().reverse()).toEqual(stamps);
  });

  it('status: the derived TaskState, for each of the eight states (SDK client, raw JSON-RPC by name and number, REST)', async () => {
    const numbers: Record<string, number> = { TASK_STATE_SUBMITTED: 1, TASK_STATE_WORKING: 2, TASK_STATE_COMPLETED: 3, TASK_STATE_FAILED: 4, TASK_STATE_CANCELED: 5, TASK_STATE_INPUT_REQUIRED: 6, TASK_STATE_REJECTED: 7, TASK_STATE_AUTH_REQUIRED: 8 };
    for (const [name, id] of Object.entries(byState)) {
      const viaSdk = await client.listTasks(listReq({ contextId: ctx, status: numbers[name] as TaskState }));
      expect(viaSdk.tasks.map((t) => [t.id, taskStateToJSON(t.status!.state)]), name).toEqual([[id, name]]);
      expect(viaSdk.totalSize).toBe(1);
      const byName = await rpc(rpcUrl, { contextId: ctx, status: name });
      expect(byName.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([id]);
      const byNumber = await rpc(rpcUrl, { context_id: ctx, status: numbers[name] });
      expect(byNumber.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([id]);
      const viaRest = await restList(rpcUrl, `contextId=${ctx}&status=${name}`);
      expect(viaRest.body).toMatchObject({ tasks: [{ id, status: { state: name } }], totalSize: 1, nextPageToken: '' });
    }
    const unspecified = await rpc(rpcUrl, { contextId: ctx, status: 'TASK_STATE_UNSPECIFIED' });
    expect(unspecified.body.result.totalSize).toBe(8);
  });

  it('statusTimestampAfter: tasks whose status changed at or after the instant (RFC 3339, any offset)', async () => {
    const all = (await client.listTasks(listReq({ contextId: ctx }))).tasks;
    const pivot = all[3]!; // newest first: three tasks are newer (or as new)
    const at = pivot.status!.timestamp!;
    const expected = all.filter((t) => t.status!.timestamp! >= at).map((t) => t.id);
    const r = await client.listTasks(listReq({ contextId: ctx, statusTimestampAfter: at }));
    expect(r.tasks.map((t) => t.id)).toEqual(expected);
    expect(r.tasks.map((t) => t.id)).toContain(pivot.id);
    expect(r.totalSize).toBe(expected.length);

    // the same instant in another offset, and one microsecond later (excludes the pivot's millisecond)
    const shifted = new Date(Date.parse(at) + 2 * 3600_000).toISOString().replace('Z', '+02:00');
    expect((await rpc(rpcUrl, { contextId: ctx, statusTimestampAfter: shifted })).body.result.totalSize).toBe(expected.length);
    const later = at.replace('Z', '001Z');
    const afterPivot = (await rpc(rpcUrl, { contextId: ctx, statusTimestampAfter: later })).body.result.tasks.map((t: { id: string }) => t.id);
    expect(afterPivot).toEqual(all.filter((t) => t.status!.timestamp! > at).map((t) => t.id));
    expect((await rpc(rpcUrl, { contextId: ctx, statusTimestampAfter: '2999-01-01T00:00:00Z' })).body.result).toEqual({ tasks: [], nextPageToken: '', pageSize: 50, totalSize: 0 });
  });

  it('historyLength per task (unset = all, 0 = none) and includeArtifacts (default false)', async () => {
    const reportCtx = randomUUID();
    const report = await sendRaw(rpcUrl, 'report please', { contextId: reportCtx });
    expect(report.artifacts).toHaveLength(1);

    const plain = await rpc(rpcUrl, { contextId: reportCtx });
    const task = plain.body.result.tasks[0];
    expect(task.id).toBe(report.id);
    expect(task.artifacts).toBeUndefined();
    expect(task.history.map((m: { role: string }) => m.role)).toEqual(['ROLE_USER']);
    expect(task.status).toMatchObject({ state: 'TASK_STATE_COMPLETED' });

    const full = await rpc(rpcUrl, { contextId: reportCtx, includeArtifacts: true, historyLength: 0 });
    expect(full.body.result.tasks[0].artifacts).toEqual([{ artifactId: expect.any(String), name: 'report', parts: [{ text: 'the report' }] }]);
    expect(full.body.result.tasks[0].history).toBeUndefined();
    const viaRest = await restList(rpcUrl, `contextId=${reportCtx}&includeArtifacts=true&historyLength=1`);
    expect(viaRest.body.tasks[0]).toEqual({ ...task, artifacts: full.body.result.tasks[0].artifacts });

    // the status message of the newest status event is there, as in GetTask
    const ask = await rpc(rpcUrl, { contextId: ctx, status: 'TASK_STATE_INPUT_REQUIRED', historyLength: 1 });
    const got = await client.getTask({ tenant: '', id: byState.TASK_STATE_INPUT_REQUIRED!, historyLength: 1 });
    expect(ask.body.result.tasks[0]).toEqual(Task.toJSON(got));
  });
});

describe('ListTasks pagination', () => {
  it('walks every page with no duplicate and no miss while new tasks are being created', async () => {
    const pager = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'pager', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
    const url = `${stack.baseUrl}${pager.basePath}`;
    const initial: string[] = [];
    for (let i = 0; i < 23; i++) initial.push((await sendRaw(url, `page item ${i}`)).id);

    let writing = true;
    const created: string[] = [];
    const writer = (async () => {
      while (writing) created.push((await sendRaw(url, `concurrent ${created.length}`, { returnImmediately: true })).id);
    })();

    const seen: string[] = [];
    const pages: number[] = [];
    let token = '';
    let previousLast: string | undefined;
    try {
      for (let guard = 0; guard < 50; guard++) {
        const r = await rpc(url, { pageSize: 4, ...(token ? { pageToken: token } : {}), historyLength: 0 }, stack.adminKey);
        expect(r.body.error).toBeUndefined();
        const page = r.body.result;
        expect(page.pageSize).toBe(4);
        expect(page.tasks.length).toBeLessThanOrEqual(4);
        // within and across pages: strictly descending (statusTimestamp, id)
        const keys = page.tasks.map((t: { id: string; status: { timestamp: string } }) => `${t.status.timestamp}|${t.id}`);
        if (previousLast !== undefined && keys.length > 0) expect(keys[0] < previousLast).toBe(true);
        for (let i = 1; i < keys.length; i++) expect(keys[i] < keys[i - 1]).toBe(true);
        previousLast = keys.at(-1) ?? previousLast;
        seen.push(...page.tasks.map((t: { id: string }) => t.id));
        pages.push(page.tasks.length);
        token = page.nextPageToken;
        if (token === '') break;
        await new Promise((r) => setTimeout(r, 5));
      }
    } finally {
      writing = false;
      await writer;
    }
    expect(token).toBe('');
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of initial) expect(seen.filter((s) => s === id)).toHaveLength(1);
    expect(created.length).toBeGreaterThan(0);
    expect(pages.length).toBeGreaterThanOrEqual(6);

    // the total counts the same filters, whatever the page; a quiet listing matches it exactly
    const done = await waitFor('the concurrent tasks to complete', async () => {
      const r = await rpc(url, { status: 'TASK_STATE_COMPLETED', pageSize: 100 }, stack.adminKey);
      // totalSize and the page are two reads; wait until both have seen every task completed
      const want = initial.length + created.length;
      return r.body.result.totalSize === want && r.body.result.tasks.length === want ? r.body.result : undefined;
    });
    expect(done.tasks).toHaveLength(initial.length + created.length);
  });

  it('pages the same way through the SDK client and REST, and the token works on both bindings', async () => {
    const c = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await sendRaw(rpcUrl, `mixed ${i}`, { contextId: c })).id);
    const newestFirst = [...ids].reverse();

    const p1 = await client.listTasks(listReq({ contextId: c, pageSize: 2 }));
    expect(p1.tasks.map((t) => t.id)).toEqual(newestFirst.slice(0, 2));
    expect(p1.totalSize).toBe(5);
    const p2 = await restList(rpcUrl, `contextId=${c}&pageSize=2&pageToken=${encodeURIComponent(p1.nextPageToken)}`);
    expect(p2.body.tasks.map((t: { id: string }) => t.id)).toEqual(newestFirst.slice(2, 4));
    expect(p2.body.totalSize).toBe(5);
    const p3 = await client.listTasks(listReq({ contextId: c, pageSize: 3, pageToken: p2.body.nextPageToken }));
    expect(p3.tasks.map((t) => t.id)).toEqual(newestFirst.slice(4));
    expect(p3.nextPageToken).toBe('');
    // exactly a page's worth left: the last full page says there is no more
    const exact = await client.listTasks(listReq({ contextId: c, pageSize: 5 }));
    expect(exact.tasks).toHaveLength(5);
    expect(exact.nextPageToken).toBe('');
  });
});

describe('ListTasks errors', () => {
  it.each<[string, unknown]>([
    ['pageSize 0', { pageSize: 0 }],
    ['pageSize 101', { pageSize: 101 }],
    ['pageSize not an integer', { pageSize: 1.5 }],
    ['unknown status', { status: 'TASK_STATE_SLEEPING' }],
    ['status number out of range', { status: 42 }],
    ['bad timestamp', { statusTimestampAfter: '31/01/2026' }],
    ['garbage pageToken', { pageToken: 'garbage' }],
    ['negative historyLength', { historyLength: -1 }],
    ['includeArtifacts not a boolean', { includeArtifacts: 'true' }],
  ])('JSON-RPC -32602 INVALID_PARAMS for %s', async (_name, params) => {
    const r = await rpc(rpcUrl, params);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: expect.any(String), data: [expect.objectContaining({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'INVALID_PARAMS', domain: 'a2a-protocol.org' })] },
    });
  });

  it('refuses a tampered token and a token reused with other filters (-32602 / HTTP 400); the SDK raises RequestMalformedError', async () => {
    const first = await client.listTasks(listReq({ contextId: ctx, pageSize: 2 }));
    const raw = Buffer.from(first.nextPageToken, 'base64url').toString('utf8');
    const tampered = Buffer.from(raw.replace(/~(\d+)~/, (_m, ms: string) => `~${Number(ms) + 1}~`), 'utf8').toString('base64url');
    expect(tampered).not.toBe(first.nextPageToken);
    const t = await rpc(rpcUrl, { contextId: ctx, pageSize: 2, pageToken: tampered });
    expect(t.body.error).toMatchObject({ code: -32602, message: 'pageToken is not a token returned by ListTasks' });
    const other = await rpc(rpcUrl, { contextId: ctx, status: 'TASK_STATE_COMPLETED', pageSize: 2, pageToken: first.nextPageToken });
    expect(other.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('other filters') });
    // another page size is fine
    expect((await rpc(rpcUrl, { contextId: ctx, pageSize: 3, pageToken: first.nextPageToken })).body.result.tasks).toHaveLength(3);

    const rest = await restList(rpcUrl, `contextId=${ctx}&pageToken=${tampered}`);
    expect(rest.status).toBe(400);
    expect(rest.body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', details: [{ reason: 'INVALID_PARAMS', metadata: { field: 'pageToken' } }] });

    await expect(client.listTasks(listReq({ pageSize: 0 }))).rejects.toBeInstanceOf(RequestMalformedError);
    await expect(client.listTasks(listReq({ pageToken: tampered }))).rejects.toBeInstanceOf(RequestMalformedError);
  });
});

describe('ListTasks scoping', () => {
  it("lists only the endpoint agent's tasks: not another agent's of the organization, not another organization's", async () => {
    const shared = randomUUID();
    const mine = await sendRaw(rpcUrl, 'mine', { contextId: shared });

    const sibling = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'sibling', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
    const siblingUrl = `${stack.baseUrl}${sibling.basePath}`;
    const theirs = await sendRaw(siblingUrl, 'theirs', { contextId: shared });

    const org = await adminRequest<{ slug: string; adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: `list-${randomUUID().slice(0, 8)}`, name: 'Other' });
    expect(org.status).toBe(201);
    const foreign = await publishAgent(stack.baseUrl, org.body.adminKey.key, { slug: 'lister', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'] });
    const foreignUrl = `${stack.baseUrl}${foreign.basePath}`;
    const foreignTask = await sendRaw(foreignUrl, 'foreign', { contextId: shared });

    const ids = async (url: string) => (await rpc(url, { contextId: shared })).body.result;
    expect(await ids(rpcUrl)).toMatchObject({ tasks: [{ id: mine.id }], totalSize: 1 });
    expect(await ids(siblingUrl)).toMatchObject({ tasks: [{ id: theirs.id }], totalSize: 1 });
    expect(await ids(foreignUrl)).toMatchObject({ tasks: [{ id: foreignTask.id }], totalSize: 1 });

    // unfiltered (as an admin of the organization, who sees every task): nothing of the others
    // leaks, and the totals are the agent's own
    const all = (await rpc(rpcUrl, { pageSize: 100 }, stack.adminKey)).body.result;
    const allIds = all.tasks.map((t: { id: string }) => t.id);
    expect(allIds).toContain(mine.id);
    expect(allIds).not.toContain(theirs.id);
    expect(allIds).not.toContain(foreignTask.id);
    expect((await rpc(foreignUrl, { pageSize: 100 }, org.body.adminKey.key)).body.result.totalSize).toBe(1);
    // and an admin of this organization is nobody at the other organization's agent
    expect((await rpc(foreignUrl, { pageSize: 100 }, stack.adminKey)).body.result.totalSize).toBe(0);

    // a page token is bound to its agent
    const page = (await rpc(rpcUrl, { pageSize: 1 }, stack.adminKey)).body.result;
    expect((await rpc(siblingUrl, { pageSize: 1, pageToken: page.nextPageToken }, stack.adminKey)).body.error).toMatchObject({ code: -32602 });
    // the other organization as REST tenant of this agent's URL is not found
    const tenant = await restList(`${rpcUrl}/${org.body.slug}`, '');
    expect(tenant.status).toBe(404);
    expect(tenant.body.error).toMatchObject({ status: 'NOT_FOUND', details: [{ reason: 'TASK_NOT_FOUND' }] });
  });
});

describe('ListTasks on the SDK client', () => {
  it('round-trips through the SDK types (SendMessageRequest → Task, then ListTasksResponse)', async () => {
    const c = randomUUID();
    const sent = (await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'sdk list' }], contextId: c } }))) as Task;
    const r = await client.listTasks(listReq({ contextId: c, historyLength: 1, includeArtifacts: true }));
    expect(r.tasks).toHaveLength(1);
    expect(r.tasks[0]!.id).toBe(sent.id);
    expect(r.tasks[0]!.history).toHaveLength(1);
    expect(taskStateToJSON(r.tasks[0]!.status!.state)).toBe('TASK_STATE_COMPLETED');
  });
});
