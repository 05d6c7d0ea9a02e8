import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { COMPLIANCE_EXTENSION_URI, STRUCTURED_INPUT_EXTENSION_URI, SUBSTATES_EXTENSION_URI, TASK_SEARCH_EXTENSION_URI, type A2AExtensionPlugin } from '#libs/extensions';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { readSse } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * A2A extensions end to end: declaration (validated params, on the card), activation by the
 * `A2A-Extensions` header (v0.3: `X-A2A-Extensions`) on both bindings and both versions, the
 * response header listing exactly what was activated, required extensions (-32008 / HTTP 400
 * FAILED_PRECONDITION), unsupported versions ignored, the built-in profile and sub-state
 * extensions, and an extension written here in a few lines and registered through the plugin API.
 */

/** A test extension: the plugin API in a few lines (a profile that stamps every message). */
const STAMP_URI = 'https://example.test/extensions/stamp/v1';
const stamp: A2AExtensionPlugin<{ prefix: string }> = {
  uri: STAMP_URI,
  description: 'Appends a stamp part to every message (test extension).',
  params: z.strictObject({ prefix: z.string().min(1) }),
  onMessage: (m, p) => ({ ...m, parts: [...m.parts, { text: `${p.prefix} stamped` }] }),
  annotate: (target, metadata, p) => ({ ...metadata, [STAMP_URI]: { target, prefix: p.prefix } }),
};

const RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      match: { text: '^think' },
      steps: [
        { type: 'substate', state: 'thinking' },
        { type: 'substate', state: 'drafting', text: 'Drafting an answer' },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
  ],
};

const ORDER_SCHEMA = { type: 'object', required: ['order'], properties: { order: { type: 'string', minLength: 1 } } };
const EXTENSIONS = [
  { uri: COMPLIANCE_EXTENSION_URI, description: 'where data lives', params: { dataResidency: ['DE', 'FR'], certifications: ['ISO27001'], retentionDays: 30 } },
  { uri: STRUCTURED_INPUT_EXTENSION_URI, params: { schema: ORDER_SCHEMA } },
  { uri: SUBSTATES_EXTENSION_URI, params: { states: ['thinking', 'drafting'] } },
  { uri: STAMP_URI, params: { prefix: '[ok]' } },
];

let stack: Stack;
let agent: PublishedAgent;
let strict: PublishedAgent;

