import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SendMessageRequest, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { seedAgent } from './support/fixtures.js';
import { runsOf } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';
import { startUpstreamAgent, type UpstreamAgent } from './support/upstream-agent.js';

/**
 * Runtime secrets cannot leave their organization (the hostile test: a revision naming
 * DATABASE_URL or another org's secret in `secretEnv` made the worker send its value upstream).
 * Secrets are stored per organization, encrypted, and referenced by name; `secretEnv` is accepted
 * only inside the org's namespace AAAS_RUNTIME_SECRET_<ORG ID>_<NAME>, at draft, at publish and
 * again in the worker for revisions published before the rule (test/runtime-secret-namespaces.test.ts
 * shows the namespaces do not follow which slugs exist). A local receiver plays every backend and
 * verifies the Standard Webhooks signatures with the key each org stored.
 */
const TTL_MS = 300;
const PLATFORM_VAR = 'H1_PLATFORM_ONLY_SECRET';
const PLATFORM_VALUE = `platform-${randomUUID()}`;

let stack: Stack;
let upstream: UpstreamAgent;
let receiver: http.Server;
let base: string;
/** Every request the receiver got: path, headers, raw body. */
const received: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string }> = [];
let keyB = '';
let slugB = '';
let idA = '';
let idB = '';
const setVars: string[] = [];

/** `AAAS_RUNTIME_SECRET_<org id: 32 hex digits>_`: the worker variables an org's revisions may name in `secretEnv`. */
const namespaceOf = (orgId: string) => `AAAS_RUNTIME_SECRET_${orgId.replace(/-/g, '').toUpperCase()}_`;
/** What an earlier release derived from a slug (`org-1a2b` → `AAAS_RUNTIME_SECRET_ORG_1A2B_`). */
const slugNamespaceOf = (orgSlug: string) => `AAAS_RUNTIME_SECRET_${orgSlug.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;
const setVar = (name: string, value: string) => {
  process.env[name] = value;
  setVars.push(name);
};

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body });
      if (req.url?.startsWith('/hook/')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ operations: [{ op: 'status', status: 'completed', message: { parts: [{ text: 'backend ok' }] } }] }));
      }
      res.writeHead(500).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  upstream = await startUpstreamAgent({ UPSTREAM_TOKEN: 'namespace-token' });
  stack = await startStack({
    env: {
      HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8',
      A2A_BLOCKING_TIMEOUT_MS: '10000',
      RUNTIME_SECRET_ENCRYPTION_SECRET: 'runtime-secrets-test-encryption-secret',
      RUNTIME_SECRET_CACHE_TTL_MS: String(TTL_MS),
    },
  });
  slugB = `orgb-${randomUUID().slice(0, 8)}`;
  const orgB = await adminRequest<{ id: string; adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: slugB, name: 'Org B' });
  expect(orgB.status).toBe(201);
  keyB = orgB.body.adminKey.key;
  idB = orgB.body.id;
  idA = (await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'GET', '/v1/organization')).body.id;
  // what a hostile revision would like to read: a platform variable, and a variable of B's namespace
  setVar(PLATFORM_VAR, PLATFORM_VALUE);
  setVar(`${namespaceOf(idB)}TOKEN`, `b-only-${randomUUID()}`);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
  await new Promise<void>((r) => receiver?.close(() => r()));
  for (const v of setVars) delete process.env[v];
});

const A = () => ({ key: stack.adminKey, slug: stack.orgSlug, id: idA });
const B = () => ({ key: keyB, slug: slugB, id: idB });
const SKILLS = { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }] };

async function newAgent(org: { key: string }, slug: string): Promise<string> {
  const res = await adminRequest<{ id: string }>(stack.baseUrl, org.key, 'POST', '/v1/agents', { slug, name: slug, description: 'd' });
  expect(res.status).toBe(201);
  return res.body.id;
}
const draft = (org: { key: string }, agentId: string, runtime: unknown) =>
  adminRequest<any>(stack.baseUrl, org.key, 'POST', `/v1/agents/${agentId}/revisions`, { protocolProfiles: { a2a: SKILLS }, runtime });
const publish = (org: { key: string }, agentId: string, revisionId: string) => adminRequest<any>(stack.baseUrl, org.key, 'POST', `/v1/agents/${agentId}/revisions/${revisionId}/publish`);
const db = () => stack.api.get(DatabaseService);

async function clientOf(agent: PublishedAgent) {
  return new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${agent.basePath}/`);
}
async function sendTo(agent: PublishedAgent, text = 'hello'): Promise<Task> {
  const client = await clientOf(agent);
  return (await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } }))) as Task;
}
const stateOf = (t: Task) => taskStateToJSON(t.status!.state);
const textOf = (t: Task) => (t.status?.message?.parts ?? []).map((p: any) => (p.content?.$case === 'text' ? String(p.content.value) : '')).join('');
const hits = (path: string) => received.filter((r) => r.path === path);

