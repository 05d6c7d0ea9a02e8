import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { encodeResumeCursor } from '#libs/a2a';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Streaming over JSON-RPC (v1.0 SendStreamingMessage / SubscribeToTask, v0.3 message/stream /
 * tasks/resubscribe): every SSE event is a projection of one event-log entry, its `id:` the run's
 * sequence; a client resumes with Last-Event-ID or an explicit cursor and gets exactly the rest.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'multi',
      match: { text: '^multi' },
      steps: [
        { type: 'status', status: 'working', message: 'Starting' },
        { type: 'artifact', artifactId: 'report', name: 'report.txt', content: { text: 'abcdefghi' }, chunks: 3 },
        { type: 'message', text: 'Almost done' },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
    {
      name: 'slow',
      match: { text: '^slow' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'wait', ms: 150 },
        { type: 'message', text: 'one' },
        { type: 'wait', ms: 150 },
        { type: 'artifact', artifactId: 'a', content: { text: 'xyzxyz' }, chunks: 2 },
        { type: 'wait', ms: 150 },
        { type: 'message', text: 'two' },
        { type: 'status', status: 'completed' },
      ],
    },
    { name: 'ask', match: { text: '^ask' }, steps: [{ type: 'status', status: 'input-required', message: 'Which city?' }] },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong' }] },
  ],
};

let stack: Stack;
let agent: PublishedAgent;
let client: A2AClient;
let url: string;

const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };

function sendReq(text: string, extra: Record<string, unknown> = {}) {
  return SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra } });
}

function rpc(method: string, params: unknown, id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params });
}

const msg = (text: string) => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const results = (frames: SseFrame[]) => frames.map((f) => JSON.parse(f.data).result);
const kind = (r: Record<string, unknown>) => Object.keys(r)[0];

/** Every projectable sequence of a finished task, read back through a full subscription from 0. */
async function fullStory(taskId: string, base = url): Promise<SseFrame[]> {
  const r = await readSse(base, { method: 'POST', headers: { ...V1, 'last-event-id': '0' }, body: rpc('SubscribeToTask', { id: taskId }) });
  expect(r.ended).toBe(true);
  return r.frames;
}

