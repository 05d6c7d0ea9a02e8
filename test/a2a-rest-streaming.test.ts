import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { TaskNotFoundError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse, type SseFrame } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Streaming over the HTTP+JSON binding: `POST /message:stream` and `GET|POST /tasks/{id}:subscribe`
 * (A2A v1.0 §11) — SSE with the bare StreamResponse as each event's data and the run's sequence
 * as its `id:`; errors before the first event as ordinary error responses, with the SDK REST
 * client as the peer.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'multi',
      match: { text: '^multi' },
      steps: [
        { type: 'status', status: 'working', message: 'Starting' },
        { type: 'artifact', artifactId: 'report', name: 'report.txt', content: { text: 'abcdef' }, chunks: 2 },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
    { name: 'slow', match: { text: '^slow' }, steps: [{ type: 'status', status: 'working' }, { type: 'wait', ms: 300 }, { type: 'status', status: 'completed', message: 'late' }] },
    { name: 'ping', match: { text: '^ping' }, steps: [{ type: 'reply', text: 'pong' }] },
  ],
};

const STREAMING = { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } };
const SSE_HEADERS = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };

let stack: Stack;
let agent: PublishedAgent;
let base: string;
let client: A2AClient;

const message = (text: string) => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const items = (frames: SseFrame[]) => frames.map((f) => JSON.parse(f.data) as Record<string, any>);
const kinds = (frames: SseFrame[]) => items(frames).map((i) => Object.keys(i)[0]);

