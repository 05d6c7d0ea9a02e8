import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Role, SendMessageRequest, TaskState, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client';
import { SUBSTATES_EXTENSION_URI } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { observeQueries } from './support/db-spy.js';
import { readSse } from './support/sse.js';
import { startStack, type Stack } from './support/stack.js';
import { startUpstreamAgent, type UpstreamAgent } from './support/upstream-agent.js';

/**
 * The `a2a` runtime against an `@a2a-js/sdk` server in its own process (examples/upstream-agent):
 * publishing takes the upstream card's skills; blocking and streaming sends through us; artifact
 * chunks; input-required forwarded upstream and answered on the same upstream task; cancel
 * propagated; upstream failures and an upstream that is down fail the run with a readable
 * reason; a dropped stream resumes through us with Last-Event-ID on both bindings.
 */
let stack: Stack;
let upstream: UpstreamAgent;
let agent: PublishedAgent;
let rpc: Client;
let rest: Client;
const V1 = { 'content-type': 'application/json', 'a2a-version': '1.0' };
/** `AAAS_RUNTIME_SECRET_<org id: 32 hex digits>_`: the worker variables the stack's org's revisions may name in `secretEnv`. */
async function namespaceOf(s: Stack): Promise<string> {
  const org = await adminRequest<{ id: string }>(s.baseUrl, s.adminKey, 'GET', '/v1/organization');
  return `AAAS_RUNTIME_SECRET_${org.body.id.replace(/-/g, '').toUpperCase()}_`;
}
/** The stack's org's namespace. */
let NAMESPACE = '';
/** The upstream token as a worker variable of the stack's org (the main agent uses the org's runtime secret `upstream-token`). */
let UPSTREAM_ENV = '';

