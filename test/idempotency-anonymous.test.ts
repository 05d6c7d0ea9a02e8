import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { SendMessageRequest, type AgentCard, type Message, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { isGrpcError, type GrpcA2AError } from '@a2a-js/sdk/errors/grpc';
import { DatabaseService } from '#libs/db';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43 row 9: anonymous callers of a public agent share the owner '' (docs/architecture.md,
 * invariant 3), so a messageId one of them used was, for the next one, a retry: it got the first
 * caller's task and text. Now a messageId an anonymous caller reuses is a retry only when it
 * carries the same message (parts, metadata, extensions, referenceTaskIds, and the contextId when
 * it names one); another message under it is `run.conflict` (A2A InvalidParams) and shows nothing
 * of the first. Every surface, as the tester's two `curl`s without credentials: JSON-RPC v1.0 and
 * v0.3, HTTP+JSON, gRPC, each blocking and streaming; follow-up messages and answers to an
 * interaction (message_keys' sender '' for anonymous), direct replies both ways. An identical
 * retry still gets the same task (the fault suite's retries rely on it).
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ask', match: { text: '^book' }, steps: [{ type: 'status', status: 'input-required', message: 'Which day?' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong to {{input}}' }] },
    {
      name: 'work',
      match: { text: '.' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'message', text: 'reply to {{input}}' },
        { type: 'status', status: 'completed' },
      ],
    },
  ],
};

let stack: Stack;
let db: DatabaseService;
let agent: PublishedAgent;
let grpcClient: A2AClient;

type Surface = 'jsonrpc' | 'jsonrpc-stream' | 'v0.3' | 'v0.3-stream' | 'rest' | 'rest-stream' | 'grpc' | 'grpc-stream';
const SURFACES: Surface[] = ['jsonrpc', 'jsonrpc-stream', 'v0.3', 'v0.3-stream', 'rest', 'rest-stream', 'grpc', 'grpc-stream'];

/** What a surface answered: the raw text (everything the caller saw), the task id, or the error. */
interface Answer {
  text: string;
  taskId?: string;
  /** JSON-RPC error code, HTTP status of an HTTP+JSON error, or gRPC status. */
  error?: number;
  errorMessage?: string;
}

function v1Message(messageId: string, text: string, opts: { taskId?: string; contextId?: string } = {}) {
  return { messageId, role: 'ROLE_USER', parts: [{ text }], ...(opts.taskId && { taskId: opts.taskId }), ...(opts.contextId && { contextId: opts.contextId }) };
}

function v03Message(messageId: string, text: string, opts: { taskId?: string; contextId?: string } = {}) {
  return { kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text }], ...(opts.taskId && { taskId: opts.taskId }), ...(opts.contextId && { contextId: opts.contextId }) };
}

/** The first task id an answer names (a JSON-RPC result, a REST body, or the SSE events). */
function taskIdIn(text: string): string | undefined {
  return /"(?:taskId|id)":"([0-9a-f-]{36})"/.exec(text)?.[1];
}

/** A message sent without credentials, as `curl` would, on `surface`. */
async function send(surface: Surface, messageId: string, text: string, opts: { taskId?: string; contextId?: string; immediate?: boolean } = {}): Promise<Answer> {
  const base = `${stack.baseUrl}${agent.basePath}`;
  if (surface === 'grpc' || surface === 'grpc-stream') return sendGrpc(surface, messageId, text, opts);
  let url = base;
  let body: unknown;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (surface === 'jsonrpc' || surface === 'jsonrpc-stream') {
    headers['a2a-version'] = '1.0';
    const method = surface === 'jsonrpc' ? 'SendMessage' : 'SendStreamingMessage';
    body = { jsonrpc: '2.0', id: 1, method, params: { message: v1Message(messageId, text, opts), ...(opts.immediate && { configuration: { returnImmediately: true } }) } };
  } else if (surface === 'v0.3' || surface === 'v0.3-stream') {
    const method = surface === 'v0.3' ? 'message/send' : 'message/stream';
    body = { jsonrpc: '2.0', id: 1, method, params: { message: v03Message(messageId, text, opts), ...(opts.immediate && { configuration: { blocking: false } }) } };
  } else {
    headers['a2a-version'] = '1.0';
    url = `${base}/${surface === 'rest' ? 'message:send' : 'message:stream'}`;
    body = { message: v1Message(messageId, text, opts), ...(opts.immediate && { configuration: { returnImmediately: true } }) };
  }
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const raw = await res.text();
  if (surface.startsWith('rest') && res.status >= 400) {
    const parsed = JSON.parse(raw) as { error: { code: number; message: string } };
    return { text: raw, error: res.status, errorMessage: parsed.error.message };
  }
  // a JSON-RPC error comes as one JSON body (or, once a stream started, as its one SSE event)
  const json = raw.startsWith('{') ? raw : raw.split('\n').find((l) => l.startsWith('data:'))?.slice(5).trim();
  const error = json ? (JSON.parse(json) as { error?: { code: number; message: string } }).error : undefined;
  if (error) return { text: raw, error: error.code, errorMessage: error.message };
  return { text: raw, taskId: taskIdIn(raw) };
}

