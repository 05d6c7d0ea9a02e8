import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Message, Role, SendMessageRequest, Task, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { Client, ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { A2AError as SdkA2AError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError, RequestMalformedError } from '@a2a-js/sdk/errors';
import { missingRequiredCardFields, type AgentCard } from '#libs/a2a';
import { DatabaseService } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * A2A v1.0 over JSON-RPC, driven by the official `@a2a-js/sdk` client as the outside peer, against
 * the real API + worker (Postgres, Redis). The agent is the scripted runtime: echo by default,
 * `hold…` holds until canceled, `ping…` answers with a Message only, `book…` asks for input.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong: {{input}}' }] },
    { name: 'ask', match: { text: '^book' }, steps: [{ type: 'status', status: 'input-required', message: 'Which day?' }] },
    {
      name: 'report',
      match: { text: '^report' },
      steps: [
        { type: 'status', status: 'working', message: 'starting' },
        { type: 'artifact', artifactId: 'r', name: 'report.txt', description: 'the report', content: { text: 'chunked report text' }, chunks: 3 },
        { type: 'message', text: 'halfway', metadata: { step: 2, nested: { b: [1, 2.5, null], a: 'x' } } },
        { type: 'artifact', name: 'data', content: { data: { z: 1, a: [true, { k: 'v' }] } } },
        { type: 'status', status: 'completed', message: 'done' },
      ],
    },
  ],
};

let stack: Stack;
let db: DatabaseService;
let echo: PublishedAgent;
let client: A2AClient;

type SendResult = Awaited<ReturnType<A2AClient['sendMessage']>>;

function send(text: string, opts: { returnImmediately?: boolean; historyLength?: number; messageId?: string; taskId?: string; contextId?: string } = {}) {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: opts.messageId ?? randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text, mediaType: 'text/plain' }],
      ...(opts.taskId ? { taskId: opts.taskId } : {}),
      ...(opts.contextId ? { contextId: opts.contextId } : {}),
    },
    configuration: {
      ...(opts.returnImmediately ? { returnImmediately: true } : {}),
      ...(opts.historyLength !== undefined ? { historyLength: opts.historyLength } : {}),
    },
  });
}

function asTask(r: SendResult): Task {
  expect('messageId' in r, 'expected a Task, got a Message').toBe(false);
  return r as Task;
}

const state = (t: Task) => taskStateToJSON(t.status!.state);
const texts = (msgs: Array<{ parts: Array<{ content?: { $case: string; value: unknown } }> }>) =>
  msgs.map((m) => m.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''));

async function rejection(p: Promise<unknown>): Promise<SdkA2AError & { envelopeCode?: number }> {
  try {
    await p;
  } catch (e) {
    return e as SdkA2AError & { envelopeCode?: number };
  }
  throw new Error('expected the call to fail');
}

