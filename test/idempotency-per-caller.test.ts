import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { SendMessageRequest, TaskState, type Message, type StreamResponse, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Idempotency per caller: SendMessage / SendStreamingMessage dedupe on (org, agent, caller,
 * messageId), follow-up messages on (org, agent, sender, messageId). Driven by the official SDK
 * client as both callers, on JSON-RPC v1.0, HTTP+JSON and v0.3, blocking and streaming: a second
 * caller reusing the first caller's (predictable) messageId gets its own task with its own text,
 * never the first caller's history or artifacts; the same caller retrying gets the same task, and
 * the database holds one run per caller.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { name: 'ask', match: { text: '^book' }, steps: [{ type: 'status', status: 'input-required', message: 'Which day?' }] },
    {
      name: 'work',
      match: { text: '.' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'artifact', name: 'result', content: { text: 'artifact of {{input}}' } },
        { type: 'message', text: 'reply to {{input}}' },
        { type: 'status', status: 'completed' },
      ],
    },
  ],
};
const A2A = { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } };
const TRANSPORTS = ['JSONRPC', 'HTTP+JSON'] as const;
const AUDIENCE = 'idempotency-test';
const KID = 'k1';

let stack: Stack;
let db: DatabaseService;
let keyed: PublishedAgent;
let open: PublishedAgent;
let guarded: PublishedAgent;
let issuerServer: http.Server;
let issuer: string;
let signingKey: CryptoKey;
const keys = { a: '', b: '', all: '' };
const tokens = { alice: '', bob: '', ops: '' };

async function token(sub: string, scope = 'a2a.invoke'): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ scope }).setProtectedHeader({ alg: 'ES256', kid: KID }).setIssuer(issuer).setAudience(AUDIENCE).setSubject(sub).setIssuedAt(now).setExpirationTime(now + 600).sign(signingKey);
}

async function newKey(name: string, scopes: string[]): Promise<string> {
  const r = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name, scopes });
  expect(r.status).toBe(201);
  return r.body.key as string;
}

type Binding = 'jsonrpc' | 'rest' | 'v0.3';

/** A fetch that adds the caller's credentials to every request of the SDK. */
function withHeaders(headers: Record<string, string>): typeof fetch {
  return (input, init) => fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), ...headers } });
}

/** An SDK client of `agent` on `binding`, sending `headers` (credentials; none = anonymous). */
async function sdk(agent: PublishedAgent, binding: Binding, headers: Record<string, string>): Promise<A2AClient> {
  const url = `${stack.baseUrl}${agent.basePath}/`;
  const fetchImpl = withHeaders(headers);
  if (binding === 'jsonrpc') return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] }).createFromUrl(url);
  if (binding === 'rest') return new ClientFactory({ transports: [new RestTransportFactory({ fetchImpl })], preferredTransports: ['HTTP+JSON'] }).createFromUrl(url);
  const card = await (await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] }).createFromUrl(url)).getAgentCard();
  const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: `${stack.baseUrl}${agent.basePath}`, fetchImpl }), card);
  expect(legacy.protocolVersion).toBe('0.3');
  return legacy;
}

function request(text: string, messageId: string, opts: { taskId?: string; returnImmediately?: boolean } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId, role: 'ROLE_USER', parts: [{ text, mediaType: 'text/plain' }], ...(opts.taskId ? { taskId: opts.taskId } : {}) },
    configuration: opts.returnImmediately ? { returnImmediately: true } : {},
  });
}

type Textual = { parts: Array<{ content?: { $case: string; value: unknown } }> };
const textOf = (m: Textual) => m.parts.map((p) => (p.content?.$case === 'text' ? String(p.content.value) : '')).join('');

function asTask(r: Task | Message): Task {
  expect('messageId' in r, 'expected a Task, got a Message').toBe(false);
  return r as Task;
}

/** Everything a task shows that could carry another caller's content: history, status message, artifacts. */
function contentOf(t: Task): string[] {
  return [...t.history.map(textOf), ...(t.status?.message ? [textOf(t.status.message)] : []), ...t.artifacts.flatMap((a) => a.parts.map((p) => textOf({ parts: [p] })))];
}

