import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Per-organization storage quotas: bytes of messages and artifacts (runs.stored_bytes, kept by the
 * append statement), the quota an organization's own (set by a platform key) or the deployment's
 * ORG_STORAGE_QUOTA_BYTES. Over it, new tasks and new messages are refused with a clear error on
 * every A2A binding (JSON-RPC v1.0, HTTP+JSON, v0.3, streaming too) and on the admin API, nothing
 * is stored for a refused message, usage is shown to the org's admin, and raising the quota lets
 * the organization continue.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ask', match: { text: '^ask' }, steps: [{ type: 'status', status: 'input-required', message: 'Which day?' }] },
  ],
};
const DEFAULT_QUOTA = 1_000_000;

let stack: Stack;
let db: DatabaseService;
let agent: PublishedAgent;
let orgId: string;
let orgAdminKey: string;
let rpc: A2AClient;
let rest: A2AClient;
let legacy: A2AClient;

const admin = (method: string, path: string, body?: unknown, key = stack.adminKey) => adminRequest(stack.baseUrl, key, method, path, body);

function request(text: string, opts: { messageId?: string; taskId?: string } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: opts.messageId ?? randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(opts.taskId ? { taskId: opts.taskId } : {}) },
    configuration: { returnImmediately: true },
  });
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected the call to be refused');
}

async function drain(it: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of it) void _;
}

