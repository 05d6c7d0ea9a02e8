import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { A2AExtensionPlugin } from '#libs/extensions';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Extension dependencies end to end. An extension plugin may declare `dependsOn`: URIs a request
 * must activate together with it. Declaring it without its dependency is refused (422
 * `request.invalid` naming both) wherever a declaration is checked: a revision drafted, edited or
 * published, a binding saved — otherwise no request could ever activate it. A request that
 * activates it without its dependency is refused with InvalidParams (JSON-RPC -32602 on both
 * versions, HTTP+JSON 400 INVALID_ARGUMENT) on every operation, before anything is created;
 * activating both runs both and the response header lists both, in declaration order.
 */

const BASE_URI = 'https://example.test/extensions/ledger/v1';
const ADDON_URI = 'https://example.test/extensions/ledger-audit/v1';

const stampWith = (label: string) => (m: { parts: unknown[] }) => ({ ...m, parts: [...m.parts, { text: `[${label}]` }] }) as never;
const base: A2AExtensionPlugin = { uri: BASE_URI, description: 'a ledger (test extension)', onMessage: stampWith('ledger') };
const addon: A2AExtensionPlugin = { uri: ADDON_URI, description: 'audits the ledger (test extension)', dependsOn: [BASE_URI], onMessage: stampWith('audit') };
/** The same add-on as an older deployment knew it: no dependency yet. */
const addonBefore: A2AExtensionPlugin = { uri: ADDON_URI, description: 'audits (no dependency yet)', onMessage: stampWith('audit') };

const SKILLS = [{ id: 's', name: 'S', description: 'd', tags: ['t'] }];
const profile = (extensions: unknown[]) => ({ a2a: { skillsProjection: SKILLS, extensions } });

let stack: Stack;
let agent: PublishedAgent;

const admin = <T = any>(method: string, path: string, body?: unknown) => adminRequest<T>(stack.baseUrl, stack.adminKey, method, path, body);

async function rpc(method: string, params: unknown, headers: Record<string, string>, version: '1.0' | null = '1.0') {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}
const v1Send = (text: string) => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const v03Send = (text: string) => ({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }] } });
const runCount = async () => ((await admin('GET', `/v1/runs?agentId=${agent.agentId}&limit=100`)).body.runs as unknown[]).length;

/** The 422 a declaration of the add-on without the ledger gets, at `path`. */
function expectDependencyRefusal(res: { status: number; body: any }, path: string) {
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('request.invalid');
  expect(res.body.error.message).toContain(`${ADDON_URI} depends on ${BASE_URI}`);
  expect(res.body.error.details.issues).toEqual([{ path, message: expect.stringContaining(`declare it in the same list`) }]);
}

beforeAll(async () => {
  stack = await startStack({ extensions: [base, addon] });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'ledger',
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { extensions: [{ uri: ADDON_URI }, { uri: BASE_URI }] },
  });
});

afterAll(async () => {
  await stack?.close();
});

describe('declaring an extension without its dependency', () => {
  it('a draft revision is refused with 422 naming the extension and what it depends on; with both it is accepted', async () => {
    expect((await admin('POST', '/v1/agents', { slug: 'drafty', name: 'D', description: 'd' })).status).toBe(201);
    const draft = (extensions: unknown[]) => admin('POST', '/v1/agents/drafty/revisions', { protocolProfiles: profile(extensions), runtime: { kind: 'scripted', rules: [] } });
    expectDependencyRefusal(await draft([{ uri: ADDON_URI }]), 'protocolProfiles.a2a.extensions.0');
    expectDependencyRefusal(await draft([{ uri: 'https://unknown.example/x/v1' }, { uri: ADDON_URI }]), 'protocolProfiles.a2a.extensions.1');
    // the dependency alone, or both in any order, are fine
    expect((await draft([{ uri: BASE_URI }])).status).toBe(201);
    const both = await draft([{ uri: ADDON_URI }, { uri: BASE_URI }]);
    expect(both.status).toBe(201);
    // editing the draft to drop the dependency is refused too, and leaves it as it was
    const edit = await admin('PATCH', `/v1/agents/drafty/revisions/${both.body.id}`, { protocolProfiles: profile([{ uri: ADDON_URI }]) });
    expectDependencyRefusal(edit, 'protocolProfiles.a2a.extensions.0');
    const kept = await admin('GET', `/v1/agents/drafty/revisions/${both.body.id}`);
    expect(kept.body.protocolProfiles.a2a.extensions.map((e: { uri: string }) => e.uri)).toEqual([ADDON_URI, BASE_URI]);
    expect((await admin('POST', `/v1/agents/drafty/revisions/${both.body.id}/publish`)).status).toBe(200);
  });

  it('a binding is refused the same way (its list is checked on its own), on PUT and PATCH', async () => {
    const put = await admin('PUT', `/v1/agents/${agent.agentId}/bindings/a2a`, { transports: ['JSONRPC', 'HTTP+JSON'], extensions: [{ uri: ADDON_URI }] });
    expectDependencyRefusal(put, 'extensions.0');
    const patch = await admin('PATCH', `/v1/agents/${agent.agentId}/bindings/a2a`, { extensions: [{ uri: ADDON_URI }] });
    expectDependencyRefusal(patch, 'extensions.0');
    const binding = await admin('GET', `/v1/agents/${agent.agentId}/bindings/a2a`);
    expect(binding.body.extensions ?? []).toEqual([]);
    const ok = await admin('PATCH', `/v1/agents/${agent.agentId}/bindings/a2a`, { extensions: [{ uri: BASE_URI }, { uri: ADDON_URI }] });
    expect(ok.status).toBe(200);
    expect((await admin('PATCH', `/v1/agents/${agent.agentId}/bindings/a2a`, { extensions: [] })).status).toBe(200);
  });

  it('publishing re-checks: a draft made while the add-on had no dependency is refused once this deployment knows it, and stays a draft', async () => {
    // an older deployment (same database) that registered the add-on without its dependency
    const older = await startStack({ extensions: [base, addonBefore], worker: false });
    try {
      const req = (s: Stack, method: string, path: string, body?: unknown) => adminRequest(s.baseUrl, older.adminKey, method, path, body);
      expect((await req(older, 'POST', '/v1/agents', { slug: 'upgraded', name: 'U', description: 'u' })).status).toBe(201);
      const draft = await req(older, 'POST', '/v1/agents/upgraded/revisions', { protocolProfiles: profile([{ uri: ADDON_URI }]), runtime: { kind: 'scripted', rules: [] } });
      expect(draft.status).toBe(201);
      // this deployment knows the add-on depends on the ledger
      const publish = await req(stack, 'POST', `/v1/agents/upgraded/revisions/${draft.body.id}/publish`);
      expectDependencyRefusal(publish, 'protocolProfiles.a2a.extensions.0');
      expect((await req(stack, 'GET', `/v1/agents/upgraded/revisions/${draft.body.id}`)).body.status).toBe('draft');
    } finally {
      await older.close();
    }
  });
});

