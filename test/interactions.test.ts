import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * InteractionRequests and RunLink delegation end to end, with the official `@a2a-js/sdk` client
 * on both bindings (JSON-RPC and HTTP+JSON) as the caller, the admin API as the operator, and
 * scripted agents (no code) doing the asking and the delegating.
 */
const CONCIERGE = {
  kind: 'scripted',
  rules: [
    { name: 'book', match: { text: '^book' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'Booked for {{input}}' }] },
    { name: 'login', match: { text: '^login' }, steps: [{ type: 'interaction', kind: 'auth', text: 'Sign in, then tell me' }, { type: 'message', text: 'Signed in' }] },
    {
      name: 'deploy',
      match: { text: '^deploy' },
      steps: [
        {
          type: 'interaction',
          kind: 'confirmation',
          title: 'Deploy to production?',
          options: [
            { id: 'approve', label: 'Ship it', kind: 'approve' },
            { id: 'reject', label: 'Not now', kind: 'reject' },
          ],
          branches: {
            approve: [{ type: 'message', text: 'Deploying' }, { type: 'status', status: 'completed', message: 'Deployed' }],
            reject: [{ type: 'status', status: 'rejected', message: 'Deployment called off' }],
          },
        },
      ],
    },
    {
      name: 'survey',
      match: { text: '^survey' },
      steps: [
        { type: 'interaction', kind: 'input', text: 'Optional: rate us 1-5', blocking: false },
        { type: 'interaction', kind: 'input', text: 'What is your name?' },
        { type: 'message', text: 'Thanks {{input}}' },
      ],
    },
    {
      name: 'quick',
      match: { text: '^quick' },
      steps: [
        { type: 'interaction', kind: 'input', text: 'Answer within a moment', expiresInMs: 300, onExpire: 'continue', branches: { expired: [{ type: 'message', text: 'No answer: using the default' }] } },
      ],
    },
    { name: 'strict', match: { text: '^strict' }, steps: [{ type: 'interaction', kind: 'confirmation', text: 'Confirm quickly', expiresInMs: 300 }] },
    {
      name: 'research',
      match: { text: '^research' },
      steps: [
        { type: 'status', status: 'working', message: 'Asking the helper' },
        { type: 'delegate', agent: 'helper', text: 'summarize {{input}}' },
        { type: 'message', text: 'Result: {{result}}' },
      ],
    },
    { name: 'long', match: { text: '^long' }, steps: [{ type: 'delegate', agent: 'helper', text: 'hold on', kind: 'subtask' }] },
    { name: 'broken', match: { text: '^broken' }, steps: [{ type: 'delegate', agent: 'helper', text: 'fail now' }] },
    { name: 'nowhere', match: { text: '^nowhere' }, steps: [{ type: 'delegate', agent: 'nobody-here', text: 'x' }] },
  ],
};

const HELPER = {
  kind: 'scripted',
  rules: [
    {
      name: 'summarize',
      match: { text: '^summarize' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'wait', ms: 150 },
        { type: 'artifact', artifactId: 'summary', name: 'summary.txt', content: { text: 'summary of: {{input}}' } },
        { type: 'status', status: 'completed', message: 'short and sweet' },
      ],
    },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'fail', match: { text: '^fail' }, steps: [{ type: 'status', status: 'failed', message: 'cannot' }] },
  ],
};

const STREAMING = { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } };

let stack: Stack;
let concierge: PublishedAgent;
let helper: PublishedAgent;
const clients: Record<'JSONRPC' | 'HTTP+JSON', A2AClient> = {} as never;

function send(text: string, opts: { taskId?: string; contextId?: string; messageId?: string; metadata?: Record<string, unknown> } = {}) {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: opts.messageId ?? randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text }],
      ...(opts.taskId ? { taskId: opts.taskId } : {}),
      ...(opts.contextId ? { contextId: opts.contextId } : {}),
      ...(opts.metadata ? { metadata: opts.metadata } : {}),
    },
  });
}