async function sendGrpc(surface: Surface, messageId: string, text: string, opts: { taskId?: string; contextId?: string; immediate?: boolean }): Promise<Answer> {
  const request = SendMessageRequest.fromJSON({ message: v1Message(messageId, text, opts), ...(opts.immediate && { configuration: { returnImmediately: true } }) });
  try {
    if (surface === 'grpc') {
      const r = (await grpcClient.sendMessage(request)) as Task | Message;
      const json = JSON.stringify(r);
      return { text: json, taskId: 'messageId' in r ? undefined : r.id };
    }
    const events: StreamResponse[] = [];
    for await (const ev of grpcClient.sendMessageStream(request) as AsyncIterable<StreamResponse>) events.push(ev);
    const json = JSON.stringify(events);
    const first = events[0]?.payload;
    return { text: json, taskId: first?.$case === 'task' ? first.value.id : first?.$case === 'statusUpdate' ? first.value.taskId : undefined };
  } catch (e) {
    if (!isGrpcError(e)) throw e;
    const err = e as GrpcA2AError;
    return { text: String(err.message), error: err.status, errorMessage: err.message };
  }
}

/** The conflict each surface answers with: InvalidParams (-32602), HTTP+JSON 400, gRPC INVALID_ARGUMENT. */
function expectConflict(surface: Surface, a: Answer, messageId: string): void {
  const expected = surface.startsWith('rest') ? 400 : surface.startsWith('grpc') ? grpc.status.INVALID_ARGUMENT : -32602;
  expect(a.error, `${surface}: ${a.text}`).toBe(expected);
  expect(a.errorMessage, surface).toContain(`messageId ${messageId} was already used`);
}

async function runsWith(messageId: string): Promise<Array<{ id: string }>> {
  return db.query(`SELECT id FROM runs WHERE agent_id = $1 AND origin_message_id = $2`, [agent.agentId, messageId]);
}

