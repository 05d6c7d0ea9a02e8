import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Message, SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { A2AError as SdkA2AError, RequestMalformedError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import type { CanonicalMessage } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import type { AgentMessageInput, AgentRuntime, RuntimeContext } from '#libs/runtimes';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Direct replies (a runtime's Message answer, no task) go through a command and the event log:
 * recorded as a run of kind `reply` (one statement), idempotent on messageId, in the thread's
 * history, visible in the admin API, and streamed with the reply's sequence as its event id —
 * while A2A still answers a Message and never shows the exchange as a Task. Checked with the
 * official SDK client over JSON-RPC and HTTP+JSON.
 */

/**
 * `ping…` is answered directly; anything else runs and completes with the thread's history as the
 * runtime sees it (each message's text, ` | `-separated).
 */
class ThreadRuntime implements AgentRuntime<{ kind: 'thread-test' }> {
  readonly kind = 'thread-test';
  parseConfig(raw: unknown) {
    return z.strictObject({ kind: z.literal('thread-test') }).parse(raw);
  }
  directReply(_c: unknown, input: CanonicalMessage): AgentMessageInput | null {
    const text = textOf(input);
    return text.startsWith('ping') ? { parts: [{ text: `pong: ${text}` }] } : null;
  }
  async execute(_c: unknown, ctx: RuntimeContext): Promise<void> {
    const history = await ctx.history();
    await ctx.setStatus('completed', { parts: [{ text: history.map(textOf).join(' | ') }] });
  }
}

function textOf(m: { parts: Array<{ text?: string }> }): string {
  return m.parts.map((p) => p.text ?? '').join('');
}

let stack: Stack;
let agent: PublishedAgent;
let base: string;
const clients: Record<'JSON-RPC' | 'HTTP+JSON', A2AClient> = {} as never;

beforeAll(async () => {
  // background loops far apart, so the statement count of one request is the request's own
  const quiet = { RUN_SWEEP_INTERVAL_MS: '3600000', OUTBOX_RELAY_INTERVAL_MS: '60000', PUSH_SWEEP_INTERVAL_MS: '3600000', AGENT_CACHE_TTL_MS: '60000' };
  stack = await startStack({ runtimes: [new ThreadRuntime()], env: quiet });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: `replies-${randomUUID().slice(0, 6)}`,
    runtime: { kind: 'thread-test' },
    a2a: { capabilities: { streaming: true } } as never,
    transports: ['JSONRPC', 'HTTP+JSON'],
  });
  base = `${stack.baseUrl}${agent.basePath}`;
  clients['JSON-RPC'] = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${base}/`);
  clients['HTTP+JSON'] = await new ClientFactory({ transports: [new RestTransportFactory()] }).createFromUrl(`${base}/`);
});
afterAll(async () => stack?.close());

const send = (text: string, extra: { messageId?: string; contextId?: string; taskId?: string; metadata?: Record<string, unknown> } = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: extra.messageId ?? randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra } });

async function rejection(p: Promise<unknown>): Promise<SdkA2AError & { envelopeCode?: number }> {
  try {
    await p;
  } catch (e) {
    return e as SdkA2AError;
  }
  throw new Error('expected a rejection');
}

const admin = <T = any>(method: string, path: string) => adminRequest<T>(stack.baseUrl, stack.adminKey, method, path);

/** The reply run a caller's messageId recorded, through the admin API (list by thread and kind, then get). */
async function replyRunOf(contextId: string, messageId: string) {
  const list = await admin(`GET`, `/v1/runs?agentId=${agent.agentId}&contextId=${encodeURIComponent(contextId)}&kind=reply`);
  expect(list.status).toBe(200);
  const ids: string[] = [];
  for (const r of list.body.runs) {
    const detail = await admin('GET', `/v1/runs/${r.id}`);
    if (detail.body.history[0]?.messageId === messageId) ids.push(r.id);
  }
  expect(ids).toHaveLength(1);
  return (await admin('GET', `/v1/runs/${ids[0]}`)).body;
}

describe.each(['JSON-RPC', 'HTTP+JSON'] as const)('direct replies over %s with the official SDK client', (binding) => {
  it('the same messageId twice → the same Message and contextId, one record; other content or another contextId → InvalidParams', async () => {
    const client = clients[binding];
    const messageId = randomUUID();
    const first = (await client.sendMessage(send('ping once', { messageId }))) as Message;
    expect('messageId' in first).toBe(true);
    expect(textOf({ parts: first.parts.map((p) => ({ text: p.content?.$case === 'text' ? String(p.content.value) : '' })) })).toBe('pong: ping once');
    expect(first.contextId).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.taskId).toBe('');

    const again = (await client.sendMessage(send('ping once', { messageId }))) as Message;
    expect(Message.toJSON(again)).toEqual(Message.toJSON(first));
    // naming the thread it got is the same request too
    const named = (await client.sendMessage(send('ping once', { messageId, contextId: first.contextId }))) as Message;
    expect(named.messageId).toBe(first.messageId);

    const db = stack.api.get(DatabaseService);
    const rows = await db.query<{ kind: string; status: string; last_sequence: number }>(
      'SELECT kind, status, last_sequence FROM runs WHERE agent_id = $1 AND origin_message_id = $2',
      [agent.agentId, messageId],
    );
    expect(rows).toEqual([{ kind: 'reply', status: 'completed', last_sequence: 3 }]);

    const changed = await rejection(client.sendMessage(send('ping twice', { messageId })));
    expect(changed).toBeInstanceOf(RequestMalformedError);
    const moved = await rejection(client.sendMessage(send('ping once', { messageId, contextId: `elsewhere-${randomUUID()}` })));
    expect(moved).toBeInstanceOf(RequestMalformedError);
    if (binding === 'JSON-RPC') expect(changed.envelopeCode).toBe(-32602);
    // still one record, unchanged
    expect(await db.query('SELECT kind, status, last_sequence FROM runs WHERE agent_id = $1 AND origin_message_id = $2', [agent.agentId, messageId])).toEqual(rows);
  });

  it('the admin API shows the exchange with its kind; A2A shows no task for it', async () => {
    const client = clients[binding];
    const contextId = `ctx-${randomUUID()}`;
    const messageId = randomUUID();
    const reply = (await client.sendMessage(send('ping admin', { messageId, contextId }))) as Message;
    expect(reply.contextId).toBe(contextId);

    const detail = await replyRunOf(contextId, messageId);
    expect(detail.run).toMatchObject({ kind: 'reply', status: 'completed', contextId, agentId: agent.agentId, lastSequence: 3 });
    expect(detail.history.map((m: CanonicalMessage) => [m.role, m.messageId, textOf(m)])).toEqual([
      ['user', messageId, 'ping admin'],
      ['agent', reply.messageId, 'pong: ping admin'],
    ]);
    expect(detail.statusMessage).toMatchObject({ messageId: reply.messageId });
    const events = await admin('GET', `/v1/runs/${detail.run.id}/events`);
    expect(events.body.events.map((e: { sequence: number; event: { type: string } }) => [e.sequence, e.event.type])).toEqual([
      [1, 'run.created'],
      [2, 'message.added'],
      [3, 'run.status_changed'],
    ]);
    expect(events.body.events[0].event.payload).toMatchObject({ kind: 'reply' });
    // the runs list (no kind filter) shows it with its kind
    const all = await admin('GET', `/v1/runs?contextId=${encodeURIComponent(contextId)}`);
    expect(all.body.runs.map((r: { id: string; kind: string }) => [r.id, r.kind])).toEqual([[detail.run.id, 'reply']]);

    // A2A: not a task — GetTask, CancelTask, a message on it, ListTasks, SubscribeToTask
    const runId: string = detail.run.id;
    expect(await rejection(client.getTask({ tenant: '', id: runId, historyLength: undefined }))).toBeInstanceOf(TaskNotFoundError);
    expect(await rejection(client.cancelTask({ tenant: '', id: runId, metadata: undefined }))).toBeInstanceOf(TaskNotFoundError);
    expect(await rejection(client.sendMessage(send('more', { taskId: runId })))).toBeInstanceOf(TaskNotFoundError);
    const listed = await client.listTasks({ tenant: '', contextId, status: 0, pageSize: 50, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
    expect(listed.tasks).toEqual([]);
    expect(listed.totalSize).toBe(0);
  });
});

describe('the thread and the stream', () => {
  it("a following task in the same contextId sees the exchange in the thread's history", async () => {
    const contextId = `ctx-${randomUUID()}`;
    const client = clients['JSON-RPC'];
    await client.sendMessage(send('ping first', { contextId }));
    const task = (await client.sendMessage(send('then a task', { contextId }))) as Task;
    expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_COMPLETED');
    const seen = task.status!.message!.parts.map((p) => String(p.content?.value)).join('');
    expect(seen).toBe('ping first | pong: ping first | then a task');
    // ListTasks of the thread: the task only
    const listed = await clients['HTTP+JSON'].listTasks({ tenant: '', contextId, status: 0, pageSize: 50, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
    expect(listed.tasks.map((t) => t.id)).toEqual([task.id]);
  });

  it('a streamed reply is one Message whose SSE id: is its sequence in the log (JSON-RPC and HTTP+JSON); a retry streams the same', async () => {
    const messageId = randomUUID();
    const contextId = `ctx-${randomUUID()}`;
    const message = { messageId, contextId, role: 'ROLE_USER', parts: [{ text: 'ping stream' }] };
    const rpc = await readSse(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message } }),
    });
    const rest = await readSse(`${base}/message:stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ message }),
    });
    expect(rpc.frames).toHaveLength(1);
    expect(rest.frames).toHaveLength(1);
    const fromRpc = JSON.parse(rpc.frames[0]!.data).result.message;
    const fromRest = JSON.parse(rest.frames[0]!.data).message;
    expect(fromRpc).toMatchObject({ role: 'ROLE_AGENT', contextId, parts: [{ text: 'pong: ping stream' }] });
    expect(fromRest).toEqual(fromRpc);

    // the id is the sequence of the log entry carrying that very message
    const detail = await replyRunOf(contextId, messageId);
    const events = (await admin('GET', `/v1/runs/${detail.run.id}/events`)).body.events as Array<{ sequence: number; event: { payload: { message?: { messageId: string } } } }>;
    const carrying = events.find((e) => e.event.payload.message?.messageId === fromRpc.messageId)!;
    expect(rpc.frames[0]!.id).toBe(String(carrying.sequence));
    expect(rest.frames[0]!.id).toBe(String(carrying.sequence));

    // the SDK client streams the same single Message
    const items = [];
    for await (const ev of clients['JSON-RPC'].sendMessageStream(send('ping stream', { messageId, contextId }))) items.push(ev.payload!);
    expect(items.map((p) => p.$case)).toEqual(['message']);
    expect((items[0]!.value as Message).messageId).toBe(fromRpc.messageId);
  });

  it('a direct reply costs one statement: the group-committed creation', async () => {
    const client = clients['JSON-RPC'];
    await client.sendMessage(send('ping warm')); // the agent is resolved and cached
    const pool = stack.api.get(DatabaseService).pool;
    const seen: string[] = [];
    const original = pool.query.bind(pool);
    pool.query = ((config: unknown, ...rest: unknown[]) => {
      seen.push(typeof config === 'object' && config !== null && 'name' in config ? String((config as { name?: string }).name) : String(config).slice(0, 40));
      return (original as (...a: unknown[]) => unknown)(config, ...rest);
    }) as typeof pool.query;
    try {
      const reply = (await client.sendMessage(send('ping counted'))) as Message;
      expect(reply.messageId).toEqual(expect.any(String));
    } finally {
      pool.query = original;
    }
    // the organization's storage reading is per process every STORAGE_USAGE_TTL_MS (2 s), not per request
    expect(seen.filter((n) => n !== 'runs.org_storage')).toEqual(['runs.create_batch']);
  });
});
