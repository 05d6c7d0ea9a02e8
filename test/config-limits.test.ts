import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * What an organization writes besides its runs is bounded too (issue #43 row 8: "quotas count what
 * is written, by any writer"): runtime secrets by count (RUNTIME_SECRETS_MAX_PER_ORG) and by the
 * bytes of each value (4096, the contract's), push configs by the bytes of each one
 * (PUSH_CONFIG_MAX_BYTES) and by how many an organization has in delivery
 * (PUSH_MAX_ACTIVE_CONFIGS_PER_ORG), beside the per-task count. Each refusal is a 4xx that says
 * which limit, and nothing is stored.
 */
const MAX_SECRETS = 3;
const MAX_PUSH_BYTES = 512;
const MAX_ACTIVE_PUSH = 3;

let stack: Stack;
let db: DatabaseService;
let agent: PublishedAgent;
let orgId: string;

const admin = (method: string, path: string, body?: unknown) => adminRequest(stack.baseUrl, stack.adminKey, method, path, body);

async function rpc(method: string, params: unknown): Promise<any> {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return res.json();
}

async function heldTask(): Promise<string> {
  const sent = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true } });
  return sent.result.task.id as string;
}

beforeAll(async () => {
  stack = await startStack({
    env: {
      RUNTIME_SECRET_ENCRYPTION_SECRET: 'config-limits-test-encryption-secret',
      RUNTIME_SECRETS_MAX_PER_ORG: String(MAX_SECRETS),
      PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret',
      PUSH_ALLOWED_CIDRS: '127.0.0.0/8',
      PUSH_CONFIG_MAX_BYTES: String(MAX_PUSH_BYTES),
      PUSH_MAX_ACTIVE_CONFIGS_PER_ORG: String(MAX_ACTIVE_PUSH),
      // nothing listens there: the configs stay active (retrying) for the whole test
      PUSH_RETRY_BASE_MS: '60000',
    },
  });
  db = stack.api.get(DatabaseService);
  orgId = (await admin('GET', '/v1/organization')).body.id;
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'limits',
    runtime: { kind: 'scripted', rules: [{ name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] },
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false } },
  });
});

afterAll(async () => {
  await stack?.close();
});

describe('runtime secrets: count and bytes', () => {
  it(`an organization stores at most RUNTIME_SECRETS_MAX_PER_ORG (${MAX_SECRETS}) secrets, each value at most 4096 bytes`, async () => {
    const tooLong = await admin('POST', '/v1/runtime-secrets', { name: 'big', value: 'x'.repeat(4097) });
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.error.code).toBe('request.invalid');
    expect((await admin('POST', '/v1/runtime-secrets', { name: 'max', value: 'x'.repeat(4096) })).status).toBe(201);

    // concurrent creations cannot pass the count together
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => admin('POST', '/v1/runtime-secrets', { name: `s${i}`, value: `value-${i}` })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_SECRETS - 1);
    const refused = results.filter((r) => r.status !== 201);
    for (const r of refused) {
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({ code: 'runtime_secret.conflict', details: { limit: MAX_SECRETS } });
      expect(r.body.error.message).toMatch(/has 3 runtime secrets, the most this deployment allows \(RUNTIME_SECRETS_MAX_PER_ORG 3\)/);
    }
    const [count] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM runtime_secrets WHERE org_id = $1`, [orgId]);
    expect(count!.n).toBe(MAX_SECRETS);

    // a name that exists is still the name's conflict; rotating is not creating; deleting makes room
    const dup = await admin('POST', '/v1/runtime-secrets', { name: 'max', value: 'again' });
    expect([dup.status, dup.body.error.message]).toEqual([409, expect.stringContaining('a runtime secret named max exists')]);
    expect((await admin('PUT', '/v1/runtime-secrets/max', { value: 'rotated' })).status).toBe(200);
    expect((await admin('DELETE', '/v1/runtime-secrets/max')).status).toBe(204);
    expect((await admin('POST', '/v1/runtime-secrets', { name: 'after', value: 'fits' })).status).toBe(201);
  });
});

describe('push configs: bytes and how many are in delivery', () => {
  it(`a config over PUSH_CONFIG_MAX_BYTES (${MAX_PUSH_BYTES}) is InvalidParams on every binding, nothing stored`, async () => {
    const taskId = await heldTask();
    const url = 'http://127.0.0.1:9/hook';
    const token = 't'.repeat(MAX_PUSH_BYTES);
    const v1 = await rpc('CreateTaskPushNotificationConfig', { taskId, url, token });
    expect(v1.error).toMatchObject({ code: -32602, message: expect.stringContaining(`at most ${MAX_PUSH_BYTES} (PUSH_CONFIG_MAX_BYTES)`) });
    const credentials = await rpc('CreateTaskPushNotificationConfig', { taskId, url, authentication: { scheme: 'Bearer', credentials: 'c'.repeat(MAX_PUSH_BYTES) } });
    expect(credentials.error.code).toBe(-32602);
    const rest = await fetch(`${stack.baseUrl}${agent.basePath}/tasks/${taskId}/pushNotificationConfigs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ url, token }),
    });
    expect(rest.status).toBe(400);
    const inSend = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true, taskPushNotificationConfig: { url, token } } });
    expect(inSend.error.code).toBe(-32602);
    const [count] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM push_configs WHERE org_id = $1`, [orgId]);
    expect(count!.n).toBe(0);
    // one that fits
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId, url, token: 't'.repeat(100) })).result.url).toBe(url);
    await rpc('CancelTask', { id: taskId });
  });

  it(`an organization has at most PUSH_MAX_ACTIVE_CONFIGS_PER_ORG (${MAX_ACTIVE_PUSH}) configs in delivery; ended ones make room`, async () => {
    await db.query(`UPDATE push_configs SET status = 'done' WHERE org_id = $1`, [orgId]);
    const tasks = [await heldTask(), await heldTask()];
    const url = 'http://127.0.0.1:9/hook';
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[0], id: 'a', url })).result.id).toBe('a');
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[0], id: 'b', url })).result.id).toBe('b');
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[1], id: 'c', url })).result.id).toBe('c');
    const over = await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[1], id: 'd', url });
    expect(over.error).toMatchObject({ code: -32600, message: expect.stringContaining(`already has ${MAX_ACTIVE_PUSH} push notification configs in delivery (PUSH_MAX_ACTIVE_CONFIGS_PER_ORG)`) });
    // updating one of them adds none
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[1], id: 'c', url, token: 'updated' })).result.token).toBe('updated');
    // a config that ended (delivered its task's end, or gave up) is not in delivery
    await db.query(`UPDATE push_configs SET status = 'done' WHERE org_id = $1 AND config_id = 'a'`, [orgId]);
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId: tasks[1], id: 'd', url })).result.id).toBe('d');
    for (const id of tasks) await rpc('CancelTask', { id });
  });
});