async function rpc(a: PublishedAgent, method: string, params: unknown, headers: Record<string, string> = {}, version: string | null = '1.0') {
  const res = await fetch(`${stack.baseUrl}${a.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

const v1Send = (parts: unknown[]) => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts } });
const v03Send = (parts: unknown[]) => ({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts } });

beforeAll(async () => {
  stack = await startStack({ extensions: [stamp] });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'extended',
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { extensions: EXTENSIONS, capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
  strict = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'strict',
    runtime: { kind: 'scripted', rules: [] },
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { extensions: [{ uri: STAMP_URI, required: true, params: { prefix: '[req]' } }] },
  });
});

afterAll(async () => {
  await stack?.close();
});

describe('declaration', () => {
  it('the card lists the declared extensions with their params (v1.0 and v0.3); each built-in spec is served at its URI path', async () => {
    const card = (await (await fetch(agent.cardUrl)).json()) as any;
    expect(card.capabilities.extensions.map((e: { uri: string }) => e.uri)).toEqual(EXTENSIONS.map((e) => e.uri));
    expect(card.capabilities.extensions[0].params).toMatchObject({ dataResidency: ['DE', 'FR'], certifications: ['ISO27001'] });
    const v03 = (await (await fetch(agent.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as any;
    expect(v03.capabilities.extensions).toHaveLength(EXTENSIONS.length);
    for (const uri of [COMPLIANCE_EXTENSION_URI, STRUCTURED_INPUT_EXTENSION_URI, SUBSTATES_EXTENSION_URI]) {
      const doc = await fetch(`${stack.baseUrl}${new URL(uri).pathname}`);
      expect(doc.status, uri).toBe(200);
      expect(doc.headers.get('content-type')).toMatch(/^text\/markdown/);
      expect(await doc.text()).toContain(uri);
    }
    expect((await fetch(`${stack.baseUrl}/extensions/nothing/v9`)).status).toBe(404);
  });

  it('params are validated when a revision is drafted; an unknown extension is data-only and may not be required', async () => {
    await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'drafty', name: 'D', description: 'd' });
    const draft = (extensions: unknown[]) =>
      adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents/drafty/revisions', {
        protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }], extensions } },
        runtime: { kind: 'scripted', rules: [] },
      });
    const badParams = await draft([{ uri: COMPLIANCE_EXTENSION_URI, params: { dataResidency: ['Germany'] } }]);
    expect(badParams.status).toBe(422);
    expect(JSON.stringify(badParams.body)).toContain(COMPLIANCE_EXTENSION_URI);
    const requiredUnknown = await draft([{ uri: 'https://unknown.example/ext/v1', required: true }]);
    expect(requiredUnknown.status).toBe(422);
    expect(JSON.stringify(requiredUnknown.body)).toMatch(/data-only extension .* must not be required/);
    expect((await draft([{ uri: 'https://unknown.example/ext/v1', params: { anything: 1 } }])).status).toBe(201);
    // a scripted substate step must use a sub-state the extension declares
    const substates = (states: string[]) =>
      adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents/drafty/revisions', {
        protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }], extensions: [{ uri: SUBSTATES_EXTENSION_URI, params: { states } }] } },
        runtime: { kind: 'scripted', rules: [{ match: { text: 'x' }, steps: [{ type: 'substate', state: 'painting' }] }] },
      });
    const undeclared = await substates(['thinking']);
    expect(undeclared.status).toBe(422);
    expect(JSON.stringify(undeclared.body)).toContain('painting not declared');
    expect((await substates(['painting'])).status).toBe(201);
  });
});

describe('activation', () => {
  it('without the header nothing is activated: no response header, no rules applied', async () => {
    const r = await rpc(agent, 'SendMessage', v1Send([{ text: 'hello' }]));
    expect(r.body.result.task).toBeDefined();
    expect(r.headers.get('a2a-extensions')).toBeNull();
    expect(r.body.result.task.history[0].parts).toEqual([{ text: 'hello' }]);
  });

  it('JSON-RPC v1.0: the profile extension refuses a message without a valid DataPart, naming itself; the response header lists exactly what was activated', async () => {
    const h = { 'A2A-Extensions': `${STRUCTURED_INPUT_EXTENSION_URI}, https://unknown.example/x/v1, ${STAMP_URI}` };
    const refused = await rpc(agent, 'SendMessage', v1Send([{ text: 'no data' }]), h);
    expect(refused.body.error).toMatchObject({ code: -32602, message: expect.stringContaining(STRUCTURED_INPUT_EXTENSION_URI) });
    const invalid = await rpc(agent, 'SendMessage', v1Send([{ data: { order: '' } }]), h);
    expect(invalid.body.error.message).toMatch(/no DataPart is valid/);
    const ok = await rpc(agent, 'SendMessage', v1Send([{ data: { order: 'pizza' } }]), h);
    expect(ok.headers.get('a2a-extensions')).toBe(`${STRUCTURED_INPUT_EXTENSION_URI}, ${STAMP_URI}`);
    const task = ok.body.result.task;
    expect(task.history[0].parts).toEqual([{ data: { order: 'pizza' } }, { text: '[ok] stamped' }]);
    // the activation is recorded in the run's log
    const events = (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${task.id}/events`)).body.events;
    expect(events[0].event.payload.extensions).toEqual([STRUCTURED_INPUT_EXTENSION_URI, STAMP_URI]);
  });

  it('an unsupported version of a declared extension is ignored (exact URI match, no fallback)', async () => {
    const r = await rpc(agent, 'SendMessage', v1Send([{ text: 'no data needed' }]), { 'A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI.replace('/v1', '/v2') });
    expect(r.body.result.task).toBeDefined();
    expect(r.headers.get('a2a-extensions')).toBeNull();
  });

  it('v0.3 reads X-A2A-Extensions and answers with X-A2A-Extensions', async () => {
    const refused = await rpc(agent, 'message/send', v03Send([{ kind: 'text', text: 'no data' }]), { 'X-A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI }, null);
    expect(refused.body.error.code).toBe(-32602);
    const ok = await rpc(agent, 'message/send', v03Send([{ kind: 'data', data: { order: 'soup' } }]), { 'X-A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI }, null);
    expect(ok.body.result.kind).toBe('task');
    expect(ok.headers.get('x-a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
  });

  it('HTTP+JSON: the same activation and refusals', async () => {
    const post = (body: unknown, headers: Record<string, string>) =>
      fetch(`${stack.baseUrl}${agent.basePath}/message:send`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers }, body: JSON.stringify(body) });
    const refused = await post(v1Send([{ text: 'x' }]), { 'A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error.message).toContain(STRUCTURED_INPUT_EXTENSION_URI);
    const ok = await post(v1Send([{ data: { order: 'tea' } }]), { 'A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
    expect(ok.headers.get('x-a2a-extensions')).toBeNull();
  });

  it('answers in the header name the request used too: X-A2A-Extensions on v1.0, A2A-Extensions on v0.3', async () => {
    const post = (body: unknown, headers: Record<string, string>) =>
      fetch(`${stack.baseUrl}${agent.basePath}/message:send`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers }, body: JSON.stringify(body) });
    const v1 = await post(v1Send([{ data: { order: 'tea' } }]), { 'X-A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI });
    expect(v1.status).toBe(200);
    expect(v1.headers.get('x-a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
    expect(v1.headers.get('a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
    const v03 = await rpc(agent, 'message/send', v03Send([{ kind: 'data', data: { order: 'soup' } }]), { 'A2A-Extensions': STRUCTURED_INPUT_EXTENSION_URI }, null);
    expect(v03.headers.get('x-a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
    expect(v03.headers.get('a2a-extensions')).toBe(STRUCTURED_INPUT_EXTENSION_URI);
  });
});

describe('required extensions', () => {
  it('a request that does not activate a required extension is refused: -32008 on JSON-RPC (both versions), 400 FAILED_PRECONDITION on REST, and the SDK sees the error', async () => {
    const v1 = await rpc(strict, 'SendMessage', v1Send([{ text: 'hi' }]));
    expect(v1.body.error).toMatchObject({ code: -32008, message: expect.stringContaining(STAMP_URI) });
    expect((await rpc(strict, 'message/send', v03Send([{ kind: 'text', text: 'hi' }]), {}, null)).body.error.code).toBe(-32008);
    expect((await rpc(strict, 'GetTask', { id: randomUUID() })).body.error.code).toBe(-32008);
    const rest = await fetch(`${stack.baseUrl}${strict.basePath}/message:send`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify(v1Send([{ text: 'hi' }])) });
    expect(rest.status).toBe(400);
    expect(((await rest.json()) as any).error).toMatchObject({ status: 'FAILED_PRECONDITION', details: [{ reason: 'EXTENSION_SUPPORT_REQUIRED' }] });
    const sdk = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${strict.basePath}/`);
    await expect(sdk.getTask({ tenant: '', id: randomUUID(), historyLength: undefined })).rejects.toThrow(/requires extension/);
    // activated: accepted, and the test extension acted
    const ok = await rpc(strict, 'SendMessage', v1Send([{ text: 'hi' }]), { 'A2A-Extensions': STAMP_URI });
    expect(ok.body.result.task.history[0].parts).toEqual([{ text: 'hi' }, { text: '[req] stamped' }]);
  });
});