/** True when the request carries a valid Standard Webhooks signature under `key`. */
function signedWith(req: { headers: http.IncomingHttpHeaders; body: string }, key: string): boolean {
  try {
    new Webhook(key).verify(req.body, { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) });
    return true;
  } catch {
    return false;
  }
}

function expectNotAllowed(res: { status: number; body: any }, path: string, org: { id: string }) {
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('runtime.secret_not_allowed');
  expect(res.body.error.details).toMatchObject({ path, allowed: `${namespaceOf(org.id)}<NAME>` });
  expect(res.body.error.message).toContain(`${namespaceOf(org.id)}<NAME>`);
}

describe('secretEnv: only the organization\'s own namespace', () => {
  it('a platform variable, another org\'s namespace or a name derived from a slug that could be another org\'s is refused at draft, on both runtimes; the own namespace is accepted', async () => {
    const agentId = await newAgent(A(), 'ns-draft');
    for (const name of ['DATABASE_URL', 'PUSH_ENCRYPTION_SECRET', 'SIGNING_KEY_ENCRYPTION_SECRET', PLATFORM_VAR, `${namespaceOf(idB)}TOKEN`, `${slugNamespaceOf(slugB)}TOKEN`, 'AAAS_RUNTIME_SECRET_']) {
      expectNotAllowed(await draft(A(), agentId, { kind: 'http', url: `${base}/hook/x`, secretEnv: name }), 'runtime.secretEnv', A());
      expectNotAllowed(await draft(A(), agentId, { kind: 'a2a', url: `${base}/leak/a2a`, credentials: { secretEnv: name } }), 'runtime.credentials.secretEnv', A());
    }
    // A's slug-derived names of an earlier release (its slug has a -) could be another org's: refused
    // whether or not an org whose slug extends A's exists
    for (const step of ['before', 'after'] as const) {
      if (step === 'after') expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: `${stack.orgSlug}-b`, name: 'Longer' })).status).toBe(201);
      for (const name of [`${slugNamespaceOf(stack.orgSlug)}HOOK`, `${slugNamespaceOf(stack.orgSlug)}B_TOKEN`]) {
        expectNotAllowed(await draft(A(), agentId, { kind: 'http', url: `${base}/hook/x`, secretEnv: name }), 'runtime.secretEnv', A());
      }
    }
    // a draft edited to a platform variable is refused the same way
    const ok = await draft(A(), agentId, { kind: 'http', url: `${base}/hook/x`, secretEnv: `${namespaceOf(idA)}HOOK` });
    expect(ok.status).toBe(201);
    const patched = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'PATCH', `/v1/agents/${agentId}/revisions/${ok.body.id}`, { runtime: { kind: 'http', url: `${base}/hook/x`, secretEnv: 'DATABASE_URL' } });
    expectNotAllowed(patched, 'runtime.secretEnv', A());
    // giving both, or neither, is a schema error
    expect((await draft(A(), agentId, { kind: 'http', url: `${base}/hook/x`, secret: 'a', secretEnv: `${namespaceOf(idA)}HOOK` })).body.error.code).toBe('request.invalid');
    expect((await draft(A(), agentId, { kind: 'http', url: `${base}/hook/x` })).body.error.code).toBe('request.invalid');
  });

  it('a draft that names a platform variable (written before the rule) is refused at publish, on both runtimes', async () => {
    const agentId = await newAgent(A(), 'ns-publish');
    for (const runtime of [
      { kind: 'http', url: `${base}/hook/x`, secretEnv: 'DATABASE_URL', timeoutMs: 60000, retries: 1 },
      { kind: 'a2a', url: `${base}/leak/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', pollIntervalMs: 1000, timeoutMs: 600000, credentials: { secretEnv: 'PUSH_ENCRYPTION_SECRET', header: 'Authorization', scheme: 'Bearer' } },
    ]) {
      const ok = await draft(A(), agentId, { kind: 'scripted', rules: [] });
      expect(ok.status).toBe(201);
      // the draft as an older release stored it
      await db().query('UPDATE agent_revisions SET runtime = $2::jsonb WHERE id = $1', [ok.body.id, JSON.stringify(runtime)]);
      const res = await publish(A(), agentId, ok.body.id);
      expectNotAllowed(res, runtime.kind === 'http' ? 'runtime.secretEnv' : 'runtime.credentials.secretEnv', A());
      const [row] = await db().query<{ status: string }>('SELECT status::text AS status FROM agent_revisions WHERE id = $1', [ok.body.id]);
      expect(row!.status).toBe('draft');
    }
  });

  it('the own namespace works: the http backend gets the variable as its signing key, the a2a upstream gets it as its token', async () => {
    const hookKey = whsec();
    setVar(`${namespaceOf(idA)}HOOK`, hookKey);
    setVar(`${namespaceOf(idA)}UPSTREAM`, 'namespace-token');
    const httpAgent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'ns-http', runtime: { kind: 'http', url: `${base}/hook/ns`, secretEnv: `${namespaceOf(idA)}HOOK` } });
    const task = await sendTo(httpAgent);
    expect(stateOf(task)).toBe('TASK_STATE_COMPLETED');
    expect(hits('/hook/ns')).toHaveLength(1);
    expect(signedWith(hits('/hook/ns')[0]!, hookKey)).toBe(true);

    const a2aAgent = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'ns-a2a',
      runtime: { kind: 'a2a', url: upstream.url, credentials: { secretEnv: `${namespaceOf(idA)}UPSTREAM` } },
    });
    const upstreamTask = await sendTo(a2aAgent, 'hello upstream');
    expect(stateOf(upstreamTask)).toBe('TASK_STATE_COMPLETED');
  });
});

describe('runtime secrets of an organization', () => {
  let keyA = '';
  let keyOfB = '';
  let agentA: PublishedAgent;
  let agentB: PublishedAgent;

  it('the same name in two organizations: each backend is signed with its own organization\'s value', async () => {
    keyA = whsec();
    keyOfB = whsec();
    expect((await adminRequest(stack.baseUrl, A().key, 'POST', '/v1/runtime-secrets', { name: 'hook', value: keyA })).status).toBe(201);
    expect((await adminRequest(stack.baseUrl, B().key, 'POST', '/v1/runtime-secrets', { name: 'hook', value: keyOfB })).status).toBe(201);
    agentA = await publishAgent(stack.baseUrl, A().key, { slug: 'signed', runtime: { kind: 'http', url: `${base}/hook/a`, secret: 'hook' } });
    agentB = await publishAgent(stack.baseUrl, B().key, { slug: 'signed', runtime: { kind: 'http', url: `${base}/hook/b`, secret: 'hook' } });
    expect(stateOf(await sendTo(agentA))).toBe('TASK_STATE_COMPLETED');
    expect(stateOf(await sendTo(agentB))).toBe('TASK_STATE_COMPLETED');
    const [a] = hits('/hook/a');
    const [b] = hits('/hook/b');
    expect(signedWith(a!, keyA)).toBe(true);
    expect(signedWith(a!, keyOfB)).toBe(false);
    expect(signedWith(b!, keyOfB)).toBe(true);
    expect(signedWith(b!, keyA)).toBe(false);
    // the value is nowhere in the revision, the request or the run's log
    const revisions = await adminRequest(stack.baseUrl, A().key, 'GET', `/v1/agents/${agentA.agentId}/revisions`);
    expect(JSON.stringify(revisions.body)).not.toContain(keyA);
    expect(a!.body).not.toContain(keyA);
    const events = await db().query<{ payload: unknown }>('SELECT payload FROM run_events WHERE org_id = $1', [(await db().query<{ id: string }>('SELECT id FROM organizations WHERE slug = $1', [stack.orgSlug]))[0]!.id]);
    expect(JSON.stringify(events)).not.toContain(keyA);
  });

  it('a name that exists only in another organization is refused at publish (422), and its admin routes answer 404', async () => {
    expect((await adminRequest(stack.baseUrl, B().key, 'POST', '/v1/runtime-secrets', { name: 'only-b', value: 'b-value-1' })).status).toBe(201);
    const agentId = await newAgent(A(), 'borrower');
    const d = await draft(A(), agentId, { kind: 'http', url: `${base}/hook/borrow`, secret: 'only-b' });
    expect(d.status).toBe(201);
    const res = await publish(A(), agentId, d.body.id);
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'runtime.secret_not_found', details: { path: 'runtime.secret', secret: 'only-b' } });
    const a2a = await draft(A(), agentId, { kind: 'a2a', url: `${base}/leak/a2a`, credentials: { secret: 'only-b' } });
    expect((await publish(A(), agentId, a2a.body.id)).body.error).toMatchObject({ code: 'runtime.secret_not_found', details: { path: 'runtime.credentials.secret' } });
    // A cannot rotate or delete B's secret either: it does not exist for A
    expect((await adminRequest<any>(stack.baseUrl, A().key, 'PUT', '/v1/runtime-secrets/only-b', { value: 'hijacked' })).body.error.code).toBe('runtime_secret.not_found');
    expect((await adminRequest(stack.baseUrl, A().key, 'DELETE', '/v1/runtime-secrets/only-b')).status).toBe(404);
    expect((await adminRequest<any>(stack.baseUrl, B().key, 'GET', '/v1/runtime-secrets')).body.runtimeSecrets.find((s: any) => s.name === 'only-b').version).toBe(1);
    expect(hits('/hook/borrow')).toHaveLength(0);
  });

  it('list shows names, versions and times, never values; a name is created once; bad names and values are refused', async () => {
    const listA = await adminRequest<any>(stack.baseUrl, A().key, 'GET', '/v1/runtime-secrets');
    expect(listA.status).toBe(200);
    expect(listA.body.runtimeSecrets.map((s: any) => s.name)).toEqual(['hook']);
    expect(Object.keys(listA.body.runtimeSecrets[0]).sort()).toEqual(['createdAt', 'name', 'updatedAt', 'version']);
    expect(JSON.stringify(listA.body)).not.toContain(keyA);
    const listB = await adminRequest<any>(stack.baseUrl, B().key, 'GET', '/v1/runtime-secrets');
    expect(listB.body.runtimeSecrets.map((s: any) => s.name)).toEqual(['hook', 'only-b']);
    expect(JSON.stringify(listB.body)).not.toContain(keyOfB);
    // nor the stored row: encrypted, bound to its org
    const [row] = await db().query<{ ciphertext: string }>('SELECT ciphertext FROM runtime_secrets s JOIN organizations o ON o.id = s.org_id WHERE o.slug = $1 AND s.name = $2', [stack.orgSlug, 'hook']);
    expect(row!.ciphertext).toMatch(/^v1\./);
    expect(row!.ciphertext).not.toContain(keyA);

    const again = await adminRequest<any>(stack.baseUrl, A().key, 'POST', '/v1/runtime-secrets', { name: 'hook', value: 'other' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('runtime_secret.conflict');
    for (const body of [{ name: '../etc', value: 'v' }, { name: 'ok-name', value: 'line\nbreak' }, { name: 'ok-name', value: '' }, { name: 'ok-name', value: 'x'.repeat(4097) }, { name: 'ok-name' }]) {
      const res = await adminRequest<any>(stack.baseUrl, A().key, 'POST', '/v1/runtime-secrets', body);
      expect(res.status, JSON.stringify(body).slice(0, 40)).toBe(422);
      expect(res.body.error.code).toBe('request.invalid');
    }
    // an a2a:invoke key cannot manage secrets
    const invoke = await adminRequest<{ key: string }>(stack.baseUrl, A().key, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] });
    expect((await adminRequest(stack.baseUrl, invoke.body.key, 'GET', '/v1/runtime-secrets')).status).toBe(403);
    expect((await adminRequest(stack.baseUrl, null, 'GET', '/v1/runtime-secrets')).status).toBe(401);
  });

  it('rotate: the backend sees the new key within the cache TTL (version + 1)', async () => {
    const next = whsec();
    const rotated = await adminRequest<any>(stack.baseUrl, A().key, 'PUT', '/v1/runtime-secrets/hook', { value: next });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ name: 'hook', version: 2 });
    expect(JSON.stringify(rotated.body)).not.toContain(next);
    const deadline = Date.now() + TTL_MS + 5_000;
    let last: (typeof received)[number] | undefined;
    do {
      expect(stateOf(await sendTo(agentA))).toBe('TASK_STATE_COMPLETED');
      last = hits('/hook/a').at(-1);
    } while (!signedWith(last!, next) && Date.now() < deadline);
    expect(signedWith(last!, next)).toBe(true);
    expect(signedWith(last!, keyA)).toBe(false);
    // B's secret of the same name did not change
    expect(stateOf(await sendTo(agentB))).toBe('TASK_STATE_COMPLETED');
    expect(signedWith(hits('/hook/b').at(-1)!, keyOfB)).toBe(true);
    expect((await adminRequest(stack.baseUrl, A().key, 'PUT', '/v1/runtime-secrets/missing', { value: 'v' })).status).toBe(404);
  });

  it('delete: runs fail with a readable reason and nothing is sent; publishing a reference to it is refused', async () => {
    expect((await adminRequest(stack.baseUrl, A().key, 'DELETE', '/v1/runtime-secrets/hook')).status).toBe(204);
    expect((await adminRequest<any>(stack.baseUrl, A().key, 'GET', '/v1/runtime-secrets')).body.runtimeSecrets).toEqual([]);
    expect((await adminRequest(stack.baseUrl, A().key, 'DELETE', '/v1/runtime-secrets/hook')).status).toBe(404);
    const deadline = Date.now() + TTL_MS + 5_000;
    let task: Task;
    let before: number;
    do {
      before = hits('/hook/a').length;
      task = await sendTo(agentA);
    } while (stateOf(task) !== 'TASK_STATE_FAILED' && Date.now() < deadline);
    expect(stateOf(task)).toBe('TASK_STATE_FAILED');
    expect(textOf(task)).toMatch(/^The agent's backend is not configured \(runtime secret "hook"\): the runtime secret hook does not exist in this organization/);
    expect(hits('/hook/a')).toHaveLength(before);
    const agentId = agentA.agentId;
    const d = await draft(A(), agentId, { kind: 'http', url: `${base}/hook/a`, secret: 'hook' });
    expect((await publish(A(), agentId, d.body.id)).body.error.code).toBe('runtime.secret_not_found');
    // B's secret of the same name is untouched
    expect(stateOf(await sendTo(agentB))).toBe('TASK_STATE_COMPLETED');
  });
});

describe('the worker: defense in depth for revisions published before the rule', () => {
  it('a legacy published revision naming a platform variable, another org\'s namespace or another org\'s secret: its run fails with a readable reason and the receiver gets nothing', async () => {
    const runs = runsOf(stack.api);
    const cases = [
      { runtime: { kind: 'http', url: `${base}/leak/http-platform`, secretEnv: PLATFORM_VAR, timeoutMs: 60000, retries: 0 }, reason: /outside this organization's namespace: name a worker variable AAAS_RUNTIME_SECRET_[0-9A-F]{32}_<NAME> \(declared by the operator\)/ },
      { runtime: { kind: 'http', url: `${base}/leak/http-other-org`, secretEnv: `${namespaceOf(idB)}TOKEN`, timeoutMs: 60000, retries: 0 }, reason: /outside this organization's namespace/ },
      { runtime: { kind: 'http', url: `${base}/leak/http-b-secret`, secret: 'only-b', timeoutMs: 60000, retries: 0 }, reason: /the runtime secret only-b does not exist in this organization/ },
      {
        runtime: { kind: 'a2a', url: `${base}/leak/a2a-platform`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', pollIntervalMs: 1000, timeoutMs: 600000, credentials: { secretEnv: PLATFORM_VAR, header: 'Authorization', scheme: 'Bearer' } },
        reason: /^The upstream agent is not configured \(worker variable H1_PLATFORM_ONLY_SECRET\): .*outside this organization's namespace/,
      },
    ];
    for (const { runtime, reason } of cases) {
      // inserted as an older release left it: published, never checked
      const seed = await seedAgent(db(), runtime);
      const created = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'leak it' }] } });
      const settled = await runs.waitUntilSettled(seed.orgId, created.run.id, 15_000, 50);
      expect(settled.status, JSON.stringify(runtime)).toBe('failed');
      const events = await db().query<{ type: string; payload: any }>('SELECT type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [created.run.id]);
      const failed = events.find((e) => e.type === 'run.status_changed' && e.payload.status === 'failed');
      const text = failed!.payload.message.parts.map((p: { text?: string }) => p.text ?? '').join('');
      expect(text).toMatch(reason);
      expect(text).toContain('Nothing was sent');
      expect(JSON.stringify(events)).not.toContain(PLATFORM_VALUE);
      expect(JSON.stringify(events)).not.toContain(process.env[`${namespaceOf(idB)}TOKEN`]);
      expect(hits(new URL(runtime.url).pathname)).toHaveLength(0);
    }
    expect(received.filter((r) => r.path.startsWith('/leak/'))).toEqual([]);
    expect(received.some((r) => JSON.stringify(r.headers).includes(PLATFORM_VALUE) || r.body.includes(PLATFORM_VALUE))).toBe(false);
  });
});

describe('without an encryption secret', () => {
  it('secret management answers runtime_secret.not_configured (422) with the variable to set', async () => {
    const bare = await startStack({ worker: false });
    try {
      const res = await adminRequest<any>(bare.baseUrl, bare.adminKey, 'POST', '/v1/runtime-secrets', { name: 'x', value: 'v' });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('runtime_secret.not_configured');
      expect(res.body.error.message).toContain('RUNTIME_SECRET_ENCRYPTION_SECRET');
      expect((await adminRequest<any>(bare.baseUrl, bare.adminKey, 'GET', '/v1/runtime-secrets')).body).toEqual({ runtimeSecrets: [] });
    } finally {
      await bare.close();
    }
  });
});