beforeAll(async () => {
  stack = await startStack({ env: { GRPC_PORT: '0', A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  db = stack.api.get(DatabaseService);
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'public',
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON', 'GRPC'],
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
  const card = (await (await fetch(agent.cardUrl)).json()) as AgentCard;
  grpcClient = await new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(card);
});

afterAll(async () => {
  await stack?.close();
});

describe('a messageId reused by another anonymous caller (issue #43 row 9)', () => {
  it.each(SURFACES)('%s: another text is a conflict and shows nothing of the first; the identical retry gets the same task', async (surface) => {
    // predictable, as clients make them
    const messageId = `anon-${surface}-1`;
    const alpha = `alpha ${randomUUID()}`;
    const bravo = `bravo ${randomUUID()}`;

    const first = await send(surface, messageId, alpha);
    expect(first.error, first.text).toBeUndefined();
    expect(first.taskId).toBeDefined();

    const second = await send(surface, messageId, bravo);
    expectConflict(surface, second, messageId);
    expect(second.text).not.toContain(alpha);
    expect(second.text).not.toContain(first.taskId!);

    const retry = await send(surface, messageId, alpha);
    expect(retry.error, retry.text).toBeUndefined();
    expect(retry.taskId).toBe(first.taskId);
    expect(await runsWith(messageId)).toEqual([{ id: first.taskId }]);
  });

  it('an identical retry on another surface or client gets the same task (as the fault suite retries, alternating bindings)', async () => {
    const url = `${stack.baseUrl}${agent.basePath}/`;
    const sdkRpc = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(url);
    const sdkRest = await new ClientFactory({ transports: [new RestTransportFactory()], preferredTransports: ['HTTP+JSON'] }).createFromUrl(url);
    const viaSdk = async (client: A2AClient, messageId: string, text: string) =>
      ((await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId, role: 'ROLE_USER', parts: [{ text }] }, configuration: { returnImmediately: true } }))) as Task).id;
    const pairs: Array<[string, (m: string, t: string) => Promise<string | undefined>]> = [
      ['sdk json-rpc', (m, t) => viaSdk(sdkRpc, m, t)],
      ['sdk http+json', (m, t) => viaSdk(sdkRest, m, t)],
      ...(['jsonrpc', 'v0.3', 'rest', 'grpc'] as const).map((surface) => [surface, async (m: string, t: string) => (await send(surface, m, t, { immediate: true })).taskId] as [string, (m: string, t: string) => Promise<string | undefined>]),
    ];
    for (const [firstName, first] of pairs) {
      const messageId = `anon-across-${randomUUID()}`;
      const taskId = await first(messageId, 'hold across');
      for (const [name, again] of pairs) expect(await again(messageId, 'hold across'), `${firstName} then ${name}`).toBe(taskId);
    }
  });

  it('the same message naming another contextId is a conflict; naming its own is the retry', async () => {
    const messageId = `anon-context-${randomUUID()}`;
    const first = await send('jsonrpc', messageId, 'hold on', { immediate: true });
    const contextId = /"contextId":"([^"]+)"/.exec(first.text)![1]!;
    expectConflict('jsonrpc', await send('jsonrpc', messageId, 'hold on', { contextId: randomUUID(), immediate: true }), messageId);
    expect((await send('jsonrpc', messageId, 'hold on', { contextId, immediate: true })).taskId).toBe(first.taskId);
    expect((await send('rest', messageId, 'hold on', { immediate: true })).taskId).toBe(first.taskId);
  });

  it('direct replies: an exchange and a task never stand in for one another between anonymous callers', async () => {
    // A's messageId answered directly (a Message), B's text under it would create a task
    const pinged = `anon-ping-${randomUUID()}`;
    const reply = await send('jsonrpc', pinged, 'ping alpha');
    expect(reply.text).toContain('pong to ping alpha');
    for (const text of ['hold bravo', 'ping bravo']) {
      const other = await send('jsonrpc', pinged, text, { immediate: true });
      expectConflict('jsonrpc', other, pinged);
      expect(other.text).not.toContain('alpha');
    }
    expect((await send('rest', pinged, 'ping alpha')).text).toContain('pong to ping alpha');
    // A's messageId created a task, B's text under it would be answered directly
    const tasked = `anon-task-${randomUUID()}`;
    const task = await send('jsonrpc', tasked, 'work alpha');
    const other = await send('jsonrpc', tasked, 'ping bravo');
    expectConflict('jsonrpc', other, tasked);
    expect(other.text).not.toContain(task.taskId!);
    expect(other.text).not.toContain('alpha');
  });
});

describe('follow-up messages and answers of anonymous callers', () => {
  it.each(['jsonrpc', 'v0.3', 'rest', 'grpc'] as const)('%s: a follow-up messageId reused with another text is a conflict; the retry adds nothing', async (surface) => {
    const task = await send(surface, `anon-origin-${randomUUID()}`, 'hold the task', { immediate: true });
    const taskId = task.taskId!;
    const followUp = `anon-follow-${surface}-1`;
    expect((await send(surface, followUp, 'hold more alpha', { taskId, immediate: true })).error).toBeUndefined();
    const other = await send(surface, followUp, 'hold more bravo', { taskId, immediate: true });
    expectConflict(surface, other, followUp);
    expect(other.text).not.toContain('more alpha');
    expect((await send(surface, followUp, 'hold more alpha', { taskId, immediate: true })).error).toBeUndefined();
    const rows = await db.query<{ text: string }>(`SELECT parts->0->>'text' AS text FROM messages WHERE run_id = $1 AND message_id = $2`, [taskId, followUp]);
    expect(rows).toEqual([{ text: 'hold more alpha' }]);
  });

  it('an answer to an interaction reused with another text is a conflict; the retry adds nothing', async () => {
    const task = await send('jsonrpc', `anon-book-${randomUUID()}`, 'book a table');
    expect(task.text).toContain('TASK_STATE_INPUT_REQUIRED');
    const answer = `anon-answer-${randomUUID()}`;
    expect((await send('jsonrpc', answer, 'monday', { taskId: task.taskId })).error).toBeUndefined();
    const other = await send('jsonrpc', answer, 'friday', { taskId: task.taskId });
    expectConflict('jsonrpc', other, answer);
    expect(other.text).not.toContain('monday');
    expect((await send('rest', answer, 'monday', { taskId: task.taskId })).error).toBeUndefined();
    const rows = await db.query<{ text: string }>(`SELECT parts->0->>'text' AS text FROM messages WHERE run_id = $1 AND message_id = $2`, [task.taskId, answer]);
    expect(rows).toEqual([{ text: 'monday' }]);
  });
});