describe('the sub-state extension', () => {
  it('working status updates carry the declared sub-state in their message metadata; the task state stays working', async () => {
    const r = await readSse(`${stack.baseUrl}${agent.basePath}/message:stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream', 'A2A-Extensions': SUBSTATES_EXTENSION_URI },
      body: JSON.stringify(v1Send([{ text: 'think hard' }])),
    });
    const updates = r.frames.map((f) => JSON.parse(f.data)).filter((i) => i.statusUpdate?.status?.message?.metadata?.[SUBSTATES_EXTENSION_URI]);
    expect(updates.map((u) => [u.statusUpdate.status.state, u.statusUpdate.status.message.metadata[SUBSTATES_EXTENSION_URI].state])).toEqual([
      ['TASK_STATE_WORKING', 'thinking'],
      ['TASK_STATE_WORKING', 'drafting'],
    ]);
  });
});

describe('the task-search method extension', () => {
  it('SearchTasks finds only the caller\'s own tasks by the words of their messages, paginated, on both versions; it exists only when activated', async () => {
    const searchable = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'searchable',
      runtime: { kind: 'scripted', rules: [] },
      transports: ['JSONRPC', 'HTTP+JSON'],
      security: { scheme: 'apiKey' },
      a2a: { extensions: [{ uri: TASK_SEARCH_EXTENSION_URI }] },
    });
    const key = async (name: string) => (await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name, scopes: ['a2a:invoke'] })).body.key as string;
    const [a, b] = [await key('searcher a'), await key('searcher b')];
    const act = (k: string) => ({ 'x-api-key': k, 'A2A-Extensions': TASK_SEARCH_EXTENSION_URI });
    const created: string[] = [];
    for (const text of ['a pizza order for two', 'green tea please', 'another pizza, vegetarian']) {
      created.push((await rpc(searchable, 'SendMessage', v1Send([{ text }]), { 'x-api-key': a })).body.result.task.id);
    }
    await rpc(searchable, 'SendMessage', v1Send([{ text: 'pizza party for b' }]), { 'x-api-key': b });

    const first = await rpc(searchable, 'SearchTasks', { query: 'pizza', pageSize: 1 }, act(a));
    expect(first.headers.get('a2a-extensions')).toBe(TASK_SEARCH_EXTENSION_URI);
    expect(first.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([created[2]]);
    const second = await rpc(searchable, 'SearchTasks', { query: 'pizza', pageSize: 1, pageToken: first.body.result.nextPageToken }, act(a));
    expect(second.body.result.tasks.map((t: { id: string }) => t.id)).toEqual([created[0]]);
    expect(second.body.result.nextPageToken).toBe('');
    // b's search sees only b's task; a's page token is not b's
    expect((await rpc(searchable, 'SearchTasks', { query: 'pizza' }, act(b))).body.result.tasks).toHaveLength(1);
    expect((await rpc(searchable, 'SearchTasks', { query: 'pizza', pageToken: first.body.result.nextPageToken }, act(b))).body.error.code).toBe(-32602);
    // v0.3 shapes
    const v03 = await rpc(searchable, 'SearchTasks', { query: 'tea' }, { 'x-api-key': a, 'X-A2A-Extensions': TASK_SEARCH_EXTENSION_URI }, null);
    expect(v03.body.result.tasks.map((t: { id: string; kind: string }) => [t.id, t.kind])).toEqual([[created[1], 'task']]);
    // untrusted params are validated; without activation the method does not exist
    expect((await rpc(searchable, 'SearchTasks', { query: '' }, act(a))).body.error.code).toBe(-32602);
    expect((await rpc(searchable, 'SearchTasks', { query: 'pizza' }, { 'x-api-key': a })).body.error.code).toBe(-32601);
    // HTTP+JSON: POST /extensions/{method}
    const rest = (headers: Record<string, string>) =>
      fetch(`${stack.baseUrl}${searchable.basePath}/extensions/SearchTasks`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers }, body: JSON.stringify({ query: 'pizza' }) });
    const viaRest = await rest(act(a));
    expect(viaRest.status).toBe(200);
    expect(((await viaRest.json()) as any).tasks.map((t: { id: string }) => t.id)).toEqual([created[2], created[0]]);
    expect((await rest({ 'x-api-key': a })).status).toBe(404);
  });
});

describe('annotating what an activating request receives', () => {
  it('status and task metadata carry the extension\'s annotation only for requests that activate it, on both bindings and in streams; the log is untouched', async () => {
    const h = { 'A2A-Extensions': STAMP_URI };
    const sent = await rpc(agent, 'SendMessage', v1Send([{ text: 'plain' }]), h);
    const task = sent.body.result.task;
    expect(task.metadata[STAMP_URI]).toEqual({ target: 'status', prefix: '[ok]' });
    expect((await rpc(agent, 'GetTask', { id: task.id })).body.result.metadata?.[STAMP_URI]).toBeUndefined();
    const rest = await fetch(`${stack.baseUrl}${agent.basePath}/tasks/${task.id}`, { headers: { 'a2a-version': '1.0', ...h } });
    expect(((await rest.json()) as any).metadata[STAMP_URI]).toEqual({ target: 'status', prefix: '[ok]' });
    const stream = await readSse(`${stack.baseUrl}${agent.basePath}/message:stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream', ...h },
      body: JSON.stringify(v1Send([{ text: 'think again' }])),
    });
    const updates = stream.frames.map((f) => JSON.parse(f.data)).filter((i) => i.statusUpdate);
    expect(updates.length).toBeGreaterThan(0);
    expect(updates.every((u) => u.statusUpdate.metadata?.[STAMP_URI]?.target === 'status')).toBe(true);
    const events = (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${task.id}/events`)).body.events;
    expect(JSON.stringify(events)).not.toContain('"target"');
  });
});