beforeAll(async () => {
  stack = await startStack({ env: { STREAM_POLL_INTERVAL_MS: '250' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rest-streamer', runtime: RUNTIME, transports: ['HTTP+JSON', 'JSONRPC'], a2a: STREAMING });
  base = `${stack.baseUrl}${agent.basePath}`;
  client = await new ClientFactory({ transports: [new RestTransportFactory()] }).createFromUrl(`${base}/`);
});

afterAll(async () => {
  await stack?.close();
});

describe('HTTP+JSON streaming on the wire', () => {
  it('POST /message:stream: SSE of bare StreamResponses, id = sequence, ending after the terminal status', async () => {
    const r = await readSse(`${base}/message:stream`, { method: 'POST', headers: SSE_HEADERS, body: JSON.stringify(message('multi rest')) });
    expect(r.status).toBe(200);
    expect(r.contentType).toMatch(/^text\/event-stream/);
    expect(r.ended).toBe(true);
    expect(kinds(r.frames)).toEqual(['task', 'statusUpdate', 'artifactUpdate', 'artifactUpdate', 'statusUpdate']);
    const [task, , a1, a2, done] = items(r.frames);
    expect(task!.task).toMatchObject({ status: { state: 'TASK_STATE_SUBMITTED' } });
    expect(a1!.artifactUpdate).toMatchObject({ artifact: { artifactId: 'report', parts: [{ text: 'abc' }] } });
    expect(a2!.artifactUpdate).toMatchObject({ append: true, lastChunk: true, artifact: { parts: [{ text: 'def' }] } });
    expect(done!.statusUpdate).toMatchObject({ taskId: task!.task.id, status: { state: 'TASK_STATE_COMPLETED', message: { parts: [{ text: 'Done' }] } } });
    const ids = r.frames.map((f) => Number(f.id));
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeGreaterThan(ids[i - 1]!);
    // no JSON-RPC envelope
    expect(items(r.frames).every((i) => !('jsonrpc' in i))).toBe(true);
  });

  it('a direct reply is a single {message} event; the tenant twin streams too', async () => {
    const r = await readSse(`${base}/${agent.orgSlug}/message:stream`, { method: 'POST', headers: SSE_HEADERS, body: JSON.stringify(message('ping stream')) });
    expect(items(r.frames)).toEqual([{ message: expect.objectContaining({ role: 'ROLE_AGENT', parts: [{ text: 'pong' }] }) }]);
    // its event id: the reply's sequence in the log of its reply run (created, message, completed)
    expect(r.frames[0]!.id).toBe('3');
  });

  it('GET and POST /tasks/{id}:subscribe: a snapshot first, then the rest; Last-Event-ID resumes after a sequence', async () => {
    const started = await fetch(`${base}/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ ...message('slow rest'), configuration: { returnImmediately: true } }),
    });
    const id: string = ((await started.json()) as { task: { id: string } }).task.id;
    const [viaGet, viaPost] = await Promise.all([
      readSse(`${base}/tasks/${id}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', accept: 'text/event-stream' } }),
      readSse(`${base}/tasks/${id}:subscribe`, { method: 'POST', headers: { 'a2a-version': '1.0', accept: 'text/event-stream' } }),
    ]);
    for (const r of [viaGet, viaPost]) {
      expect(r.status).toBe(200);
      expect(kinds(r.frames)[0]).toBe('task');
      expect(items(r.frames).at(-1)!.statusUpdate).toMatchObject({ status: { state: 'TASK_STATE_COMPLETED' } });
    }
    // the whole story from the start, then only what follows a given sequence
    const all = await readSse(`${base}/tasks/${id}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': '0' } });
    expect(all.frames.length).toBeGreaterThan(1);
    const cut = Number(all.frames[0]!.id);
    const rest = await readSse(`${base}/tasks/${id}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': String(cut) } });
    expect(rest.frames.map((f) => f.id)).toEqual(all.frames.slice(1).map((f) => f.id));
  });

  it('errors before the first event are plain error responses: unknown task 404, terminal task 400, bad body 400, 415, no streaming 400 (§5.4)', async () => {
    const unknown = await readSse(`${base}/tasks/${randomUUID()}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0' } });
    expect(unknown.status).toBe(404);
    expect(unknown.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(unknown.body!).error).toMatchObject({ code: 404, status: 'NOT_FOUND', details: [{ reason: 'TASK_NOT_FOUND' }] });

    const done = await fetch(`${base}/message:send`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify(message('plain')) });
    const doneId: string = ((await done.json()) as { task: { id: string } }).task.id;
    const terminal = await readSse(`${base}/tasks/${doneId}:subscribe`, { method: 'POST', headers: { 'a2a-version': '1.0' } });
    expect(terminal.status).toBe(400);
    expect(JSON.parse(terminal.body!).error).toMatchObject({ code: 400, status: 'FAILED_PRECONDITION', details: [{ reason: 'UNSUPPORTED_OPERATION' }] });

    const badBody = await readSse(`${base}/message:stream`, { method: 'POST', headers: SSE_HEADERS, body: '{}' });
    expect(badBody.status).toBe(400);
    expect(JSON.parse(badBody.body!).error).toMatchObject({ status: 'INVALID_ARGUMENT', details: [{ reason: 'INVALID_PARAMS' }] });
    const text = await readSse(`${base}/message:stream`, { method: 'POST', headers: { ...SSE_HEADERS, 'content-type': 'text/plain' }, body: JSON.stringify(message('x')) });
    expect(text.status).toBe(415);
    const badCursor = await readSse(`${base}/tasks/${doneId}:subscribe?cursor=%%%`, { method: 'GET', headers: { 'a2a-version': '1.0' } });
    expect(badCursor.status).toBe(400);

    const plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rest-no-stream', runtime: RUNTIME, transports: ['HTTP+JSON'] });
    const noStream = await readSse(`${stack.baseUrl}${plain.basePath}/message:stream`, { method: 'POST', headers: SSE_HEADERS, body: JSON.stringify(message('x')) });
    expect(noStream.status).toBe(400);
    expect(JSON.parse(noStream.body!).error).toMatchObject({ status: 'FAILED_PRECONDITION', details: [{ reason: 'UNSUPPORTED_OPERATION' }] });
  });
});

describe('HTTP+JSON streaming with the SDK REST client', () => {
  it('sendMessageStream yields the task and its updates until completed', async () => {
    const seen: string[] = [];
    for await (const ev of client.sendMessageStream(SendMessageRequest.fromJSON(message('multi sdk')))) {
      const p = ev.payload!;
      seen.push(p.$case === 'task' || p.$case === 'statusUpdate' ? `${p.$case}:${taskStateToJSON(p.value.status!.state)}` : p.$case);
    }
    expect(seen).toEqual(['task:TASK_STATE_SUBMITTED', 'statusUpdate:TASK_STATE_WORKING', 'artifactUpdate', 'artifactUpdate', 'statusUpdate:TASK_STATE_COMPLETED']);
  });

  it('resubscribeTask follows a live task; typed errors for unknown and terminal tasks', async () => {
    const started = (await client.sendMessage(SendMessageRequest.fromJSON({ ...message('slow sdk'), configuration: { returnImmediately: true } }))) as { id: string };
    const states: string[] = [];
    for await (const ev of client.resubscribeTask({ tenant: '', id: started.id })) {
      const p = ev.payload!;
      if (p.$case === 'task' || p.$case === 'statusUpdate') states.push(taskStateToJSON(p.value.status!.state));
    }
    expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');

    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it) void _;
    };
    await expect(drain(client.resubscribeTask({ tenant: '', id: randomUUID() }))).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(drain(client.resubscribeTask({ tenant: '', id: started.id }))).rejects.toBeInstanceOf(UnsupportedOperationError);
  });
});