async function waitForState(c: A2AClient, id: string, want: string): Promise<Task> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const t = await c.getTask({ tenant: '', id, historyLength: undefined });
    if (state(t) === want) return t;
    if (Date.now() > deadline) throw new Error(`task ${id} is ${state(t)}, wanted ${want}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  db = stack.api.get(DatabaseService);
  echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo', runtime: RUNTIME, a2a: { identityProjection: { name: 'Echo Agent', version: '1.2.0' } } });
  // createFromUrl resolves `.well-known/agent-card.json` relative to the base: keep the trailing slash
  client = await new ClientFactory().createFromUrl(`${stack.baseUrl}${echo.basePath}/`);
});

afterAll(async () => {
  await stack?.close();
});

describe('A2A v1.0 with the official SDK client', () => {
  it('resolves the Agent Card with ClientFactory.createFromUrl and picks the v1.0 JSON-RPC interface', async () => {
    expect(client.transport.protocolName).toBe('JSONRPC');
    expect(client.protocolVersion).toBe('1.0');
    const card = await client.getAgentCard();
    expect(card.name).toBe('Echo Agent');
    expect(card.version).toBe('1.2.0');
    expect(card.description).toBe('Test agent echo');
    expect(card.supportedInterfaces.map((i) => [i.url, i.protocolBinding, i.protocolVersion])).toEqual([
      [`${stack.baseUrl}${echo.basePath}`, 'JSONRPC', '1.0'],
      [`${stack.baseUrl}${echo.basePath}`, 'JSONRPC', '0.3'],
    ]);
    expect(card.capabilities).toMatchObject({ streaming: false, pushNotifications: false, extendedAgentCard: false });
    expect(card.skills.map((s) => s.id)).toEqual(['echo']);
    expect(card.defaultInputModes).toEqual(['text/plain']);

    const raw = (await (await fetch(echo.cardUrl)).json()) as AgentCard;
    expect(missingRequiredCardFields(raw)).toEqual([]);
  });

  it('SendMessage (blocking) returns the completed task with the echo in its history', async () => {
    const task = asTask(await client.sendMessage(send('hello there')));
    expect(state(task)).toBe('TASK_STATE_COMPLETED');
    expect(task.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(task.contextId).not.toBe('');
    expect(task.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);
    expect(texts(task.history)).toEqual(['hello there', 'hello there']);
    for (const m of task.history) {
      expect(m.taskId).toBe(task.id);
      expect(m.contextId).toBe(task.contextId);
    }
    expect(task.status!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('the blocking answer is the task GetTask reads (status message, chunked artifacts, metadata), at every historyLength', async () => {
    const metrics = stack.api.get(Metrics);
    const folded = async () => (await metrics.blockingAnswers.get()).values.find((v) => v.labels.source === 'log')?.value ?? 0;
    const before = await folded();
    for (const historyLength of [undefined, 0, 1, 3]) {
      const task = asTask(await client.sendMessage(send('report please', { historyLength })));
      expect(state(task)).toBe('TASK_STATE_COMPLETED');
      expect(task.artifacts.map((a) => a.name)).toEqual(['report.txt', 'data']);
      expect(texts([{ parts: task.artifacts[0]!.parts }])).toEqual(['chunked report text']);
      expect(task.history.length).toBe(historyLength ?? 4);
      expect(await client.getTask({ tenant: '', id: task.id, historyLength })).toEqual(task);
    }
    // the answers were folded from the log's envelopes the wake-ups carried, not read back
    expect(await folded()).toBe(before + 4);
  });

  it('GetTask applies historyLength: 0 (none), 1 (the newest), unset (all)', async () => {
    const { id } = asTask(await client.sendMessage(send('count me')));
    const none = await client.getTask({ tenant: '', id, historyLength: 0 });
    expect(none.history).toEqual([]);
    expect(state(none)).toBe('TASK_STATE_COMPLETED');
    const one = await client.getTask({ tenant: '', id, historyLength: 1 });
    expect(one.history.map((m) => m.role)).toEqual([Role.ROLE_AGENT]);
    const all = await client.getTask({ tenant: '', id, historyLength: undefined });
    expect(texts(all.history)).toEqual(['count me', 'count me']);
    // also on SendMessage itself
    const zero = asTask(await client.sendMessage(send('quiet', { historyLength: 0 })));
    expect(zero.history).toEqual([]);
  });

  it('returnImmediately returns the submitted task at once; the worker then completes it', async () => {
    const task = asTask(await client.sendMessage(send('later', { returnImmediately: true })));
    expect(state(task)).toBe('TASK_STATE_SUBMITTED');
    expect(texts(task.history)).toEqual(['later']);
    const done = await waitForState(client, task.id, 'TASK_STATE_COMPLETED');
    expect(texts(done.history)).toEqual(['later', 'later']);
  });

  it('CancelTask cancels a held task; a second cancel gets TaskNotCancelable (-32002)', async () => {
    const held = asTask(await client.sendMessage(send('hold on', { returnImmediately: true })));
    await waitForState(client, held.id, 'TASK_STATE_WORKING');
    const canceled = await client.cancelTask({ tenant: '', id: held.id, metadata: undefined });
    expect(canceled.id).toBe(held.id);
    expect(state(canceled)).toBe('TASK_STATE_CANCELED');
    expect(state(await client.getTask({ tenant: '', id: held.id, historyLength: undefined }))).toBe('TASK_STATE_CANCELED');

    const again = await rejection(client.cancelTask({ tenant: '', id: held.id, metadata: undefined }));
    expect(again).toBeInstanceOf(TaskNotCancelableError);
    expect(again.envelopeCode).toBe(-32002);
    expect(again.reason).toBe('TASK_NOT_CANCELABLE');
  });

  it('a reply-only rule answers with a Message and creates no task (the exchange is a reply run, no Task)', async () => {
    const messageId = randomUUID();
    const r = await client.sendMessage(send('ping me', { messageId, contextId: 'ctx-ping' }));
    expect('messageId' in r).toBe(true);
    const m = r as Message;
    expect(m.role).toBe(Role.ROLE_AGENT);
    expect(texts([m])).toEqual(['pong: ping me']);
    expect(m.contextId).toBe('ctx-ping');
    expect(m.taskId).toBe('');
    // recorded as one run of kind reply (its log: created, the message, completed with the reply),
    // which A2A does not present as a task
    const runs = await db.query<{ id: string; kind: string; status: string }>('SELECT id, kind, status FROM runs WHERE origin_message_id = $1', [messageId]);
    expect(runs.map((r) => [r.kind, r.status])).toEqual([['reply', 'completed']]);
    const msgs = await db.query<{ n: string }>('SELECT count(*) AS n FROM messages WHERE message_id = $1', [messageId]);
    expect(Number(msgs[0]!.n)).toBe(1);
    expect(await rejection(client.getTask({ tenant: '', id: runs[0]!.id, historyLength: undefined }))).toBeInstanceOf(TaskNotFoundError);
    // a reply without a contextId still gets one (§3.4.1: the server generates it)
    const fresh = (await client.sendMessage(send('ping again'))) as Message;
    expect(fresh.contextId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a message to a terminal task fails with UnsupportedOperation (-32004)', async () => {
    const done = asTask(await client.sendMessage(send('finish')));
    expect(state(done)).toBe('TASK_STATE_COMPLETED');
    const err = await rejection(client.sendMessage(send('more', { taskId: done.id })));
    expect(err).toBeInstanceOf(UnsupportedOperationError);
    expect(err.envelopeCode).toBe(-32004);
  });

  it('multi-turn: input-required, then the answer on the same task completes it; a wrong contextId is refused', async () => {
    const asked = asTask(await client.sendMessage(send('book a room')));
    expect(state(asked)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(texts([asked.status!.message!])).toEqual(['Which day?']);
    expect(asked.status!.message!.taskId).toBe(asked.id);

    const mismatch = await rejection(client.sendMessage(send('monday', { taskId: asked.id, contextId: 'another-context' })));
    expect(mismatch).toBeInstanceOf(RequestMalformedError);
    expect(mismatch.envelopeCode).toBe(-32602);

    const answered = asTask(await client.sendMessage(send('monday', { taskId: asked.id, contextId: asked.contextId })));
    expect(answered.id).toBe(asked.id);
    expect(state(answered)).toBe('TASK_STATE_COMPLETED');
    expect(texts(answered.history)).toEqual(['book a room', 'Which day?', 'monday', 'monday']);
  });

  it('a retried SendMessage (same messageId) creates exactly one task', async () => {
    const messageId = randomUUID();
    const results = await Promise.all([1, 2, 3].map(() => client.sendMessage(send('once', { messageId, returnImmediately: true }))));
    const ids = new Set(results.map((r) => asTask(r).id));
    expect(ids.size).toBe(1);
    const again = asTask(await client.sendMessage(send('once', { messageId })));
    expect(ids.has(again.id)).toBe(true);
    expect(state(again)).toBe('TASK_STATE_COMPLETED');
    const runs = await db.query<{ n: string }>('SELECT count(*) AS n FROM runs WHERE origin_message_id = $1', [messageId]);
    expect(Number(runs[0]!.n)).toBe(1);
  });

  it('an unknown task is TaskNotFound (-32001), whatever the id looks like', async () => {
    for (const id of [randomUUID(), 'not-a-uuid']) {
      const err = await rejection(client.getTask({ tenant: '', id, historyLength: undefined }));
      expect(err).toBeInstanceOf(TaskNotFoundError);
      expect(err.envelopeCode).toBe(-32001);
      expect(err.reason).toBe('TASK_NOT_FOUND');
      expect(await rejection(client.cancelTask({ tenant: '', id, metadata: undefined }))).toBeInstanceOf(TaskNotFoundError);
    }
  });

  it("another organization's task (and another agent's) is TaskNotFound", async () => {
    const org = await adminRequest<{ adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', {
      slug: `other-${randomUUID().slice(0, 8)}`,
      name: 'Other',
    });
    expect(org.status).toBe(201);
    const theirs = await publishAgent(stack.baseUrl, org.body.adminKey.key, { slug: 'echo', runtime: RUNTIME });
    const theirClient = await new ClientFactory().createFromUrl(`${stack.baseUrl}${theirs.basePath}/`);
    const theirTask = asTask(await theirClient.sendMessage(send('mine')));

    expect(await rejection(client.getTask({ tenant: '', id: theirTask.id, historyLength: undefined }))).toBeInstanceOf(TaskNotFoundError);
    expect(await rejection(client.cancelTask({ tenant: '', id: theirTask.id, metadata: undefined }))).toBeInstanceOf(TaskNotFoundError);
    expect(await rejection(client.sendMessage(send('hijack', { taskId: theirTask.id })))).toBeInstanceOf(TaskNotFoundError);

    // same organization, other agent
    const sibling = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `sibling-${randomUUID().slice(0, 6)}` });
    const siblingClient = await new ClientFactory().createFromUrl(`${stack.baseUrl}${sibling.basePath}/`);
    const ours = asTask(await client.sendMessage(send('ours', { returnImmediately: true })));
    expect(await rejection(siblingClient.getTask({ tenant: '', id: ours.id, historyLength: undefined }))).toBeInstanceOf(TaskNotFoundError);
  });
});

describe('A2A v0.3 with the SDK compat client (LegacyJsonRpcTransport)', () => {
  it('sends message/send and tasks/get in v0.3 and gets the completed task back', async () => {
    const card = await client.getAgentCard();
    const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: `${stack.baseUrl}${echo.basePath}` }), card);
    expect(legacy.protocolVersion).toBe('0.3');
    const task = asTask(await legacy.sendMessage(send('old hello')));
    expect(task.status!.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(texts(task.history)).toEqual(['old hello', 'old hello']);
    const got = await legacy.getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(got.id).toBe(task.id);
    expect(texts(got.history)).toEqual(['old hello']);
    const reply = await legacy.sendMessage(send('ping old'));
    expect(texts([reply as Message])).toEqual(['pong: ping old']);
    const missing = await rejection(legacy.getTask({ tenant: '', id: randomUUID(), historyLength: undefined }));
    expect(missing).toBeInstanceOf(TaskNotFoundError);
  });
});
