import { DatabaseService } from '#libs/db';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SendMessageRequest, Task } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { checkOutboundUrl, outboundPolicy, refusedAddress } from '#libs/push';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startPushReceiver, type ReceivedPush } from './support/push-receiver.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Push notifications end to end: configs set with the official SDK client (JSON-RPC, HTTP+JSON)
 * and with v0.3, a real HTTP receiver on loopback (allowlisted for the test), every event of a
 * scripted task delivered in log order, signed (Standard Webhooks, verified with the
 * `standardwebhooks` library), retried through failures, and the outbound guard.
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
        { type: 'message', text: 'Almost there' },
        { type: 'status', status: 'completed', message: 'Done' },
      ],
    },
    { name: 'slow', match: { text: '^slow' }, steps: [{ type: 'status', status: 'working' }, { type: 'wait', ms: 400 }, { type: 'message', text: 'late' }, { type: 'status', status: 'completed' }] },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
  ],
};
const PUSH = { capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false } };

let stack: Stack;
let agent: PublishedAgent;
let rpcUrl: string;
let receiver: Awaited<ReturnType<typeof startPushReceiver>>;
/** Webhook secrets seen in raw responses (the SDK's parsers drop the extra field). */
const secrets: string[] = [];

const captureFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  const text = await res.clone().text();
  const m = /"webhookSecret":"([^"]+)"/.exec(text);
  if (m) secrets.push(m[1]!);
  return res;
};

async function rpc(method: string, params: unknown, version?: string): Promise<any> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return res.json();
}

const admin = <T = any>(method: string, path: string) => adminRequest<T>(stack.baseUrl, stack.adminKey, method, path);

/** The sequences of a run's log that have an A2A projection (what push must deliver, in order). */
async function projectedSequences(runId: string, after = 0): Promise<number[]> {
  const events = (await admin(`GET`, `/v1/runs/${runId}/events?limit=1000&after=${after}`)).body.events as Array<{ sequence: number; event: { type: string; payload: any } }>;
  return events
    .filter((e) => e.event.type !== 'run.created' && !(e.event.type === 'message.added' && e.event.payload.message.role === 'user'))
    .map((e) => e.sequence);
}

function verified(r: ReceivedPush, secret: string): boolean {
  new Webhook(secret).verify(r.body, { 'webhook-id': r.headers['webhook-id']!, 'webhook-timestamp': r.headers['webhook-timestamp']!, 'webhook-signature': r.headers['webhook-signature']! });
  return true;
}

const seqOf = (r: ReceivedPush) => Number(r.headers['x-a2a-sequence']);
const send = (text: string, config?: Record<string, unknown>, returnImmediately = true) =>
  SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    configuration: { returnImmediately, ...(config ? { taskPushNotificationConfig: config } : {}) },
  });

beforeAll(async () => {
  receiver = await startPushReceiver((r) => behaviour(r));
  stack = await startStack({
    env: {
      PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret',
      PUSH_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
      PUSH_SWEEP_INTERVAL_MS: '100',
      PUSH_RETRY_BASE_MS: '50',
      PUSH_RETRY_MAX_DELAY_MS: '400',
      PUSH_TIMEOUT_MS: '2000',
    },
  });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'pusher', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'], a2a: PUSH });
  rpcUrl = `${stack.baseUrl}${agent.basePath}`;
});

afterAll(async () => {
  await stack?.close();
  await receiver?.close();
});

/** What the receiver answers, per path (tests change it). */
let behaviour: (r: ReceivedPush) => { status: number; headers?: Record<string, string> } = () => ({ status: 200 });