beforeAll(async () => {
  stack = await startStack({ env: { STREAM_POLL_INTERVAL_MS: '250' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'streamer', runtime: RUNTIME, a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
  url = `${stack.baseUrl}${agent.basePath}`;
  client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(agent.cardUrl, '');
});

afterAll(async () => {
  await stack?.close();
});

describe('streaming with the official SDK client (JSON-RPC)', () => {
  it('the card advertises streaming', async () => {
    const card = await client.getAgentCard();
    expect(card.capabilities?.streaming).toBe(true);
  });

  it('SendStreamingMessage: a scripted multi-step task arrives exactly as the log tells it', async () => {
    const events: Array<{ kind: string; state?: string; text?: string; append?: boolean; lastChunk?: boolean; chunk?: string }> = [];
    for await (const ev of client.sendMessageStream(sendReq('multi step'))) {
      const p = ev.payload!;
      if (p.$case === 'task') events.push({ kind: 'task', state: taskStateToJSON(p.value.status!.state) });
      else if (p.$case === 'statusUpdate') {
        const m = p.value.status?.message;
        const text = m?.parts.map((x) => (x.content?.$case === 'text' ? x.content.value : '')).join('');
        events.push({ kind: 'status', state: taskStateToJSON(p.value.status!.state), ...(text ? { text } : {}) });
      } else if (p.$case === 'artifactUpdate') {
        const part = p.value.artifact!.parts[0]!;
        events.push({ kind: 'artifact', append: p.value.append, lastChunk: p.value.lastChunk, chunk: part.content?.$case === 'text' ? part.content.value : '' });
      } else events.push({ kind: p.$case });
    }
    expect(events).toEqual([
      { kind: 'task', state: 'TASK_STATE_SUBMITTED' },
      { kind: 'status', state: 'TASK_STATE_WORKING', text: 'Starting' },
      { kind: 'artifact', append: false, lastChunk: false, chunk: 'abc' },
      { kind: 'artifact', append: true, lastChunk: false, chunk: 'def' },
      { kind: 'artifact', append: true, lastChunk: true, chunk: 'ghi' },
      { kind: 'status', state: 'TASK_STATE_WORKING', text: 'Almost done' },
      { kind: 'status', state: 'TASK_STATE_COMPLETED', text: 'Done' },
    ]);
  });

  it('resubscribe mid-task: a Task snapshot first, then the rest until completed', async () => {
    const started = await client.sendMessage(SendMessageRequest.fromJSON({ ...msg('slow please'), configuration: { returnImmediately: true } }));
    const taskId = (started as { id: string }).id;
    await new Promise((r) => setTimeout(r, 200));
    const kinds: string[] = [];
    let last = '';
    for await (const ev of client.resubscribeTask({ tenant: '', id: taskId })) {
      kinds.push(ev.payload!.$case);
      if (ev.payload!.$case === 'statusUpdate') last = taskStateToJSON(ev.payload!.value.status!.state);
    }
    expect(kinds[0]).toBe('task');
    expect(kinds.slice(1).every((k) => k === 'statusUpdate' || k === 'artifactUpdate')).toBe(true);
    expect(last).toBe('TASK_STATE_COMPLETED');
  });

  it('a direct reply streams as a single Message', async () => {
    const items = [];
    for await (const ev of client.sendMessageStream(sendReq('ping'))) items.push(ev.payload!.$case);
    expect(items).toEqual(['message']);
  });
});

describe('SSE framing and resume (raw HTTP)', () => {
  it('every event carries id: = the run sequence, strictly increasing, ending at the terminal event', async () => {
    const r = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('multi')) });
    expect(r.status).toBe(200);
    expect(r.contentType).toMatch(/^text\/event-stream/);
    expect(r.ended).toBe(true);
    const ids = r.frames.map((f) => Number(f.id));
    expect(ids[0]).toBe(2); // the snapshot reflects run.created + the user message
    for (let i = 1; i < ids.length; i++) expect(ids[i]!).toBeGreaterThan(ids[i - 1]!);
    const res = results(r.frames);
    expect(kind(res[0])).toBe('task');
    expect(res.at(-1).statusUpdate.status.state).toBe('TASK_STATE_COMPLETED');
    // the log has exactly as many events as the last id, and the admin API tells the same story
    const taskId = res[0].task.id;
    const events = await fetch(`${stack.baseUrl}/v1/runs/${taskId}/events?after=0&limit=100`, { headers: { authorization: `Bearer ${stack.adminKey}` } });
    const body = (await events.json()) as { events: Array<{ sequence: number }> };
    expect(body.events.map((e) => e.sequence).at(-1)).toBe(ids.at(-1));
  });

  it('Last-Event-ID resumes with exactly the events after it, and GetTask agrees with the stream', async () => {
    const first = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('slow resume')) }, { max: 3 });
    expect(first.ended).toBe(false);
    const taskId = JSON.parse(first.frames[0]!.data).result.task.id;
    const lastId = first.frames.at(-1)!.id!;
    const rest = await readSse(url, { method: 'POST', headers: { ...V1, 'last-event-id': lastId }, body: rpc('SubscribeToTask', { id: taskId }) });
    expect(rest.ended).toBe(true);
    expect(kind(results(rest.frames)[0])).not.toBe('task'); // no snapshot on resume
    const full = await fullStory(taskId);
    // snapshot id 2 + everything after it == the full story from 0 (which has no snapshot)
    const seen = [...first.frames.slice(1), ...rest.frames].map((f) => f.id);
    expect(seen).toEqual(full.map((f) => f.id));
    expect([...first.frames.slice(1), ...rest.frames].map((f) => JSON.parse(f.data).result)).toEqual(results(full));
    const task = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: rpc('GetTask', { id: taskId }) });
    const t = ((await task.json()) as { result: { status: { state: string }; artifacts: Array<{ parts: Array<{ text: string }> }> } }).result;
    expect(t.status.state).toBe(results(full).at(-1).statusUpdate.status.state);
    const streamedChunks = results(full).filter((x) => x.artifactUpdate).map((x) => x.artifactUpdate.artifact.parts[0].text).join('');
    expect(t.artifacts[0]!.parts.map((p) => p.text).join('')).toBe(streamedChunks);
  });

  it('GetTask, ListTasks, the stream and a resumed stream tell the same facts in the same order', async () => {
    const live = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('multi consistency')) });
    const liveResults = results(live.frames);
    const task0 = liveResults[0].task;
    const resumed = results(await fullStory(task0.id));
    expect(resumed).toEqual(liveResults.slice(1));

    const call = async (method: string, params: unknown) =>
      ((await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: rpc(method, params) })).json()) as { result: any }).result;
    const got = await call('GetTask', { id: task0.id });
    const listed = (await call('ListTasks', { contextId: task0.contextId, includeArtifacts: true })).tasks;
    expect(listed).toEqual([got]);

    // the stream's agent messages, in order, are the task's agent history, in order
    const streamedAgent = liveResults.filter((r) => r.statusUpdate?.status.message).map((r) => r.statusUpdate.status.message);
    const historyAgent = got.history.filter((m: { role: string }) => m.role === 'ROLE_AGENT');
    expect(streamedAgent.map((m: { messageId: string }) => m.messageId)).toEqual(historyAgent.map((m: { messageId: string }) => m.messageId));
    expect(streamedAgent).toEqual(historyAgent);
    // the last streamed state and status message are the task's
    expect(liveResults.at(-1).statusUpdate.status).toEqual(got.status);
    // the artifact chunks, appended in stream order, are the task's artifact
    const chunks = liveResults.filter((r) => r.artifactUpdate).map((r) => r.artifactUpdate.artifact.parts).flat();
    expect(got.artifacts).toHaveLength(1);
    expect(got.artifacts[0].parts).toEqual(chunks);
  });

  it('an explicit cursor (A2A-Cursor) resumes too; a cursor at the end of a finished task is an error', async () => {
    const done = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('multi cursor')) });
    const task = JSON.parse(done.frames[0]!.data).result.task;
    const cursor = encodeResumeCursor({ runId: task.id, threadId: task.contextId, sequence: 4 });
    const r = await readSse(url, { method: 'POST', headers: { ...V1, 'a2a-cursor': cursor }, body: rpc('SubscribeToTask', { id: task.id }) });
    expect(r.frames.map((f) => Number(f.id)).every((id) => id > 4)).toBe(true);
    expect(r.frames.map((f) => f.id)).toEqual(done.frames.filter((f) => Number(f.id) > 4).map((f) => f.id));
    const lastSeq = Number(done.frames.at(-1)!.id);
    const atEnd = await readSse(url, { method: 'POST', headers: { ...V1, 'last-event-id': String(lastSeq) }, body: rpc('SubscribeToTask', { id: task.id }) });
    expect(JSON.parse(atEnd.body!).error.code).toBe(-32004);
  });

  it('input-required closes the stream; the answer streams to completion', async () => {
    const r = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('ask me')) });
    expect(r.ended).toBe(true);
    const res = results(r.frames);
    expect(res.at(-1).statusUpdate.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(res.at(-1).statusUpdate.status.message.parts[0].text).toBe('Which city?');
    const task = res[0].task;
    const answer = await readSse(url, {
      method: 'POST',
      headers: V1,
      body: rpc('SendStreamingMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', taskId: task.id, contextId: task.contextId, parts: [{ text: 'Paris' }] } }),
    });
    const states = results(answer.frames).map((x) => x.task?.status.state ?? x.statusUpdate?.status.state);
    expect(states[0]).toBe('TASK_STATE_WORKING');
    expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
  });

  it('v0.3 message/stream: kind-tagged events, final on the last, without a version header', async () => {
    const r = await readSse(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: rpc('message/stream', { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'multi v03' }] } }),
    });
    const res = results(r.frames);
    expect(res.map((x) => x.kind)).toEqual(['task', 'status-update', 'artifact-update', 'artifact-update', 'artifact-update', 'status-update', 'status-update']);
    expect(res.at(-1)).toMatchObject({ kind: 'status-update', final: true, status: { state: 'completed' } });
    expect(res.slice(1, -1).filter((x) => x.kind === 'status-update').every((x) => x.final === false)).toBe(true);
    const resub = await readSse(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'last-event-id': r.frames[3]!.id! },
      body: rpc('tasks/resubscribe', { id: res[0].id }),
    });
    expect(resub.frames.map((f) => f.id)).toEqual(r.frames.slice(4).map((f) => f.id));
  });

  it('a held task streams until it is canceled', async () => {
    const started = await client.sendMessage(SendMessageRequest.fromJSON({ ...msg('hold it'), configuration: { returnImmediately: true } }));
    const taskId = (started as { id: string }).id;
    const reading = readSse(url, { method: 'POST', headers: V1, body: rpc('SubscribeToTask', { id: taskId }) });
    await new Promise((r) => setTimeout(r, 300));
    await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    const r = await reading;
    expect(r.ended).toBe(true);
    expect(results(r.frames).at(-1).statusUpdate.status.state).toBe('TASK_STATE_CANCELED');
  });
});