beforeAll(async () => {
  upstream = await startUpstreamAgent({ UPSTREAM_TOKEN: 'upstream-secret', UPSTREAM_EXTENSIONS: SUBSTATES_EXTENSION_URI });
  stack = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', A2A_BLOCKING_TIMEOUT_MS: '15000', RUNTIME_SECRET_ENCRYPTION_SECRET: 'a2a-runtime-test-encryption-secret' } });
  NAMESPACE = await namespaceOf(stack);
  UPSTREAM_ENV = `${NAMESPACE}UPSTREAM`;
  process.env[UPSTREAM_ENV] = 'upstream-secret';
  expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/runtime-secrets', { name: 'upstream-token', value: 'upstream-secret' })).status).toBe(201);
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'weather',
    transports: ['JSONRPC', 'HTTP+JSON'],
    a2a: { skillsProjection: [], capabilities: { streaming: true } } as never,
    runtime: { kind: 'a2a', cardUrl: upstream.cardUrl, credentials: { secret: 'upstream-token' } },
  });
  rpc = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${agent.basePath}/`);
  rest = await new ClientFactory({ transports: [new RestTransportFactory()], preferredTransports: ['HTTP+JSON'] }).createFromUrl(`${stack.baseUrl}${agent.basePath}/`);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  delete process.env[UPSTREAM_ENV];
});

const send = (text: string, taskId = '', contextId = '') =>
  SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId && { taskId }), ...(contextId && { contextId }) } });
const textOf = (m: { parts: Array<{ content?: { $case: string; value: unknown } }> } | undefined) =>
  (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? String(p.content.value) : '')).join('');
const stateOf = (t: Task) => taskStateToJSON(t.status!.state);
const db = () => stack.api.get(DatabaseService);
const eventsOf = async (runId: string) =>
  db().query<{ sequence: number; type: string; payload: any }>('SELECT sequence, type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [runId]);
const savedUpstreamTask = async (runId: string) => (await eventsOf(runId)).filter((e) => e.type === 'run.runtime_state_saved').map((e) => e.payload.state.taskId);

async function publishA2A(slug: string, runtime: Record<string, unknown>) {
  return publishAgent(stack.baseUrl, stack.adminKey, { slug, runtime: { kind: 'a2a', ...runtime } });
}

describe('the a2a runtime', () => {
  it('publishes with the upstream card skills and identity; the card is ours', async () => {
    const card = (await (await fetch(agent.cardUrl)).json()) as any;
    expect(card.skills.map((s: { id: string }) => s.id)).toEqual(['weather', 'report']);
    expect(card.name).toBe('Weather (upstream)');
    expect(card.supportedInterfaces.every((i: { url: string }) => i.url.startsWith(stack.baseUrl))).toBe(true);
    // the credentials are a reference, never the secret
    const revisions = await adminRequest<any[]>(stack.baseUrl, stack.adminKey, 'GET', `/v1/agents/${agent.agentId}/revisions`);
    expect(JSON.stringify(revisions.body)).not.toContain('upstream-secret');
  });

  it('refuses to publish when the upstream card cannot be read, with the reason', async () => {
    const a = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'gone', name: 'Gone', description: 'd' });
    const rev = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, {
      protocolProfiles: { a2a: {} },
      runtime: { kind: 'a2a', cardUrl: `${upstream.base}/nope.json` },
    });
    expect(rev.status).toBe(201);
    const pub = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions/${rev.body.id}/publish`);
    expect(pub.status).toBe(422);
    expect(pub.body.error.code).toBe('runtime.upstream_unreachable');
    expect(pub.body.error.message).toContain('/nope.json');
    // a scripted revision still needs its own skills
    const noSkills = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'scripted', rules: [] } });
    expect(noSkills.status).toBe(422);
    // a private address the deployment does not allow is refused at draft, at its field
    const priv = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'a2a', url: 'http://10.1.2.3/a2a' } });
    expect(priv.status).toBe(422);
    expect(priv.body.error.details.issues.map((i: { path: string }) => i.path)).toContain('runtime.url');
    // neither cardUrl nor url, or both
    const bad = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'a2a' } });
    expect(bad.status).toBe(422);
  });

  it('publishing gives up on an upstream card that never comes or is too large, with the reason', async () => {
    const slow = http.createServer((req, res) => {
      if (req.url === '/huge.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        let sent = 0;
        const pump = () => {
          while (sent < 3 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
          if (sent < 3 * 1024 * 1024) res.once('drain', pump);
          else res.end('{}');
        };
        return pump();
      }
      // /silent: headers never come
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    try {
      for (const [slug, path, why] of [['silent-card', '/silent', /no answer within 5000 ms/], ['huge-card', '/huge.json', /larger than 1048576 bytes/]] as const) {
        const a = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug, name: slug, description: 'd' });
        const rev = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'a2a', cardUrl: `${base}${path}` } });
        const t0 = Date.now();
        const pub = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions/${rev.body.id}/publish`);
        expect(Date.now() - t0).toBeLessThan(8_000);
        expect(pub.status).toBe(422);
        expect(pub.body.error.code).toBe('runtime.upstream_unreachable');
        expect(pub.body.error.message).toMatch(why);
      }
    } finally {
      slow.closeAllConnections();
      await new Promise<void>((r) => slow.close(() => r()));
    }
  }, 30_000);

  it('blocking send: the upstream answer becomes our completed task (JSON-RPC and HTTP+JSON)', async () => {
    for (const client of [rpc, rest]) {
      const task = (await client.sendMessage(send('hello there'))) as Task;
      expect(stateOf(task)).toBe('TASK_STATE_COMPLETED');
      expect(textOf(task.status!.message)).toBe('echo: hello there');
      // the upstream task is kept on the run
      expect((await savedUpstreamTask(task.id)).length).toBe(1);
    }
  });

  it('an upstream that answers with a Message completes the task with it', async () => {
    const task = (await rpc.sendMessage(send('reply just this'))) as Task;
    expect(stateOf(task)).toBe('TASK_STATE_COMPLETED');
    expect(textOf(task.status!.message)).toBe('just this');
  });

  it('streaming send: status updates and artifact chunks, in order, as the upstream streams them', async () => {
    const seen: string[] = [];
    let taskId = '';
    for await (const ev of rpc.sendMessageStream(send('stream 4 30'))) {
      const p = ev.payload!;
      if (p.$case === 'task') taskId = p.value.id;
      if (p.$case === 'statusUpdate') seen.push(`status:${taskStateToJSON(p.value.status!.state)}`);
      if (p.$case === 'artifactUpdate') seen.push(`chunk:${p.value.append}:${p.value.lastChunk}:${textOf(p.value.artifact as never)}`);
    }
    expect(seen.filter((s) => s.startsWith('chunk'))).toEqual(['chunk:false:false:chunk 1;', 'chunk:true:false:chunk 2;', 'chunk:true:false:chunk 3;', 'chunk:true:true:chunk 4;']);
    expect(seen.at(-1)).toBe('status:TASK_STATE_COMPLETED');
    const task = await rest.getTask({ tenant: '', id: taskId, historyLength: 10 });
    expect(task.artifacts[0]!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('')).toBe('chunk 1;chunk 2;chunk 3;chunk 4;');
    // gapless log, one saved upstream task
    const events = await eventsOf(taskId);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'artifact.updated')).toHaveLength(4);
  });

  it('the A2A extensions our caller activated are requested from the upstream too', async () => {
    const withExt = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'weather-ext',
      a2a: { skillsProjection: [], extensions: [{ uri: SUBSTATES_EXTENSION_URI, params: { states: ['thinking'] } }] } as never,
      runtime: { kind: 'a2a', cardUrl: upstream.cardUrl, credentials: { secret: 'upstream-token' } },
    });
    const call = (extensions?: string) =>
      fetch(`${stack.baseUrl}${withExt.basePath}`, {
        method: 'POST',
        headers: { ...V1, ...(extensions && { 'a2a-extensions': extensions }) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello' }] } } }),
      });
    // the worker learns them from the created run's job, without reading `run.created` back
    const reads: unknown[] = [];
    const stop = observeQueries(stack.worker!.get(DatabaseService), (name, values) => {
      if (name === 'runs.latest_of_type' && values?.[2] === 'run.created') reads.push(values[0]);
    });
    try {
      const res = await call(SUBSTATES_EXTENSION_URI);
      expect(res.headers.get('a2a-extensions')).toBe(SUBSTATES_EXTENSION_URI);
      expect(((await res.json()) as any).result.task.status.state).toBe('TASK_STATE_COMPLETED');
      expect((await upstream.stats()).extensions).toEqual([SUBSTATES_EXTENSION_URI]);
      // not activated here: not asked for upstream
      await call();
      expect((await upstream.stats()).extensions).toEqual([]);
      expect(reads).toEqual([]);
    } finally {
      stop();
    }
  });

  it('input-required upstream becomes an interaction here; the answer goes to the same upstream task', async () => {
    const before = (await upstream.stats()).executions;
    const asked = (await rpc.sendMessage(send('weather please'))) as Task;
    expect(stateOf(asked)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(textOf(asked.status!.message)).toBe('Which city?');
    const upstreamTask = (await savedUpstreamTask(asked.id))[0];
    const done = (await rpc.sendMessage(send('Paris', asked.id, asked.contextId))) as Task;
    expect(stateOf(done)).toBe('TASK_STATE_COMPLETED');
    expect(textOf(done.status!.message)).toBe('The weather in Paris is sunny.');
    expect(done.artifacts.map((a) => a.name)).toEqual(['forecast']);
    // two turns upstream, on one upstream task
    expect((await upstream.stats()).executions - before).toBe(2);
    expect(await savedUpstreamTask(asked.id)).toEqual([upstreamTask]);
    const interactions = (await eventsOf(asked.id)).filter((e) => e.type.startsWith('interaction.')).map((e) => e.type);
    expect(interactions).toEqual(['interaction.requested', 'interaction.responded']);
  });

  it('cancel is propagated upstream', async () => {
    const task = (await rpc.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true } }))) as Task;
    await expect.poll(async () => (await savedUpstreamTask(task.id)).length, { timeout: 10_000 }).toBe(1);
    const upstreamTask = (await savedUpstreamTask(task.id))[0];
    const canceled = await rpc.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(stateOf(canceled)).toBe('TASK_STATE_CANCELED');
    await expect.poll(async () => (await upstream.stats()).canceled, { timeout: 10_000 }).toContain(upstreamTask);
  });

  it('more input on a working task is handed to the upstream task; the execution already following it records the rest once', async () => {
    const held = (await rpc.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true } }))) as Task;
    await expect.poll(async () => (await eventsOf(held.id)).some((e) => e.payload?.status === 'working'), { timeout: 10_000 }).toBe(true);
    const upstreamTask = (await savedUpstreamTask(held.id))[0];
    // the upstream answers a second message on its task by completing it
    const more = (await rpc.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'and one more thing' }], taskId: held.id, contextId: held.contextId }, configuration: { returnImmediately: true } }))) as Task;
    expect(more.id).toBe(held.id);
    await expect.poll(async () => (await eventsOf(held.id)).at(-1)?.payload?.status, { timeout: 10_000 }).toBe('completed');
    const log = await eventsOf(held.id);
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    const agentTexts = log.filter((e) => e.payload?.message?.role === 'agent').map((e) => e.payload.message.parts[0].text);
    expect(agentTexts.filter((t: string) => t === 'echo: and one more thing')).toHaveLength(1);
    expect(await savedUpstreamTask(held.id)).toEqual([upstreamTask]);
    await rpc.cancelTask({ tenant: '', id: held.id, metadata: undefined }).catch(() => undefined);
  });

  it('an upstream failure, and an upstream that is down, fail the run with a readable reason', async () => {
    const failed = (await rpc.sendMessage(send('fail'))) as Task;
    expect(stateOf(failed)).toBe('TASK_STATE_FAILED');
    expect(textOf(failed.status!.message)).toBe('upstream says no');

    const down = await publishA2A('down', { url: 'http://127.0.0.1:9/a2a/jsonrpc' });
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${down.basePath}/`);
    const t = (await client.sendMessage(send('anyone?'))) as Task;
    expect(stateOf(t)).toBe('TASK_STATE_FAILED');
    expect(textOf(t.status!.message)).toMatch(/^The upstream agent failed: .*(ECONNREFUSED|fetch failed)/);

    const noSecret = await publishA2A('no-secret', { url: `${upstream.url}`, credentials: { secretEnv: `${NAMESPACE}NOT_SET` } });
    const c2 = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${noSecret.basePath}/`);
    const t2 = (await c2.sendMessage(send('hi'))) as Task;
    expect(stateOf(t2)).toBe('TASK_STATE_FAILED');
    expect(textOf(t2.status!.message)).toContain(`the worker variable ${NAMESPACE}NOT_SET is not set on this worker`);

    // without our credentials the upstream refuses (401): a failed run that says so
    const unauth = await publishA2A('unauth', { url: `${upstream.url}` });
    const c3 = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${unauth.basePath}/`);
    const t3 = (await c3.sendMessage(send('hi'))) as Task;
    expect(stateOf(t3)).toBe('TASK_STATE_FAILED');
    expect(textOf(t3.status!.message)).toMatch(/^The upstream agent failed: .*HTTP 401/);
  });

  it('a v0.3 upstream (our own v0.3 JSON-RPC binding, through the SDK compatibility layer)', async () => {
    const inner = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'inner',
      a2a: { capabilities: { streaming: true } } as never,
      runtime: { kind: 'scripted', rules: [{ match: { text: '.' }, steps: [{ type: 'artifact', name: 'a.txt', content: { text: 'from v0.3: {{input}}' } }, { type: 'status', status: 'completed', message: 'inner done' }] }] },
    });
    for (const streaming of [true, false]) {
      const outer = await publishA2A(`outer-${streaming}`, { url: `${stack.baseUrl}${inner.basePath}`, protocolVersion: '0.3', streaming, pollIntervalMs: 100 });
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${outer.basePath}/`);
      const task = (await client.sendMessage(send('hi there'))) as Task;
      expect(`${stateOf(task)} ${textOf(task.status!.message)}`).toBe('TASK_STATE_COMPLETED inner done');
      expect(textOf(task.status!.message)).toBe('inner done');
      expect(task.artifacts[0]!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('')).toBe('from v0.3: hi there');
    }
  });

  it('a non-streaming upstream is polled', async () => {
    const polled = await publishA2A('polled', { url: upstream.url, streaming: false, pollIntervalMs: 100, credentials: { secretEnv: UPSTREAM_ENV } });
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${polled.basePath}/`);
    const task = (await client.sendMessage(send('stream 3 100'))) as Task;
    expect(stateOf(task)).toBe('TASK_STATE_COMPLETED');
    expect(task.artifacts[0]!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('')).toBe('chunk 1;chunk 2;chunk 3;');
  });

  it('a dropped stream resumes through us with Last-Event-ID on both bindings', async () => {
    const created = (await rpc.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'stream 6 150' }] }, configuration: { returnImmediately: true } }))) as Task;
    const id = created.id;
    // JSON-RPC: read two events, drop the connection, resume after the last id seen
    const first = await readSse(`${stack.baseUrl}${agent.basePath}`, { method: 'POST', headers: V1, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id } }) }, { max: 3 });
    const lastId = first.frames.at(-1)!.id!;
    const rest1 = await readSse(`${stack.baseUrl}${agent.basePath}`, { method: 'POST', headers: { ...V1, 'last-event-id': lastId }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'SubscribeToTask', params: { id } }) }, { timeoutMs: 20_000 });
    const ids = [...first.frames.slice(1), ...rest1.frames].map((f) => Number(f.id));
    // sequences strictly increasing, nothing twice
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(rest1.frames.at(-1)!.data).toContain('TASK_STATE_COMPLETED');
    // HTTP+JSON: replay everything after sequence 2
    const r = await readSse(`${stack.baseUrl}${agent.basePath}/tasks/${id}:subscribe`, { method: 'GET', headers: { 'a2a-version': '1.0', 'last-event-id': '2' } });
    const chunks = r.frames.map((f) => JSON.parse(f.data)).filter((d) => d.artifactUpdate).map((d) => d.artifactUpdate.artifact.parts[0].text);
    expect(chunks).toEqual(['chunk 1;', 'chunk 2;', 'chunk 3;', 'chunk 4;', 'chunk 5;', 'chunk 6;']);
    // the upstream itself has no replay: resubscribing to its finished task gives no missed events
    const upstreamTask = (await savedUpstreamTask(id))[0]!;
    const direct = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: (u, i) => fetch(u, { ...i, headers: { ...Object.fromEntries(new Headers(i?.headers)), authorization: 'Bearer upstream-secret' } }) })] }).createFromUrl(upstream.cardUrl, '');
    const replay: string[] = [];
    try {
      for await (const ev of direct.resubscribeTask({ tenant: '', id: upstreamTask })) replay.push(ev.payload!.$case);
    } catch (e) {
      replay.push(`error:${(e as Error).message.slice(0, 40)}`);
    }
    expect(replay.filter((k) => k === 'artifactUpdate')).toHaveLength(0);
  });
});