describe('push notifications with the SDK client', () => {
  it('JSON-RPC: a config inside SendMessage gets every event of the task in log order, signed, with token and Authorization', async () => {
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: captureFetch })] }).createFromUrl(`${rpcUrl}/`);
    const path = '/rpc-send';
    const task = (await client.sendMessage(send('multi push', { url: receiver.url(path), token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 's3cret' } }))) as Task;
    // the secret of a config set inside SendMessage is shown by the caller's first list, once
    const listed = await rpc('ListTaskPushNotificationConfigs', { taskId: task.id }, '1.0');
    const secret: string = listed.result.configs[0].webhookSecret;
    expect(secret).toMatch(/^whsec_/);
    expect((await rpc('ListTaskPushNotificationConfigs', { taskId: task.id }, '1.0')).result.configs[0].webhookSecret).toBeUndefined();

    await receiver.waitFor(() => receiver.unique(path).some((r) => r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED'));
    const got = receiver.unique(path);
    expect(got.map(seqOf)).toEqual(await projectedSequences(task.id));
    for (const r of got) {
      expect(verified(r, secret)).toBe(true);
      expect(r.headers['x-a2a-notification-token']).toBe('tok-1');
      expect(r.headers.authorization).toBe('Bearer s3cret');
      const [item] = Object.values(r.json) as Array<{ taskId: string; metadata: { sequence: number } }>;
      expect([item!.taskId, item!.metadata.sequence]).toEqual([task.id, seqOf(r)]);
    }
    expect(got.map((r) => Object.keys(r.json)[0])).toEqual(['statusUpdate', 'artifactUpdate', 'artifactUpdate', 'artifactUpdate', 'statusUpdate', 'statusUpdate']);
    // the SDK reads it back (credentials are never returned)
    const cfgs = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    expect(cfgs.configs.map((c) => [c.url, c.token, c.authentication?.scheme, c.authentication?.credentials ?? ''])).toEqual([[receiver.url(path), 'tok-1', 'Bearer', '']]);
  });

  it('HTTP+JSON: Create / Get / List / Delete on a running task; deliveries start at the config and stop when it is deleted', async () => {
    const client = await new ClientFactory({ transports: [new RestTransportFactory({ fetchImpl: captureFetch })] }).createFromUrl(`${rpcUrl}/`);
    const task = (await client.sendMessage(send('slow one'))) as Task;
    const lastBefore = (await admin('GET', `/v1/runs/${task.id}`)).body.run.lastSequence as number;
    const before = secrets.length;
    const created = await client.createTaskPushNotificationConfig({ tenant: '', id: 'cfg-rest', taskId: task.id, url: receiver.url('/rest'), token: 'tok-2', authentication: undefined });
    expect(created).toMatchObject({ id: 'cfg-rest', taskId: task.id, url: receiver.url('/rest') });
    const secret = secrets[before]!;
    expect(secret).toMatch(/^whsec_/);
    await receiver.waitFor(() => receiver.unique('/rest').some((r) => r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED'));
    const got = receiver.unique('/rest');
    // everything from the task's sequence when the config was created (at or after lastBefore)
    const projected = await projectedSequences(task.id, lastBefore);
    expect(got.length).toBeGreaterThan(0);
    expect(got.map(seqOf)).toEqual(projected.slice(projected.length - got.length));
    expect(got.every((r) => verified(r, secret))).toBe(true);
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'cfg-rest' })).toMatchObject({ id: 'cfg-rest', token: 'tok-2' });

    // delete is idempotent and stops deliveries
    const held = (await client.sendMessage(send('hold on'))) as Task;
    await client.createTaskPushNotificationConfig({ tenant: '', id: 'cfg-del', taskId: held.id, url: receiver.url('/deleted'), token: '', authentication: undefined });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: held.id, id: 'cfg-del' });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: held.id, id: 'cfg-del' });
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId: held.id, pageSize: 0, pageToken: '' })).configs).toEqual([]);
    const sentBefore = receiver.unique('/deleted').length;
    await client.cancelTask({ tenant: '', id: held.id, metadata: undefined });
    await new Promise((r) => setTimeout(r, 400));
    expect(receiver.unique('/deleted').length).toBe(sentBefore);
  });

  it('v0.3 with the SDK compat client: set / get / list / delete through tasks/pushNotificationConfig/*', async () => {
    const card = await (await new ClientFactory().createFromUrl(`${rpcUrl}/`)).getAgentCard();
    const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: rpcUrl }), card);
    expect(legacy.protocolVersion).toBe('0.3');
    const task = (await legacy.sendMessage(send('hold legacy'))) as Task;
    const set = await legacy.createTaskPushNotificationConfig({ tenant: '', id: 'legacy', taskId: task.id, url: receiver.url('/legacy'), token: 'tok-l', authentication: undefined });
    expect(set).toMatchObject({ id: 'legacy', taskId: task.id, url: receiver.url('/legacy'), token: 'tok-l' });
    expect(await legacy.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'legacy' })).toMatchObject({ id: 'legacy' });
    expect((await legacy.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs.map((c) => c.id)).toEqual(['legacy']);
    await legacy.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    await receiver.waitFor(() => receiver.unique('/legacy').some((r) => r.json.status?.state === 'canceled'));
    expect(receiver.unique('/legacy').every((r) => r.json.kind === 'status-update')).toBe(true);
    await legacy.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'legacy' });
    expect((await legacy.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs).toEqual([]);
  });

  it('v0.3: tasks/pushNotificationConfig/set|get|list|delete, and v0.3-shaped deliveries', async () => {
    const sent = await rpc('message/send', { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'slow v03' }] }, configuration: { blocking: false } });
    const taskId: string = sent.result.id;
    const set = await rpc('tasks/pushNotificationConfig/set', { taskId, pushNotificationConfig: { id: 'v03', url: receiver.url('/v03'), token: 'tok-3' } });
    expect(set.result).toMatchObject({ taskId, pushNotificationConfig: { id: 'v03', url: receiver.url('/v03'), token: 'tok-3' } });
    const secret: string = set.result.webhookSecret;
    expect((await rpc('tasks/pushNotificationConfig/get', { id: taskId, pushNotificationConfigId: 'v03' })).result.pushNotificationConfig.id).toBe('v03');
    expect((await rpc('tasks/pushNotificationConfig/list', { id: taskId })).result).toHaveLength(1);
    await receiver.waitFor(() => receiver.unique('/v03').some((r) => r.json.final === true));
    const got = receiver.unique('/v03');
    expect(got.every((r) => verified(r, secret) && r.json.kind === 'status-update' && r.json.taskId === taskId)).toBe(true);
    expect(got.at(-1)!.json.status.state).toBe('completed');
    expect((await rpc('tasks/pushNotificationConfig/delete', { id: taskId, pushNotificationConfigId: 'v03' })).result).toBeNull();
  });
});