/** Sends blocking, or streams to the end; returns the task id every event named and the task as GetTask then shows it. */
async function send(client: A2AClient, mode: 'blocking' | 'streaming', text: string, messageId: string): Promise<{ taskId: string; task: Task; streamed: string[] }> {
  if (mode === 'blocking') {
    const task = asTask(await client.sendMessage(request(text, messageId)));
    return { taskId: task.id, task, streamed: [] };
  }
  const ids = new Set<string>();
  const streamed: string[] = [];
  for await (const ev of client.sendMessageStream(request(text, messageId)) as AsyncIterable<StreamResponse>) {
    const p = ev.payload!;
    if (p.$case === 'task') {
      ids.add(p.value.id);
      streamed.push(...contentOf(p.value));
    } else if (p.$case === 'statusUpdate') {
      ids.add(p.value.taskId);
      if (p.value.status?.message) streamed.push(textOf(p.value.status.message));
    } else if (p.$case === 'artifactUpdate') {
      ids.add(p.value.taskId);
      streamed.push(...p.value.artifact!.parts.map((part) => textOf({ parts: [part] })));
    } else if (p.$case === 'message') {
      streamed.push(textOf(p.value));
    }
  }
  expect(ids.size, 'every stream event names one task').toBe(1);
  const taskId = [...ids][0]!;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const task = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
    if (task.status?.state === TaskState.TASK_STATE_COMPLETED || Date.now() > deadline) return { taskId, task, streamed };
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function runsWith(agent: PublishedAgent, messageId: string): Promise<Array<{ id: string; createdBy: string | null }>> {
  return db.query(`SELECT id, created_by AS "createdBy" FROM runs WHERE agent_id = $1 AND origin_message_id = $2 ORDER BY created_at`, [agent.agentId, messageId]);
}

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  signingKey = pair.privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  issuerServer = http.createServer((req, res) => {
    const body = req.url === '/.well-known/openid-configuration' ? { issuer, jwks_uri: `${issuer}/jwks` } : req.url === '/jwks' ? { keys: [jwk] } : null;
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => issuerServer.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(issuerServer.address() as AddressInfo).port}`;
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000', JWT_ISSUER_ALLOWED_CIDRS: '127.0.0.0/8' } });
  db = stack.api.get(DatabaseService);
  keyed = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'keyed', runtime: RUNTIME, transports: [...TRANSPORTS], security: { scheme: 'apiKey' }, a2a: A2A });
  open = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'open', runtime: RUNTIME, transports: [...TRANSPORTS], a2a: A2A });
  guarded = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'guarded',
    runtime: RUNTIME,
    transports: [...TRANSPORTS],
    a2a: A2A,
    security: { scheme: 'jwt', issuer, audience: AUDIENCE, requiredScopes: ['a2a.invoke'] } as never,
  });
  keys.a = await newKey('caller a', ['a2a:invoke']);
  keys.b = await newKey('caller b', ['a2a:invoke']);
  keys.all = await newKey('operator', ['a2a:invoke', 'a2a:all-tasks']);
  tokens.alice = await token('alice');
  tokens.bob = await token('bob');
  tokens.ops = await token('ops', 'a2a.invoke a2a:all-tasks');
});

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => issuerServer?.close(() => r()));
});

/** Two callers of one agent: A goes first, B reuses A's messageId. */
interface Pair {
  name: string;
  agent: () => PublishedAgent;
  a: () => Record<string, string>;
  b: () => Record<string, string>;
}
const PAIRS: Pair[] = [
  { name: 'two API keys of one org', agent: () => keyed, a: () => ({ 'x-api-key': keys.a }), b: () => ({ 'x-api-key': keys.b }) },
  { name: 'two JWT subjects', agent: () => guarded, a: () => ({ authorization: `Bearer ${tokens.alice}` }), b: () => ({ authorization: `Bearer ${tokens.bob}` }) },
  { name: 'a keyed caller, then an anonymous one', agent: () => open, a: () => ({ 'x-api-key': keys.a }), b: () => ({}) },
  { name: 'an anonymous caller, then a keyed one', agent: () => open, a: () => ({}), b: () => ({ 'x-api-key': keys.b }) },
];
const BINDINGS: Binding[] = ['jsonrpc', 'rest', 'v0.3'];
const MODES = ['blocking', 'streaming'] as const;
const CASES = PAIRS.flatMap((pair, p) => BINDINGS.flatMap((binding) => MODES.map((mode) => ({ pair, p, binding, mode }))));

describe('SendMessage is idempotent per caller, not per messageId', () => {
  it.each(CASES)('$pair.name, $binding, $mode: B gets its own task; A retrying gets its own task back; one run each', async ({ pair, p, binding, mode }) => {
    const agent = pair.agent();
    // predictable, as clients make them
    const messageId = `m-1-${p}-${binding}-${mode}`;
    const alpha = `alpha ${randomUUID()}`;
    const bravo = `bravo ${randomUUID()}`;
    const a = await sdk(agent, binding, pair.a());
    const b = await sdk(agent, binding, pair.b());

    const first = await send(a, mode, alpha, messageId);
    expect(contentOf(first.task)).toEqual(expect.arrayContaining([alpha, `reply to ${alpha}`, `artifact of ${alpha}`]));

    const theirs = await send(b, mode, bravo, messageId);
    expect(theirs.taskId).not.toBe(first.taskId);
    const seenByB = [...contentOf(theirs.task), ...theirs.streamed];
    expect(seenByB.some((t) => t.includes(alpha)), `B saw A's content: ${JSON.stringify(seenByB)}`).toBe(false);
    expect(theirs.task.history.map(textOf)).toEqual([bravo, `reply to ${bravo}`]);
    expect(contentOf(theirs.task)).toContain(`artifact of ${bravo}`);
    if (mode === 'streaming') expect(theirs.streamed).toContain(`artifact of ${bravo}`);

    // the same caller retrying: the same task, nothing new (its text is the first one's). Anonymous
    // callers share one owner, so one is told from another by its message only: its retry is the
    // same message, and another text under the messageId is a conflict (issue #43 row 9,
    // test/idempotency-anonymous.test.ts)
    const anonymous = { a: Object.keys(pair.a()).length === 0, b: Object.keys(pair.b()).length === 0 };
    const retry = await send(a, mode, anonymous.a ? alpha : `${alpha} again`, messageId);
    expect(retry.taskId).toBe(first.taskId);
    expect(contentOf(retry.task)).toEqual(contentOf(first.task));
    const again = await send(b, mode, anonymous.b ? bravo : `${bravo} again`, messageId);
    expect(again.taskId).toBe(theirs.taskId);
    for (const [who, client, text] of [['a', a, alpha], ['b', b, bravo]] as const) {
      if (anonymous[who]) await expect(send(client, mode, `${text} again`, messageId)).rejects.toThrow(/already used with another message/);
    }

    const rows = await runsWith(agent, messageId);
    expect(rows.map((r) => r.id).sort()).toEqual([first.taskId, theirs.taskId].sort());
    expect(new Set(rows.map((r) => r.createdBy)).size).toBe(2);
    const messages = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE agent_id = $1 AND message_id = $2`, [agent.agentId, messageId]);
    expect(messages[0]!.n).toBe(2);
  });

  it('concurrent retries: each caller racing itself with one messageId gets one run', async () => {
    const a = await sdk(keyed, 'jsonrpc', { 'x-api-key': keys.a });
    const b = await sdk(keyed, 'jsonrpc', { 'x-api-key': keys.b });
    const messageId = `race-${randomUUID()}`;
    const results = await Promise.all([
      ...Array.from({ length: 5 }, () => a.sendMessage(request('hold a', messageId, { returnImmediately: true }))),
      ...Array.from({ length: 5 }, () => b.sendMessage(request('hold b', messageId, { returnImmediately: true }))),
    ]);
    const ids = results.map((r) => asTask(r).id);
    expect(new Set(ids.slice(0, 5)).size).toBe(1);
    expect(new Set(ids.slice(5)).size).toBe(1);
    expect(ids[0]).not.toBe(ids[5]);
    expect(await runsWith(keyed, messageId)).toHaveLength(2);
    await a.cancelTask({ tenant: '', id: ids[0]!, metadata: undefined });
    await b.cancelTask({ tenant: '', id: ids[5]!, metadata: undefined });
  });
});

describe('follow-up messages are idempotent per sender', () => {
  it.each(BINDINGS)('%s: the same messageId from another caller is its own message; a retry adds nothing; an unseen task is TaskNotFound', async (binding) => {
    const a = await sdk(keyed, binding, { 'x-api-key': keys.a });
    const b = await sdk(keyed, binding, { 'x-api-key': keys.b });
    const ops = await sdk(keyed, binding, { 'x-api-key': keys.all });
    const tag = `${binding}-${randomUUID().slice(0, 8)}`;
    const mine = asTask(await a.sendMessage(request('hold a', `origin-a-${tag}`, { returnImmediately: true })));
    const yours = asTask(await b.sendMessage(request('hold b', `origin-b-${tag}`, { returnImmediately: true })));
    const followUp = `f-1-${tag}`;

    await a.sendMessage(request('hold more from a', followUp, { taskId: mine.id, returnImmediately: true }));
    // a retry by the same caller adds nothing
    await a.sendMessage(request('hold more from a (retry)', followUp, { taskId: mine.id, returnImmediately: true }));
    // B reuses A's messageId on its own task: its own message, no conflict
    await b.sendMessage(request('hold more from b', followUp, { taskId: yours.id, returnImmediately: true }));
    // ... and the first caller's origin messageId too
    await b.sendMessage(request('hold b reusing a origin', `origin-a-${tag}`, { taskId: yours.id, returnImmediately: true }));
    // B cannot reach A's task at all
    await expect(b.sendMessage(request('hold hijack', followUp, { taskId: mine.id, returnImmediately: true }))).rejects.toBeInstanceOf(TaskNotFoundError);
    // a caller who sees every task sends the same messageId on A's task: its own message, once
    await ops.sendMessage(request('hold more from ops', followUp, { taskId: mine.id, returnImmediately: true }));
    await ops.sendMessage(request('hold more from ops (retry)', followUp, { taskId: mine.id, returnImmediately: true }));

    const historyA = (await a.getTask({ tenant: '', id: mine.id, historyLength: undefined })).history.map(textOf);
    expect(historyA).toEqual(['hold a', 'hold more from a', 'hold more from ops']);
    const historyB = (await b.getTask({ tenant: '', id: yours.id, historyLength: undefined })).history.map(textOf);
    expect(historyB).toEqual(['hold b', 'hold more from b', 'hold b reusing a origin']);
    const rows = await db.query<{ runId: string; sentBy: string }>(`SELECT run_id AS "runId", sent_by AS "sentBy" FROM messages WHERE agent_id = $1 AND message_id = $2 ORDER BY sequence`, [keyed.agentId, followUp]);
    expect(rows.map((r) => r.runId).sort()).toEqual([mine.id, mine.id, yours.id].sort());
    expect(new Set(rows.map((r) => r.sentBy)).size).toBe(3);

    await a.cancelTask({ tenant: '', id: mine.id, metadata: undefined });
    await b.cancelTask({ tenant: '', id: yours.id, metadata: undefined });
  });

  it('answers to an interaction: a retried answer adds nothing, another caller with the same messageId answers for itself', async () => {
    const a = await sdk(keyed, 'jsonrpc', { 'x-api-key': keys.a });
    const ops = await sdk(keyed, 'jsonrpc', { 'x-api-key': keys.all });
    const task = asTask(await a.sendMessage(request('book a table', `book-${randomUUID()}`)));
    expect(task.status!.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const answer = `ans-${randomUUID()}`;
    const answered = asTask(await a.sendMessage(request('book monday', answer, { taskId: task.id })));
    expect(answered.status!.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const retried = asTask(await a.sendMessage(request('book tuesday', answer, { taskId: task.id })));
    expect(retried.history.map(textOf).filter((t) => t.startsWith('book '))).toEqual(['book a table', 'book monday']);
    const theirs = asTask(await ops.sendMessage(request('book friday', answer, { taskId: task.id })));
    expect(theirs.history.map(textOf).filter((t) => t.startsWith('book '))).toEqual(['book a table', 'book monday', 'book friday']);
    const rows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE run_id = $1 AND message_id = $2`, [task.id, answer]);
    expect(rows[0]!.n).toBe(2);
    await a.cancelTask({ tenant: '', id: task.id, metadata: undefined });
  });
});