describe('streaming errors (exact codes)', () => {
  const err = async (method: string, params: unknown, headers: Record<string, string> = {}) => {
    const r = await readSse(url, { method: 'POST', headers: { ...V1, ...headers }, body: rpc(method, params) });
    expect(r.contentType).toMatch(/^application\/json/);
    return JSON.parse(r.body!).error as { code: number; data?: Array<{ reason: string }> };
  };
  let finished: { id: string; contextId: string; last: number };

  beforeAll(async () => {
    const r = await readSse(url, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('multi for errors')) });
    const t = JSON.parse(r.frames[0]!.data).result.task;
    finished = { id: t.id, contextId: t.contextId, last: Number(r.frames.at(-1)!.id) };
  });

  it('subscribe to an unknown task: -32001', async () => {
    expect((await err('SubscribeToTask', { id: randomUUID() })).code).toBe(-32001);
  });

  it('subscribe to a terminal task without a cursor: -32004', async () => {
    const e = await err('SubscribeToTask', { id: finished.id });
    expect(e.code).toBe(-32004);
    expect(e.data![0]!.reason).toBe('UNSUPPORTED_OPERATION');
  });

  it('malformed Last-Event-ID / cursor, cursor of another task, cursor past the end: -32602', async () => {
    expect((await err('SubscribeToTask', { id: finished.id }, { 'last-event-id': 'abc' })).code).toBe(-32602);
    expect((await err('SubscribeToTask', { id: finished.id }, { 'a2a-cursor': 'not-a-cursor' })).code).toBe(-32602);
    const other = encodeResumeCursor({ runId: randomUUID(), threadId: finished.contextId, sequence: 1 });
    expect((await err('SubscribeToTask', { id: finished.id }, { 'a2a-cursor': other })).code).toBe(-32602);
    const wrongThread = encodeResumeCursor({ runId: finished.id, threadId: 'another-context', sequence: 1 });
    expect((await err('SubscribeToTask', { id: finished.id }, { 'a2a-cursor': wrongThread })).code).toBe(-32602);
    expect((await err('SubscribeToTask', { id: finished.id }, { 'last-event-id': String(finished.last + 5) })).code).toBe(-32602);
  });

  it('a task of another organization is not found, even with a valid-looking cursor', async () => {
    const other = await startStack({ worker: false });
    try {
      const theirs = await publishAgent(other.baseUrl, other.adminKey, { slug: 'streamer', runtime: RUNTIME, a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
      const r = await readSse(`${stack.baseUrl}${theirs.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': '1' }, body: rpc('SubscribeToTask', { id: finished.id }) });
      expect(JSON.parse(r.body!).error.code).toBe(-32001);
    } finally {
      await other.close();
    }
  });

  it('an agent that does not declare streaming refuses streams: -32004', async () => {
    const plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'plain', runtime: RUNTIME });
    const r = await readSse(`${stack.baseUrl}${plain.basePath}`, { method: 'POST', headers: V1, body: rpc('SendStreamingMessage', msg('multi')) });
    expect(JSON.parse(r.body!).error.code).toBe(-32004);
  });

  it('bad params on a streaming method: -32602; nothing is created', async () => {
    const before = await fetch(`${stack.baseUrl}/v1/runs?limit=100`, { headers: { authorization: `Bearer ${stack.adminKey}` } }).then((r) => r.json() as Promise<{ runs: unknown[] }>);
    expect((await err('SendStreamingMessage', { message: { role: 'ROLE_USER', parts: [] } })).code).toBe(-32602);
    const after = await fetch(`${stack.baseUrl}/v1/runs?limit=100`, { headers: { authorization: `Bearer ${stack.adminKey}` } }).then((r) => r.json() as Promise<{ runs: unknown[] }>);
    expect(after.runs.length).toBe(before.runs.length);
  });
});