describe('delivery faults', () => {
  it('a receiver failing with 500, then 503 with Retry-After, then 200 gets every event exactly once in order after dedupe', async () => {
    let n = 0;
    behaviour = (r) => {
      if (r.path !== '/flaky') return { status: 200 };
      n++;
      if (n <= 3) return { status: 500 };
      if (n === 4) return { status: 503, headers: { 'retry-after': '1' } };
      return { status: 200 };
    };
    try {
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${rpcUrl}/`);
      const task = (await client.sendMessage(send('multi flaky', { url: receiver.url('/flaky') }))) as Task;
      await receiver.waitFor(() => receiver.unique('/flaky').some((r) => r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED' && n > 4), 15_000);
      const all = receiver.received.filter((r) => r.path === '/flaky');
      const unique = receiver.unique('/flaky');
      expect(unique.map(seqOf)).toEqual(await projectedSequences(task.id));
      // the first event was tried 5 times under one webhook-id; Retry-After held it back ~1 s
      const first = all.filter((r) => r.headers['webhook-id'] === unique[0]!.headers['webhook-id']);
      expect(first).toHaveLength(5);
      expect(first[4]!.at - first[3]!.at).toBeGreaterThanOrEqual(380);
      const [cfg] = (await admin('GET', `/v1/runs/${task.id}/push-configs`)).body.configs;
      expect(cfg).toMatchObject({ status: 'done', lastError: null, attempts: 0 });
      expect(cfg.deliveries.filter((d: any) => d.statusCode === 500)).toHaveLength(3);
      expect(cfg.deliveries.some((d: any) => d.statusCode === 503)).toBe(true);
    } finally {
      behaviour = () => ({ status: 200 });
    }
  }, 20_000);

  it('many configs delivered together (batched claims and records): each gets exactly its own log in order, a failing one does not hold the others back', async () => {
    let failures = 0;
    behaviour = (r) => {
      if (r.path !== '/batch-flaky') return { status: 200 };
      failures++;
      return failures <= 2 ? { status: 500 } : { status: 200 };
    };
    try {
      const tasks = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          const path = i === 0 ? '/batch-flaky' : `/batch-${i}`;
          const res = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'multi batch' }] }, configuration: { returnImmediately: true, taskPushNotificationConfig: { url: receiver.url(path) } } }, '1.0');
          return { id: res.result.task.id as string, path };
        }),
      );
      const done = (path: string) => receiver.unique(path).some((r) => r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED');
      await receiver.waitFor(() => tasks.every((t) => done(t.path)), 15_000);
      for (const t of tasks) {
        const got = receiver.unique(t.path);
        expect(got.map(seqOf)).toEqual(await projectedSequences(t.id));
        expect(got.every((r) => r.headers['x-a2a-task-id'] === t.id && r.headers['webhook-id'] === `msg_${r.headers['webhook-id']!.split('_')[1]}_${seqOf(r)}`)).toBe(true);
      }
      expect(failures).toBeGreaterThan(2);
      const [flaky] = (await admin('GET', `/v1/runs/${tasks[0]!.id}/push-configs`)).body.configs;
      expect(flaky).toMatchObject({ status: 'done', attempts: 0, lastError: null });
      expect(flaky.deliveries.filter((d: any) => d.statusCode === 500)).toHaveLength(2);
    } finally {
      behaviour = () => ({ status: 200 });
    }
  }, 20_000);

  it('entries committed while a delivery is in flight join its pass: delivered right after it, in order, recorded with it', async () => {
    let first = true;
    behaviour = (r) => {
      if (r.path !== '/slow-receiver' || !first) return { status: 200 };
      first = false;
      // the run appends its message and completion (400 ms in) while this first delivery waits
      // (within the pass's send window: PUSH_TIMEOUT_MS 2 s here leaves 1 s)
      return { status: 200, delayMs: 800 };
    };
    try {
      const res = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'slow joiner' }] }, configuration: { returnImmediately: true, taskPushNotificationConfig: { url: receiver.url('/slow-receiver') } } }, '1.0');
      const taskId = res.result.task.id as string;
      await receiver.waitFor(() => receiver.unique('/slow-receiver').some((r) => r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED'), 15_000);
      const got = receiver.unique('/slow-receiver');
      expect(got.map(seqOf)).toEqual(await projectedSequences(taskId));
      expect(got.length).toBeGreaterThanOrEqual(3);
      // one pass, one record: every attempt carries the same record transaction time
      const db = stack.api.get(DatabaseService);
      await expect
        .poll(async () => (await db.query<{ n: string }>('SELECT count(*) AS n FROM push_deliveries WHERE run_id = $1', [taskId]))[0]!.n, { timeout: 5_000, interval: 50 })
        .toBe(String(got.length));
      const times = await db.query<{ t: string }>('SELECT DISTINCT attempted_at::text AS t FROM push_deliveries WHERE run_id = $1', [taskId]);
      expect(times).toHaveLength(1);
    } finally {
      behaviour = () => ({ status: 200 });
    }
  }, 20_000);

  it('410 Gone stops the config; a redirect is a failure and is not followed', async () => {
    behaviour = (r) => (r.path === '/gone' ? { status: 410 } : r.path === '/redirect' ? { status: 302, headers: { location: 'http://10.0.0.1/steal' } } : { status: 200 });
    try {
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${rpcUrl}/`);
      const gone = (await client.sendMessage(send('multi gone', { url: receiver.url('/gone') }))) as Task;
      const redirected = (await client.sendMessage(send('multi redirect', { url: receiver.url('/redirect') }))) as Task;
      await receiver.waitFor(() => receiver.received.filter((r) => r.path === '/redirect').length >= 2);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received.filter((r) => r.path === '/gone')).toHaveLength(1);
      const [g] = (await admin('GET', `/v1/runs/${gone.id}/push-configs`)).body.configs;
      expect(g).toMatchObject({ status: 'gone', lastError: 'HTTP 410' });
      const [rd] = (await admin('GET', `/v1/runs/${redirected.id}/push-configs`)).body.configs;
      expect(rd.deliveries[0]).toMatchObject({ statusCode: 302, error: 'redirect (302) not followed' });
      expect(rd.cursor).toBeLessThan((await projectedSequences(redirected.id))[0]!);
    } finally {
      behaviour = () => ({ status: 200 });
    }
  });
});