describe('the idempotency lookups are index-served', () => {
  it('runs by (org, agent, owner, origin) and user messages by (org, agent, sender, messageId)', async () => {
    const plan = async (sql: string, params: unknown[]) =>
      (await db.transaction(async (q) => {
        // planner statistics of the tables as this file filled them (a fresh table has none)
        await q('ANALYZE runs');
        await q('ANALYZE message_keys');
        await q('SET LOCAL enable_seqscan = off');
        return q<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
      })).map((r) => r['QUERY PLAN']).join('\n');
    const org = (await db.query<{ id: string }>(`SELECT org_id AS id FROM agents WHERE id = $1`, [keyed.agentId]))[0]!.id;
    // the keys themselves: unique, on exactly these columns (what ON CONFLICT, the append's unique
    // violation and the lookups rely on). messages is partitioned by run period, so the key of a
    // user message across the agent's runs is message_keys' primary key (docs/architecture.md
    // "The log's partitions"); messages keeps a key within each run
    const defs = new Map(
      (await db.query<{ indexname: string; indexdef: string }>(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('runs', 'messages', 'message_keys')`)).map((r) => [r.indexname, r.indexdef]),
    );
    expect(defs.get('runs_org_id_agent_id_owner_origin_message_id_key')).toMatch(/CREATE UNIQUE INDEX .* ON public\.runs USING btree \(org_id, agent_id, COALESCE\(created_by, ''::text\), origin_message_id\)/);
    expect(defs.get('message_keys_pkey')).toMatch(/CREATE UNIQUE INDEX .* ON public\.message_keys USING btree \(org_id, agent_id, sent_by, message_id\)/);
    expect(defs.get('messages_org_id_run_id_sent_by_message_id_key')).toMatch(/CREATE UNIQUE INDEX .* ON ONLY public\.messages USING btree \(org_id, run_id, sent_by, message_id\)/);
    expect([...defs.keys()]).not.toContain('runs_org_id_agent_id_origin_message_id_key');
    expect([...defs.keys()]).not.toContain('messages_org_id_agent_id_message_id_key');
    expect([...defs.keys()]).not.toContain('messages_org_id_agent_id_sent_by_message_id_key');
    // and the lookups go through an index starting with (org_id, agent_id) — which one depends on the
    // statistics of this small table (the per-status index is as good here), never a scan of the table
    const runPlan = await plan(`SELECT id FROM runs WHERE org_id = $1 AND agent_id = $2 AND COALESCE(created_by, '') = $3 AND origin_message_id = $4`, [org, keyed.agentId, '', 'x']);
    expect(runPlan).toMatch(/(Index (Only )?Scan using|Bitmap Index Scan on) runs_org_id_agent_id_\w+/);
    expect(runPlan).toMatch(/Index Cond: \(\(org_id = .*AND \(agent_id = /);
    expect(runPlan).not.toMatch(/Seq Scan/);
    const messagePlan = await plan(`SELECT run_id FROM message_keys WHERE org_id = $1 AND agent_id = $2 AND sent_by = $3 AND message_id = $4`, [org, keyed.agentId, '', 'x']);
    expect(messagePlan).toMatch(/(Index (Only )?Scan using|Bitmap Index Scan on) message_keys_pkey/);
    expect(messagePlan).not.toMatch(/Seq Scan/);
  });
});