/** Raw wire calls: the exact codes and statuses each binding answers with. */
async function jsonRpc(version: '1.0' | '0.3', method: string, params: unknown): Promise<any> {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(version === '1.0' ? { 'a2a-version': '1.0' } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  expect(res.status).toBe(200);
  return res.json();
}

async function storedState(): Promise<{ runs: number; messages: number; bytes: number }> {
  const [row] = await db.query<{ runs: number; messages: number; bytes: string }>(
    `SELECT (SELECT count(*)::int FROM runs WHERE org_id = $1) AS runs, (SELECT count(*)::int FROM messages WHERE org_id = $1) AS messages,
            (SELECT COALESCE(sum(stored_bytes), 0) FROM runs WHERE org_id = $1) AS bytes`,
    [orgId],
  );
  return { runs: row!.runs, messages: row!.messages, bytes: Number(row!.bytes) };
}

beforeAll(async () => {
  stack = await startStack({ env: { ORG_STORAGE_QUOTA_BYTES: String(DEFAULT_QUOTA) } });
  db = stack.api.get(DatabaseService);
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'quota',
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
  orgId = (await admin('GET', '/v1/organization')).body.id;
  orgAdminKey = (await admin('POST', '/v1/api-keys', { name: 'org admin', scopes: ['admin'] })).body.key;
  const url = `${stack.baseUrl}${agent.basePath}/`;
  rpc = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(url);
  rest = await new ClientFactory({ transports: [new RestTransportFactory()], preferredTransports: ['HTTP+JSON'] }).createFromUrl(url);
  legacy = new Client(new LegacyJsonRpcTransport({ endpoint: `${stack.baseUrl}${agent.basePath}` }), await rpc.getAgentCard());
});

afterAll(async () => {
  await stack?.close();
});

describe('storage quotas', () => {
  it('shows usage to the org admin; only a platform key sets a quota; bad input and unknown orgs are refused', async () => {
    const fresh = await admin('GET', '/v1/organization/usage', undefined, orgAdminKey);
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual({ orgId, storedBytes: 0, storageQuotaBytes: DEFAULT_QUOTA, quotaSource: 'default' });

    const notPlatform = await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: 10 }, orgAdminKey);
    expect([notPlatform.status, notPlatform.body.error.code]).toEqual([403, 'auth.forbidden']);
    for (const body of [{ storageQuotaBytes: -1 }, { storageQuotaBytes: 1.5 }, { storageQuotaBytes: '100' }, {}, { storageQuotaBytes: 5, extra: 1 }]) {
      const bad = await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, body);
      expect(bad.status, JSON.stringify(body)).toBeGreaterThanOrEqual(400);
      expect(bad.status, JSON.stringify(body)).toBeLessThan(500);
    }
    for (const id of [randomUUID(), 'not-a-uuid', "'; DROP TABLE runs; --"]) {
      const missing = await admin('PUT', `/v1/organizations/${encodeURIComponent(id)}/storage-quota`, { storageQuotaBytes: 10 });
      expect([missing.status, missing.body.error.code]).toEqual([404, 'org.not_found']);
    }
    // 0 = unlimited, null = back to the default
    expect((await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: 0 })).body).toMatchObject({ storageQuotaBytes: null, quotaSource: 'organization' });
    expect((await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: null })).body).toMatchObject({ storageQuotaBytes: DEFAULT_QUOTA, quotaSource: 'default' });
  });

  it('counts stored bytes by the append statement; refuses a message that alone exceeds what remains, then everything once used up, on every binding; raising the quota lets the org continue', async () => {
    const held = (await rpc.sendMessage(request('hold one'))) as Task;
    const asked = (await rpc.sendMessage(request('ask for a day'))) as Task;
    await expect.poll(async () => (await admin('GET', `/v1/runs/${asked.id}`)).body.interactions?.length ?? 0, { timeout: 10_000 }).toBe(1);
    const before = await storedState();
    expect(before.bytes).toBeGreaterThan(0);
    const usage = (await admin('GET', '/v1/organization/usage', undefined, orgAdminKey)).body;
    expect(usage.storedBytes).toBe(before.bytes);

    // room for about 300 more bytes
    const set = await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: before.bytes + 300 });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ orgId, storedBytes: before.bytes, storageQuotaBytes: before.bytes + 300, quotaSource: 'organization' });

    // a message that alone exceeds what remains: refused, nothing stored
    const big = 'hold ' + 'x'.repeat(600);
    const tooBig = await rejection(rpc.sendMessage(request(big)));
    expect(tooBig.message).toMatch(/exceeds the \d+ bytes left of the organization's storage quota/);
    expect(await storedState()).toEqual(before);

    // a small one still fits
    const small = (await rpc.sendMessage(request('hold two'))) as Task;
    const afterSmall = await storedState();
    expect(afterSmall.runs).toBe(before.runs + 1);
    expect(afterSmall.bytes).toBeGreaterThan(before.bytes);

    // used up: exactly what is stored
    await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: afterSmall.bytes });
    const full = await storedState();

    // JSON-RPC v1.0 (SDK and wire), new task and follow-up, blocking and streaming
    expect((await rejection(rpc.sendMessage(request('hold three')))).message).toMatch(/storage quota is used up/);
    await expect(drain(rpc.sendMessageStream(request('hold stream')))).rejects.toThrow(/storage quota is used up/);
    expect((await rejection(rpc.sendMessage(request('hold more', { taskId: held.id })))).message).toMatch(/storage quota/);
    const wire = await jsonRpc('1.0', 'SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold wire' }] } });
    expect(wire.error.code).toBe(-32600);
    expect(wire.error.message).toMatch(/storage quota is used up \(\d+ of \d+ bytes stored\)/);
    expect(wire.error.data).toEqual(expect.arrayContaining([expect.objectContaining({ metadata: expect.objectContaining({ quotaBytes: String(full.bytes), storedBytes: String(full.bytes) }) })]));

    // HTTP+JSON (SDK and wire): a 4xx google.rpc.Status, streaming too
    expect((await rejection(rest.sendMessage(request('hold rest')))).message).toMatch(/storage quota/);
    await expect(drain(rest.sendMessageStream(request('hold rest stream')))).rejects.toThrow(/storage quota/);
    for (const route of ['message:send', 'message:stream']) {
      const res = await fetch(`${stack.baseUrl}${agent.basePath}/${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold raw' }] } }),
      });
      expect(res.status, route).toBe(400);
      const body = (await res.json()) as any;
      expect(body.error.message, route).toMatch(/storage quota is used up/);
    }

    // v0.3 (SDK compat client and wire)
    expect((await rejection(legacy.sendMessage(request('hold legacy')))).message).toMatch(/storage quota/);
    const v03 = await jsonRpc('0.3', 'message/send', { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hold v03' }] } });
    expect(v03.error.code).toBe(-32600);
    expect(v03.error.message).toMatch(/storage quota is used up/);

    // the admin API: answering an interaction adds a message too
    const interactionId = (await admin('GET', `/v1/runs/${asked.id}`)).body.interactions[0].id;
    const answer = await admin('POST', `/v1/runs/${asked.id}/interactions/${interactionId}/responses`, { text: 'monday' });
    expect([answer.status, answer.body.error.code]).toEqual([403, 'org.storage_quota_exceeded']);
    expect(answer.body.error.details).toMatchObject({ quotaBytes: full.bytes, storedBytes: full.bytes });

    // nothing was stored for any refused message
    expect(await storedState()).toEqual(full);

    // a retry of a task created before is still that task (nothing new)
    const retryMessageId = randomUUID();
    await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: full.bytes + 1000 });
    const original = (await rpc.sendMessage(request('hold retried', { messageId: retryMessageId }))) as Task;
    const withRetried = await storedState();
    await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: withRetried.bytes });
    expect(((await rpc.sendMessage(request('hold retried', { messageId: retryMessageId }))) as Task).id).toBe(original.id);
    expect(await storedState()).toEqual(withRetried);

    // raising the quota lets the organization continue, on every binding
    const raised = await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: withRetried.bytes + 100_000 });
    expect(raised.body.storageQuotaBytes).toBe(withRetried.bytes + 100_000);
    const again = [(await rpc.sendMessage(request('hold again'))) as Task, (await rest.sendMessage(request('hold again rest'))) as Task, (await legacy.sendMessage(request('hold again legacy'))) as Task];
    expect(again.every((t) => typeof t.id === 'string' && t.id.length > 0)).toBe(true);
    expect((await admin('POST', `/v1/runs/${asked.id}/interactions/${interactionId}/responses`, { text: 'monday' })).status).toBe(200);
    const end = await storedState();
    expect(end.runs).toBe(withRetried.runs + 3);
    // the usage route tells what the runs hold (the worker may still be appending the agent's answers:
    // compare two reads of the same moment, once the log has settled)
    await expect
      .poll(async () => {
        const usage = (await admin('GET', '/v1/organization/usage', undefined, orgAdminKey)).body.storedBytes;
        return usage === (await storedState()).bytes && usage >= end.bytes;
      }, { timeout: 10_000, interval: 200 })
      .toBe(true);

    for (const t of [held, small, original, ...again]) await rpc.cancelTask({ tenant: '', id: t.id, metadata: undefined });
  });
});