const state = (t: Task) => taskStateToJSON(t.status!.state);
const text = (m: { parts: Array<{ content?: { $case: string; value: unknown } }> } | undefined) =>
  (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

async function task(c: A2AClient, req: SendMessageRequest): Promise<Task> {
  const r = await c.sendMessage(req);
  expect('messageId' in r, 'expected a Task').toBe(false);
  return r as Task;
}

async function waitFor(c: A2AClient, id: string, want: string): Promise<Task> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const t = await c.getTask({ tenant: '', id, historyLength: undefined });
    if (state(t) === want) return t;
    if (Date.now() > deadline) throw new Error(`task ${id} is ${state(t)}, wanted ${want}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const rpcRaw = async (method: string, params: unknown): Promise<any> =>
  (await fetch(`${stack.baseUrl}${concierge.basePath}`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json();
const admin = <T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>) => adminRequest<T>(stack.baseUrl, stack.adminKey, method, path, body, headers);
const eventTypes = async (runId: string) => ((await admin('GET', `/v1/runs/${runId}/events?limit=1000`)).body.events as Array<{ event: { type: string } }>).map((e) => e.event.type);

/** The interaction a task's status message names (`metadata.interaction`). */
function promptOf(t: Task): { id: string; kind: string; blocking: boolean; options?: Array<{ id: string; kind: string }> } {
  const meta = t.status!.message!.metadata as { interaction?: unknown } | undefined;
  expect(meta?.interaction, 'the status message names its interaction').toBeDefined();
  return meta!.interaction as never;
}

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000', RUN_SWEEP_INTERVAL_MS: '150', STREAM_POLL_INTERVAL_MS: '250' } });
  helper = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'helper', runtime: HELPER });
  concierge = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'concierge', runtime: CONCIERGE, transports: ['JSONRPC', 'HTTP+JSON'], a2a: STREAMING });
  const url = `${stack.baseUrl}${concierge.basePath}/`;
  clients.JSONRPC = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(url);
  clients['HTTP+JSON'] = await new ClientFactory({ transports: [new RestTransportFactory()] }).createFromUrl(url);
});

afterAll(async () => {
  await stack?.close();
});

describe.each(['JSONRPC', 'HTTP+JSON'] as const)('interactions over %s with the SDK client', (binding) => {
  const c = () => clients[binding];

  it('input-required → answer → completed, with the answer used', async () => {
    const asked = await task(c(), send('book a table'));
    expect(state(asked)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(text(asked.status!.message)).toBe('Which day?');
    expect(promptOf(asked)).toMatchObject({ kind: 'input', blocking: true });
    const done = await task(c(), send('Friday', { taskId: asked.id, contextId: asked.contextId }));
    expect(state(done)).toBe('TASK_STATE_COMPLETED');
    expect(text(done.history.at(-1))).toBe('Booked for Friday');
  });

  it('auth-required → answer → completed', async () => {
    const asked = await task(c(), send('login please'));
    expect(state(asked)).toBe('TASK_STATE_AUTH_REQUIRED');
    expect(promptOf(asked)).toMatchObject({ kind: 'auth' });
    const done = await task(c(), send('done, signed in', { taskId: asked.id }));
    expect(state(done)).toBe('TASK_STATE_COMPLETED');
    expect(text(done.history.at(-1))).toBe('Signed in');
  });

  it('a confirmation takes the approve branch, and the reject branch, by option id or label', async () => {
    const first = await task(c(), send('deploy v2'));
    expect(state(first)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(promptOf(first).options!.map((o) => [o.id, o.kind])).toEqual([['approve', 'approve'], ['reject', 'reject']]);
    const approved = await task(c(), send('ship it', { taskId: first.id }));
    expect(state(approved)).toBe('TASK_STATE_COMPLETED');
    expect(text(approved.status!.message)).toBe('Deployed');

    const second = await task(c(), send('deploy v3'));
    const rejected = await task(c(), send('', { taskId: second.id, metadata: { optionId: 'reject' } }));
    expect(state(rejected)).toBe('TASK_STATE_REJECTED');
    expect(text(rejected.status!.message)).toBe('Deployment called off');
    const [interaction] = (await admin('GET', `/v1/runs/${second.id}`)).body.interactions;
    expect(interaction).toMatchObject({ kind: 'confirmation', status: 'rejected', response: { decision: 'rejected', optionId: 'reject' } });
  });

  it('an answer that chooses no option is InvalidParams and changes nothing', async () => {
    const asked = await task(c(), send('deploy v4'));
    const before = await eventTypes(asked.id);
    await expect(c().sendMessage(send('maybe later?', { taskId: asked.id }))).rejects.toThrow(/choose one of the options: approve, reject/);
    expect(await eventTypes(asked.id)).toEqual(before);
    expect(state(await c().getTask({ tenant: '', id: asked.id, historyLength: undefined }))).toBe('TASK_STATE_INPUT_REQUIRED');
    // naming an interaction the task does not have, or naming it with something else than a string
    await expect(c().sendMessage(send('approve', { taskId: asked.id, metadata: { interactionId: randomUUID() } }))).rejects.toThrow(/has no interaction/);
    await expect(c().sendMessage(send('approve', { taskId: asked.id, metadata: { interactionId: 42 } }))).rejects.toThrow(/metadata.interactionId must be a string/);
    expect(await eventTypes(asked.id)).toEqual(before);
  });

  it('a duplicate answer (same messageId) has one effect; answering a terminal task is UnsupportedOperation', async () => {
    const asked = await task(c(), send('book again'));
    const answer = send('Monday', { taskId: asked.id, messageId: randomUUID() });
    const [a, b] = await Promise.all([task(c(), answer), task(c(), answer)]);
    expect(a.id).toBe(b.id);
    const done = await waitFor(c(), asked.id, 'TASK_STATE_COMPLETED');
    expect(done.history.filter((m) => text(m) === 'Monday')).toHaveLength(1);
    const types = await eventTypes(asked.id);
    expect(types.filter((t) => t === 'interaction.responded')).toHaveLength(1);
    expect(types.filter((t) => t === 'run.status_changed' && true)).toHaveLength(1);
    // the same answer again is a replay, a new one is refused as the spec says
    expect((await task(c(), answer)).id).toBe(asked.id);
    await expect(c().sendMessage(send('Tuesday', { taskId: asked.id }))).rejects.toBeInstanceOf(UnsupportedOperationError);
  });
});

describe('two open interactions, one blocking; expiry', () => {
  it('answering the non-blocking one leaves the task input-required; answering the blocking one resumes it', async () => {
    const c = clients.JSONRPC;
    const asked = await task(c, send('survey'));
    expect(state(asked)).toBe('TASK_STATE_INPUT_REQUIRED');
    const detail = (await admin('GET', `/v1/runs/${asked.id}`)).body;
    const [rating, name] = detail.interactions as Array<{ id: string; blocking: boolean; status: string }>;
    expect([rating!.blocking, name!.blocking, rating!.status, name!.status]).toEqual([false, true, 'open', 'open']);
    expect(detail.run.openInteractionId).toBe(name!.id);

    const rated = await task(c, send('5', { taskId: asked.id, metadata: { interactionId: rating!.id } }));
    expect(state(rated)).toBe('TASK_STATE_INPUT_REQUIRED');
    const after = (await admin('GET', `/v1/runs/${asked.id}`)).body.interactions as Array<{ status: string; response: any }>;
    expect(after.map((i) => i.status)).toEqual(['resolved', 'open']);
    expect(after[0]!.response.message.parts).toEqual([{ text: '5' }]);

    const done = await task(c, send('Ada', { taskId: asked.id }));
    expect(state(done)).toBe('TASK_STATE_COMPLETED');
    expect(text(done.history.at(-1))).toBe('Thanks Ada');
  });

  it('an interaction that expires continues (onExpire continue) or fails the run (the default), each with its event', async () => {
    const c = clients['HTTP+JSON'];
    const quick = await task(c, send('quick one'));
    expect(state(quick)).toBe('TASK_STATE_INPUT_REQUIRED');
    const continued = await waitFor(c, quick.id, 'TASK_STATE_COMPLETED');
    expect(text(continued.history.at(-1))).toBe('No answer: using the default');
    expect(await eventTypes(quick.id)).toContain('interaction.expired');

    const strict = await task(c, send('strict one'));
    const failed = await waitFor(c, strict.id, 'TASK_STATE_FAILED');
    expect(text(failed.status!.message)).toMatch(/nobody answered in time/);
    const types = await eventTypes(strict.id);
    expect(types.slice(-2)).toEqual(['interaction.expired', 'run.status_changed']);
    const [ir] = (await admin('GET', `/v1/runs/${strict.id}`)).body.interactions;
    expect(ir).toMatchObject({ status: 'expired', response: { type: 'interaction.expired', outcome: 'fail' } });
    // too late: the task is terminal
    await expect(c.sendMessage(send('approve', { taskId: strict.id }))).rejects.toBeInstanceOf(UnsupportedOperationError);
  });

  it('the admin API answers an interaction (the same command), idempotently with Idempotency-Key', async () => {
    const asked = await task(clients.JSONRPC, send('deploy from the console'));
    const interactionId = promptOf(asked).id;
    const key = randomUUID();
    const path = `/v1/runs/${asked.id}/interactions/${interactionId}/responses`;
    const [a, b] = [await admin('POST', path, { optionId: 'approve' }, { 'idempotency-key': key }), await admin('POST', path, { optionId: 'approve' }, { 'idempotency-key': key })];
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.body).toEqual(a.body);
    await waitFor(clients.JSONRPC, asked.id, 'TASK_STATE_COMPLETED');
    const detail = (await admin('GET', `/v1/runs/${asked.id}`)).body;
    expect(detail.interactions[0]).toMatchObject({ status: 'resolved', response: { decision: 'approved', optionId: 'approve', submittedBy: expect.any(String) } });
    expect((await eventTypes(asked.id)).filter((t) => t === 'interaction.responded')).toHaveLength(1);
    const again = await admin('POST', path, { optionId: 'reject' });
    expect([again.status, again.body.error.code]).toEqual([409, 'run.terminal']);
    const unknown = await admin('POST', `/v1/runs/${asked.id}/interactions/${randomUUID()}/responses`, { text: 'x' });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'interaction.not_found']);
    const empty = await admin('POST', path, {});
    expect(empty.status).toBe(422);
  });
});

describe('RunLink delegation', () => {
  it('parent and child are linked both ways, the parent completes with the child result, and a resumed stream tells the same story', async () => {
    const base = `${stack.baseUrl}${concierge.basePath}`;
    const live = await readSse(`${base}/message:stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'research the moon' }] } }),
    });
    expect(live.ended).toBe(true);
    const items = live.frames.map((f) => JSON.parse(f.data) as Record<string, any>);
    const parentId: string = items[0]!.task.id;
    expect(items.at(-1)!.statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
    const linked = items.find((i) => i.statusUpdate?.metadata?.runLink?.childTaskId)!.statusUpdate;
    const childId: string = linked.metadata.runLink.childTaskId;
    expect(linked.status.message.referenceTaskIds).toEqual([childId]);
    const childStates = items.filter((i) => i.statusUpdate?.metadata?.runLink?.childState).map((i) => i.statusUpdate.metadata.runLink.childState);
    expect(childStates).toEqual(['TASK_STATE_WORKING', 'TASK_STATE_COMPLETED']);
    expect(items.find((i) => i.artifactUpdate)!.artifactUpdate.artifact).toMatchObject({ artifactId: 'summary', parts: [{ text: 'summary of: summarize research the moon' }] });

    // both visible through the admin API, linked in both directions
    const parent = (await admin('GET', `/v1/runs/${parentId}`)).body;
    expect(parent.run.status).toBe('completed');
    expect(parent.links.children).toMatchObject([{ kind: 'delegation', childRunId: childId, awaiting: true, other: { agentId: helper.agentId, status: 'completed' } }]);
    expect(parent.history.at(-1).parts).toEqual([{ text: 'Result: short and sweet' }]);
    expect(parent.history.find((m: any) => m.referenceTaskIds)?.referenceTaskIds).toEqual([childId]);
    const child = (await admin('GET', `/v1/runs/${childId}`)).body;
    expect(child.run).toMatchObject({ agentId: helper.agentId, status: 'completed', metadata: { parentTaskId: parentId } });
    expect(child.links.parents).toMatchObject([{ parentRunId: parentId, other: { agentId: concierge.agentId } }]);

    // the log read back from any cursor tells the same story as the live stream
    const ids = live.frames.slice(1).map((f) => f.id);
    const replay = await readSse(`${base}/tasks/${parentId}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': '0' } });
    expect(replay.frames.map((f) => f.id)).toEqual(ids);
    expect(replay.frames.map((f) => JSON.parse(f.data))).toEqual(items.slice(1));
    const cut = Number(ids[2]);
    const resumed = await readSse(`${base}/tasks/${parentId}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': String(cut) } });
    expect(resumed.frames.map((f) => f.id)).toEqual(ids.slice(3));
  });

  it('canceling the parent cancels its open child; both logs say so', async () => {
    const c = clients.JSONRPC;
    const parent = await task(c, SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'long job' }] }, configuration: { returnImmediately: true } }));
    let childId = '';
    for (const deadline = Date.now() + 10_000; !childId && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
      const d = (await admin('GET', `/v1/runs/${parent.id}`)).body;
      if (d.links.children[0]?.other.status === 'working') childId = d.links.children[0].childRunId;
    }
    expect(childId).not.toBe('');
    const canceled = await c.cancelTask({ tenant: '', id: parent.id, metadata: undefined });
    expect(state(canceled)).toBe('TASK_STATE_CANCELED');
    const child = (await admin('GET', `/v1/runs/${childId}`)).body;
    expect(child.run.status).toBe('canceled');
    expect((await admin('GET', `/v1/runs/${childId}/events`)).body.events.at(-1).event.payload.reason).toBe(`parent run ${parent.id} was canceled`);
    // nothing more on the parent after its terminal status
    expect((await eventTypes(parent.id)).at(-1)).toBe('run.status_changed');
  });

  it('delegating to an agent that is not published fails the run with the reason, and creates no link', async () => {
    const r = await rpcRaw('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'nowhere to go' }] } });
    expect(r.result.task.status.state).toBe('TASK_STATE_FAILED');
    expect(r.result.task.status.message.parts[0].text).toMatch(/Cannot delegate to nobody-here: no published agent nobody-here/);
    expect((await admin('GET', `/v1/runs/${r.result.task.id}`)).body.links.children).toEqual([]);
  });

  it("a child's failure reaches the parent as an event, and the parent fails as its script declares", async () => {
    const failed = await task(clients['HTTP+JSON'], send('broken pipeline'));
    const done = failed.status && state(failed) === 'TASK_STATE_FAILED' ? failed : await waitFor(clients['HTTP+JSON'], failed.id, 'TASK_STATE_FAILED');
    expect(text(done.status!.message)).toMatch(/ended failed/);
    const events = (await admin('GET', `/v1/runs/${failed.id}/events`)).body.events as Array<{ event: { type: string; payload: any } }>;
    expect(events.filter((e) => e.event.type === 'run.link_updated').map((e) => e.event.payload.status)).toEqual(['failed']);
  });
});