describe('the outbound guard', () => {
  it('refuses private, loopback, link-local (metadata), multicast and unspecified addresses unless allowlisted', async () => {
    const strict = outboundPolicy([]);
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '224.0.0.1', '0.0.0.0', '::1', 'fe80::1', 'fd00:ec2::254', '::ffff:10.0.0.1']) {
      expect(refusedAddress(a, strict), a).not.toBeNull();
    }
    expect(refusedAddress('93.184.216.34', strict)).toBeNull();
    expect(refusedAddress('127.0.0.1', outboundPolicy(['127.0.0.0/8']))).toBeNull();
    await expect(checkOutboundUrl('http://localhost:9/x', strict)).rejects.toMatchObject({ code: 'push.url_refused', message: expect.stringContaining('localhost resolves to 127.0.0.1 is a loopback address') });
    await expect(checkOutboundUrl('file:///etc/passwd', strict)).rejects.toMatchObject({ code: 'push.url_refused', message: expect.stringContaining('scheme file') });
    await expect(checkOutboundUrl('http://user:pw@example.com/', strict)).rejects.toMatchObject({ code: 'push.url_refused' });
    await expect(checkOutboundUrl('http://[::ffff:169.254.169.254]/latest', strict)).rejects.toMatchObject({ code: 'push.url_refused', message: expect.stringContaining('linkLocal') });
  });

  it('a config pointing at a refused address is InvalidParams on every binding and version, and nothing is stored', async () => {
    const sent = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold x' }] }, configuration: { returnImmediately: true } }, '1.0');
    const taskId: string = sent.result.task.id;
    for (const url of ['http://10.1.2.3/x', 'http://169.254.169.254/latest/meta-data', 'file:///etc/passwd', 'gopher://127.0.0.1/']) {
      const v1 = await rpc('CreateTaskPushNotificationConfig', { taskId, url }, '1.0');
      expect(v1.error, url).toMatchObject({ code: -32602, message: expect.stringContaining('URL refused') });
      const v03 = await rpc('tasks/pushNotificationConfig/set', { taskId, pushNotificationConfig: { url } });
      expect(v03.error.code).toBe(-32602);
      const rest = await fetch(`${rpcUrl}/tasks/${taskId}/pushNotificationConfigs`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ url }) });
      expect(rest.status).toBe(400);
    }
    const inSend = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'multi' }] }, configuration: { taskPushNotificationConfig: { url: 'http://192.168.0.10/hook' } } }, '1.0');
    expect(inSend.error).toMatchObject({ code: -32602 });
    expect((await admin('GET', `/v1/runs/${taskId}/push-configs`)).body.configs).toEqual([]);
    await rpc('CancelTask', { id: taskId }, '1.0');
  });

  it('an unknown config is TaskNotFound; an eleventh config on a task is refused (PUSH_MAX_CONFIGS_PER_TASK)', async () => {
    const taskId: string = (await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold configs' }] }, configuration: { returnImmediately: true } }, '1.0')).result.task.id;
    expect((await rpc('GetTaskPushNotificationConfig', { taskId, id: 'nope' }, '1.0')).error).toMatchObject({ code: -32001, message: expect.stringContaining('no push notification config nope') });
    for (let i = 0; i < 10; i++) expect((await rpc('CreateTaskPushNotificationConfig', { taskId, id: `c${i}`, url: receiver.url('/many') }, '1.0')).result.id).toBe(`c${i}`);
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId, id: 'c10', url: receiver.url('/many') }, '1.0')).error).toMatchObject({ code: -32600, message: expect.stringContaining('already has 10') });
    // setting an existing id again updates it
    expect((await rpc('CreateTaskPushNotificationConfig', { taskId, id: 'c3', url: receiver.url('/many'), token: 't' }, '1.0')).result).toMatchObject({ id: 'c3', token: 't' });
    await rpc('CancelTask', { id: taskId }, '1.0');
  });

  it('an agent that does not declare push refuses every push method with PushNotificationNotSupported', async () => {
    const plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'no-push', runtime: RUNTIME });
    const url = `${stack.baseUrl}${plain.basePath}`;
    const call = async (method: string, params: unknown, version?: string) =>
      (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}) }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json()) as any;
    expect((await call('CreateTaskPushNotificationConfig', { taskId: 'x', url: receiver.url() }, '1.0')).error.code).toBe(-32003);
    expect((await call('tasks/pushNotificationConfig/list', { id: 'x' })).error.code).toBe(-32003);
    const card = (await (await fetch(plain.cardUrl)).json()) as any;
    expect(card.capabilities.pushNotifications).toBe(false);
    const pushCard = (await (await fetch(agent.cardUrl)).json()) as any;
    expect(pushCard.capabilities.pushNotifications).toBe(true);
  });
});