describe('the a2a runtime and the sweeper', () => {
  it('a follower whose upstream goes quiet after a forwarded message is not resumed beside itself', async () => {
    // a stack whose sweeper calls a run lost after 1 s without news; the follower's lease lives
    // 1.5 s and is renewed every second (a tighter heartbeat lapses under a loaded CI machine, and
    // a lapsed lease rightly counts as a dead follower)
    const quick = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', RUN_STALE_AFTER_MS: '1000', RUN_SWEEP_INTERVAL_MS: '200', EXECUTION_HEARTBEAT_MS: '1000' } });
    const quickEnv = `${await namespaceOf(quick)}UPSTREAM`;
    process.env[quickEnv] = 'upstream-secret';
    try {
      const a = await publishAgent(quick.baseUrl, quick.adminKey, {
        slug: 'quiet',
        a2a: { skillsProjection: [], capabilities: { streaming: true } } as never,
        runtime: { kind: 'a2a', cardUrl: upstream.cardUrl, credentials: { secretEnv: quickEnv } },
      });
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${quick.baseUrl}${a.basePath}/`);
      const held = (await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true } }))) as Task;
      const quickEvents = () => quick.api.get(DatabaseService).query<{ type: string; payload: any }>('SELECT type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [held.id]);
      await expect.poll(async () => (await quickEvents()).some((e) => e.payload?.status === 'working'), { timeout: 10_000 }).toBe(true);
      // a second "hold" on the same upstream task: forwarded (that execution ends at once); the
      // first execution keeps following a task that now says nothing
      await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }], taskId: held.id, contextId: held.contextId }, configuration: { returnImmediately: true } }));
      await new Promise((r) => setTimeout(r, 3_000));
      const types = (await quickEvents()).map((e) => e.type);
      expect(types.filter((t) => t === 'run.execution_resumed')).toEqual([]);
      expect((await client.getTask({ tenant: '', id: held.id, historyLength: 0 })).status!.state).toBe(TaskState.TASK_STATE_WORKING);
      await client.cancelTask({ tenant: '', id: held.id, metadata: undefined });
    } finally {
      await quick.close();
      delete process.env[quickEnv];
    }
  }, 30_000);
});

void Role;
void TaskState;