describe('activating an extension without its dependency', () => {
  it('the card declares both, in declaration order', async () => {
    const card = (await (await fetch(agent.cardUrl)).json()) as any;
    expect(card.capabilities.extensions.map((e: { uri: string }) => e.uri)).toEqual([ADDON_URI, BASE_URI]);
  });

  it('JSON-RPC v1.0: InvalidParams naming both, on every operation, no header echoed and no task created', async () => {
    const before = await runCount();
    for (const header of [ADDON_URI, `${ADDON_URI}, https://unknown.example/ledger/v1`, `${ADDON_URI}, ${BASE_URI.replace('/v1', '/v2')}`]) {
      const r = await rpc('SendMessage', v1Send('pay 5'), { 'A2A-Extensions': header });
      expect(r.status).toBe(200);
      expect(r.body.error, header).toMatchObject({ code: -32602, message: `extension ${ADDON_URI} needs ${BASE_URI} activated too (A2A-Extensions)` });
      expect(r.headers.get('a2a-extensions')).toBeNull();
    }
    expect((await rpc('GetTask', { id: randomUUID() }, { 'A2A-Extensions': ADDON_URI })).body.error.code).toBe(-32602);
    expect(await runCount()).toBe(before);
  });

  it('v0.3 (X-A2A-Extensions) and HTTP+JSON refuse it the same way', async () => {
    const v03 = await rpc('message/send', v03Send('pay 6'), { 'X-A2A-Extensions': ADDON_URI }, null);
    expect(v03.body.error).toMatchObject({ code: -32602, message: expect.stringContaining(`needs ${BASE_URI}`) });
    expect(v03.headers.get('x-a2a-extensions')).toBeNull();
    const rest = await fetch(`${stack.baseUrl}${agent.basePath}/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'A2A-Extensions': ADDON_URI },
      body: JSON.stringify(v1Send('pay 7')),
    });
    expect(rest.status).toBe(400);
    expect(rest.headers.get('a2a-extensions')).toBeNull();
    expect(((await rest.json()) as any).error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', message: expect.stringContaining(`needs ${BASE_URI}`), details: [{ reason: 'INVALID_PARAMS' }] });
  });

  it('the dependency alone is activated on its own; both together are activated, act, are echoed in declaration order and recorded on the run', async () => {
    const alone = await rpc('SendMessage', v1Send('pay 8'), { 'A2A-Extensions': BASE_URI });
    expect(alone.headers.get('a2a-extensions')).toBe(BASE_URI);
    expect(alone.body.result.task.history[0].parts).toEqual([{ text: 'pay 8' }, { text: '[ledger]' }]);

    const both = await rpc('SendMessage', v1Send('pay 9'), { 'A2A-Extensions': `${BASE_URI}, ${ADDON_URI}, https://unknown.example/x/v1` });
    expect(both.headers.get('a2a-extensions')).toBe(`${ADDON_URI}, ${BASE_URI}`);
    const task = both.body.result.task;
    expect(task.history[0].parts).toEqual([{ text: 'pay 9' }, { text: '[audit]' }, { text: '[ledger]' }]);
    const events = (await admin('GET', `/v1/runs/${task.id}/events`)).body.events;
    expect(events[0].event.payload.extensions).toEqual([ADDON_URI, BASE_URI]);

    const v03 = await rpc('message/send', v03Send('pay 10'), { 'X-A2A-Extensions': `${ADDON_URI},${BASE_URI}` }, null);
    expect(v03.body.result.kind).toBe('task');
    expect(v03.headers.get('x-a2a-extensions')).toBe(`${ADDON_URI}, ${BASE_URI}`);
    const rest = await fetch(`${stack.baseUrl}${agent.basePath}/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'A2A-Extensions': `${ADDON_URI}, ${BASE_URI}` },
      body: JSON.stringify(v1Send('pay 11')),
    });
    expect(rest.status).toBe(200);
    expect(rest.headers.get('a2a-extensions')).toBe(`${ADDON_URI}, ${BASE_URI}`);
  });
});
