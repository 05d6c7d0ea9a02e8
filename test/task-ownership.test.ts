import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Task ownership over A2A: a task belongs to the principal that created it. Another API key of the
 * same organization cannot get, list, cancel, subscribe to, continue or configure push on it (it
 * reads as TaskNotFound, exactly as a task that does not exist) unless it holds `a2a:all-tasks`
 * (or `admin`). On an agent without authentication every caller is anonymous: a task id is the
 * capability for that task, and ListTasks lists only within a contextId the caller names.
 */
const RUNTIME = { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] };
const CAPS = { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } };

let stack: Stack;
let secured: PublishedAgent;
let open: PublishedAgent;
const keys: Record<'a' | 'b' | 'all', string> = { a: '', b: '', all: '' };

async function newKey(name: string, scopes: string[]): Promise<string> {
  const r = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name, scopes });
  expect(r.status).toBe(201);
  return r.body.key as string;
}

async function rpc(agent: PublishedAgent, key: string | null, method: string, params: unknown): Promise<any> {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return res.json();
}

const hold = (contextId?: string) => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold it' }], ...(contextId ? { contextId } : {}) }, configuration: { returnImmediately: true } });

beforeAll(async () => {
  stack = await startStack();
  secured = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'secured', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'apiKey' }, a2a: CAPS });
  open = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'open', runtime: RUNTIME, a2a: CAPS });
  keys.a = await newKey('caller a', ['a2a:invoke']);
  keys.b = await newKey('caller b', ['a2a:invoke']);
  keys.all = await newKey('operator', ['a2a:invoke', 'a2a:all-tasks']);
});

afterAll(async () => {
  await stack?.close();
});

describe('task ownership on an agent with API keys', () => {
  it("another principal of the organization cannot read, list, continue, subscribe to or cancel a caller's task", async () => {
    const created = await rpc(secured, keys.a, 'SendMessage', hold());
    const taskId: string = created.result.task.id;

    // the owner sees it, through the SDK client too
    const sdkFor = (key: string) =>
      new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: (input, init) => fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), 'x-api-key': key } }) })] }).createFromUrl(
        `${stack.baseUrl}${secured.basePath}/`,
      );
    const a = await sdkFor(keys.a);
    expect(((await a.getTask({ tenant: '', id: taskId, historyLength: undefined })) as Task).id).toBe(taskId);
    const b = await sdkFor(keys.b);
    await expect(b.getTask({ tenant: '', id: taskId, historyLength: undefined })).rejects.toBeInstanceOf(TaskNotFoundError);

    for (const [method, params] of [
      ['GetTask', { id: taskId }],
      ['CancelTask', { id: taskId }],
      ['SubscribeToTask', { id: taskId }],
      ['SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hijack' }], taskId } }],
    ] as const) {
      const r = await rpc(secured, keys.b, method, params);
      expect(r.error, method).toMatchObject({ code: -32001, message: `task ${taskId} not found` });
    }
    const listB = await rpc(secured, keys.b, 'ListTasks', {});
    expect(listB.result.tasks.map((t: { id: string }) => t.id)).not.toContain(taskId);
    const listA = await rpc(secured, keys.a, 'ListTasks', {});
    expect(listA.result.tasks.map((t: { id: string }) => t.id)).toEqual([taskId]);
    // REST says the same
    const rest = await fetch(`${stack.baseUrl}${secured.basePath}/tasks/${taskId}`, { headers: { 'a2a-version': '1.0', 'x-api-key': keys.b } });
    expect(rest.status).toBe(404);

    // a principal with a2a:all-tasks (or admin) sees every task
    expect((await rpc(secured, keys.all, 'GetTask', { id: taskId })).result.id).toBe(taskId);
    expect((await rpc(secured, keys.all, 'ListTasks', {})).result.tasks.map((t: { id: string }) => t.id)).toContain(taskId);
    expect((await rpc(secured, stack.adminKey, 'GetTask', { id: taskId })).result.id).toBe(taskId);

    // the task is untouched by B's attempts; its owner cancels it
    expect((await rpc(secured, keys.a, 'CancelTask', { id: taskId })).result.status.state).toBe('TASK_STATE_CANCELED');
    const run = (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${taskId}/events`)).body.events as Array<{ event: { type: string } }>;
    expect(run.filter((e) => e.event.type === 'message.added')).toHaveLength(1);
  });

  it('a page token of one caller is refused for another (the owner filter is part of the query)', async () => {
    await rpc(secured, keys.a, 'SendMessage', hold());
    await rpc(secured, keys.a, 'SendMessage', hold());
    const page = await rpc(secured, keys.a, 'ListTasks', { pageSize: 1 });
    expect(page.result.nextPageToken).not.toBe('');
    const stolen = await rpc(secured, keys.b, 'ListTasks', { pageSize: 1, pageToken: page.result.nextPageToken });
    expect(stolen.error.code).toBe(-32602);
  });
});

describe('an agent without authentication', () => {
  it('a task id is the capability for that task; ListTasks lists only within a named context', async () => {
    const contextId = randomUUID();
    const mine = (await rpc(open, null, 'SendMessage', hold(contextId))).result.task;
    const other = (await rpc(open, null, 'SendMessage', hold())).result.task;
    expect((await rpc(open, null, 'ListTasks', {})).result).toMatchObject({ tasks: [], totalSize: 0 });
    const listed = await rpc(open, null, 'ListTasks', { contextId });
    expect(listed.result.tasks.map((t: { id: string }) => t.id)).toEqual([mine.id]);
    expect((await rpc(open, null, 'GetTask', { id: other.id })).result.id).toBe(other.id);
    await rpc(open, null, 'CancelTask', { id: mine.id });
    await rpc(open, null, 'CancelTask', { id: other.id });
  });
});