/**
 * IPv6 spellings of an IPv4 address are judged by that address, end to end: on a deployment
 * without PUSH_ALLOWED_CIDRS, configs pointing at loopback or the metadata service through
 * IPv4-compatible, IPv4-mapped, NAT64 or 6to4 literals are refused like the IPv4 literal.
 */
describe('push URLs with an embedded IPv4 address (no allowlist)', () => {
  let strict: Stack;
  let url: string;
  const call = async (method: string, params: unknown, version?: string) =>
    (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}) }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json()) as any;

  beforeAll(async () => {
    strict = await startStack({ worker: false, env: { PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret' } });
    const a = await publishAgent(strict.baseUrl, strict.adminKey, { slug: 'strict-pusher', runtime: RUNTIME, transports: ['JSONRPC', 'HTTP+JSON'], a2a: PUSH });
    url = `${strict.baseUrl}${a.basePath}`;
  });
  afterAll(async () => {
    await strict?.close();
  });

  it('http://[::127.0.0.1]/ and http://[::ffff:7f00:1]/ (and NAT64 / 6to4 forms) are refused on every binding; nothing is stored', async () => {
    const sent = await call('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold v6' }] }, configuration: { returnImmediately: true } }, '1.0');
    const taskId: string = sent.result.task.id;
    for (const target of ['http://[::127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'http://[::ffff:127.0.0.1]:8080/hook', 'http://[64:ff9b::a9fe:a9fe]/latest/meta-data', 'http://[2002:7f00:1::1]/']) {
      const v1 = await call('CreateTaskPushNotificationConfig', { taskId, url: target }, '1.0');
      expect(v1.error, target).toMatchObject({ code: -32602, message: expect.stringMatching(/URL refused: .* is a (loopback|linkLocal) address \(.+ as .+\)/) });
      const v03 = await call('tasks/pushNotificationConfig/set', { taskId, pushNotificationConfig: { url: target } });
      expect(v03.error?.code, target).toBe(-32602);
      const rest = await fetch(`${url}/tasks/${taskId}/pushNotificationConfigs`, { method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify({ url: target }) });
      expect(rest.status, target).toBe(400);
    }
    const inSend = await call('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold v6 inline' }] }, configuration: { taskPushNotificationConfig: { url: 'http://[::127.0.0.1]/' } } }, '1.0');
    expect(inSend.error).toMatchObject({ code: -32602, message: expect.stringContaining('loopback') });
    expect((await adminRequest(strict.baseUrl, strict.adminKey, 'GET', `/v1/runs/${taskId}/push-configs`)).body.configs).toEqual([]);
    // the same literal check refuses them directly too
    await expect(checkOutboundUrl('http://[::127.0.0.1]/', outboundPolicy([]))).rejects.toMatchObject({ code: 'push.url_refused' });
  });
});

