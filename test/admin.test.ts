import { randomUUID } from 'node:crypto';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DatabaseService } from '#libs/db';
import { AgentDirectory, BindingService } from '#libs/registry';
import { runsOf } from './support/runs.js';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { RevisionRepository } from '../libs/registry/src/revision.repository.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { testEnv } from './support/env.js';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from({ length: n }, () => ALNUM[Math.floor(Math.random() * 62)]).join('');
const uid = () => randomUUID().slice(0, 8);

const ORG_SLUG = `acme-${uid()}`;
const ROOT_KEY = `aaas_${alnum(8)}_${alnum(32)}`;

let app: NestFastifyApplication;
let base: string;
let db: DatabaseService;

const call = (key: string | null, method: string, path: string, body?: unknown, headers?: Record<string, string>) => adminRequest(base, key, method, path, body, headers);
const root = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => call(ROOT_KEY, method, path, body, headers);

const SKILL = { id: 'echo', name: 'Echo', description: 'Echoes', tags: ['demo'] };
const PROFILES = { a2a: { skillsProjection: [SKILL] } };
const RUNTIME = { kind: 'scripted', rules: [] };

async function newAgent(key = ROOT_KEY, extra: Record<string, unknown> = {}): Promise<{ id: string; slug: string }> {
  const slug = `ag-${uid()}`;
  const res = await call(key, 'POST', '/v1/agents', { slug, name: `Agent ${slug}`, description: 'does things', ...extra });
  expect(res.status).toBe(201);
  return res.body;
}

async function newDraft(agentId: string, key = ROOT_KEY): Promise<{ id: string; number: number; status: string }> {
  const res = await call(key, 'POST', `/v1/agents/${agentId}/revisions`, { protocolProfiles: PROFILES, runtime: RUNTIME });
  expect(res.status).toBe(201);
  return res.body;
}

/** A second organization, created through the API with the platform key. */
async function newOrg(): Promise<{ id: string; slug: string; key: string; keyId: string }> {
  const slug = `org-${uid()}`;
  const res = await root('POST', '/v1/organizations', { slug, name: `Org ${slug}` });
  expect(res.status).toBe(201);
  return { id: res.body.id, slug, key: res.body.adminKey.key, keyId: res.body.adminKey.id };
}

beforeAll(async () => {
  app = await createApiApp({ ...testEnv(), BOOTSTRAP_ORG_SLUG: ORG_SLUG, BOOTSTRAP_ADMIN_KEY: ROOT_KEY });
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  base = `http://127.0.0.1:${address.port}`;
  db = app.get(DatabaseService);
});

afterAll(async () => {
  await app?.close();
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('admin API: publishing', () => {
  it('creates, drafts, publishes, activates and binds an agent; the directory serves it', async () => {
    const slug = `echo-${uid()}`;
    const created = await root('POST', '/v1/agents', {
      slug,
      name: 'Echo',
      description: 'Echoes what you say',
      provider: { organization: 'Acme', url: 'https://acme.test' },
      documentationUrl: 'https://acme.test/docs',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ slug, name: 'Echo', isDefault: false, activeRevisionId: null, provider: { organization: 'Acme', url: 'https://acme.test' } });
    const agentId: string = created.body.id;

    // :agent accepts the slug as well as the id
    const draft = await call(ROOT_KEY, 'POST', `/v1/agents/${slug}/revisions`, { protocolProfiles: PROFILES, runtime: RUNTIME });
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({ agentId, number: 1, status: 'draft', publishedAt: null });
    // stored with the profile's defaults applied
    expect(draft.body.protocolProfiles.a2a).toMatchObject({ protocolVersion: '1.0', defaultInputModes: ['text/plain'], capabilities: { streaming: false } });
    const revisionId: string = draft.body.id;

    // not servable yet
    const directory = app.get(AgentDirectory);
    await expect(directory.resolve(ORG_SLUG, slug)).rejects.toMatchObject({ code: 'agent.not_published' });

    const published = await root('POST', `/v1/agents/${agentId}/revisions/${revisionId}/publish`);
    expect(published.status).toBe(200);
    expect(published.body.status).toBe('published');
    expect(Date.parse(published.body.publishedAt)).not.toBeNaN();
    // publishing again is a no-op
    const again = await root('POST', `/v1/agents/${agentId}/revisions/${revisionId}/publish`);
    expect(again.status).toBe(200);
    expect(again.body.publishedAt).toBe(published.body.publishedAt);

    const active = await root('PUT', `/v1/agents/${agentId}/active-revision`, { revisionId });
    expect(active.status).toBe(200);
    expect(active.body.activeRevisionId).toBe(revisionId);
    await expect(directory.resolve(ORG_SLUG, slug)).rejects.toMatchObject({ code: 'agent.not_published' }); // no binding yet

    const bound = await root('PUT', `/v1/agents/${agentId}/bindings/a2a`, { transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'apiKey' } });
    expect(bound.status).toBe(201);
    expect(bound.body).toMatchObject({ protocol: 'a2a', path: `/a2a/${ORG_SLUG}/${slug}`, transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'apiKey' }, extensions: [], enabled: true });
    const replaced = await root('PUT', `/v1/agents/${agentId}/bindings/a2a`, {});
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id: bound.body.id, transports: ['JSONRPC'], security: { scheme: 'none' }, enabled: true });

    const detail = await root('GET', `/v1/agents/${agentId}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ id: agentId, activeRevisionId: revisionId, binding: { id: bound.body.id, path: `/a2a/${ORG_SLUG}/${slug}` } });

    const resolved = await directory.resolve(ORG_SLUG, slug);
    expect(resolved.org).toMatchObject({ slug: ORG_SLUG });
    expect(resolved.agent).toEqual({
      id: agentId,
      slug,
      name: 'Echo',
      description: 'Echoes what you say',
      provider: { organization: 'Acme', url: 'https://acme.test' },
      documentationUrl: 'https://acme.test/docs',
      iconUrl: null,
      isDefault: false,
    });
    expect(resolved.revision).toMatchObject({ id: revisionId, number: 1, runtime: { kind: 'scripted', rules: [], defaultRule: 'echo' } });
    expect(resolved.revision.a2a.skillsProjection).toEqual([SKILL]);
    expect(resolved.revision.publishedAt).toBeInstanceOf(Date);
    expect(resolved.binding).toEqual({ id: bound.body.id, transports: ['JSONRPC'], path: `/a2a/${ORG_SLUG}/${slug}`, security: { scheme: 'none' }, extensions: [] });

    // disabling the binding unpublishes the agent at once (no cache)
    const disabled = await root('PATCH', `/v1/agents/${agentId}/bindings/a2a`, { enabled: false });
    expect(disabled.status).toBe(200);
    expect(disabled.body.enabled).toBe(false);
    await expect(directory.resolve(ORG_SLUG, slug)).rejects.toMatchObject({ code: 'agent.not_published' });
    expect((await root('PATCH', `/v1/agents/${agentId}/bindings/a2a`, { enabled: true })).body.enabled).toBe(true);
    await expect(directory.resolve(ORG_SLUG, slug)).resolves.toMatchObject({ agent: { id: agentId } });
    await expect(directory.resolve(ORG_SLUG, 'no-such-agent')).rejects.toMatchObject({ code: 'agent.not_found' });
    await expect(directory.resolve('no-such-org', slug)).rejects.toMatchObject({ code: 'agent.not_found' });

    // lists
    const revisions = await root('GET', `/v1/agents/${agentId}/revisions`);
    expect(revisions.body.revisions.map((r: { id: string }) => r.id)).toEqual([revisionId]);
    const agents = await root('GET', '/v1/agents');
    expect(agents.body.agents.map((a: { id: string }) => a.id)).toContain(agentId);
  });

  it('numbers revisions per agent, moves the active revision and retires the old one', async () => {
    const agent = await newAgent();
    const [r1, r2] = [await newDraft(agent.id), await newDraft(agent.id)];
    expect([r1.number, r2.number]).toEqual([1, 2]);
    // concurrent drafts still get distinct, gapless numbers
    const more = await Promise.all(Array.from({ length: 5 }, () => newDraft(agent.id)));
    expect(more.map((r) => r.number).sort()).toEqual([3, 4, 5, 6, 7]);

    // a draft cannot be active, nor retired
    const draftActive = await root('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: r2.id });
    expect(draftActive.status).toBe(409);
    expect(draftActive.body.error.code).toBe('revision.not_published');
    const draftRetire = await root('POST', `/v1/agents/${agent.id}/revisions/${r2.id}/retire`);
    expect(draftRetire.status).toBe(409);
    expect(draftRetire.body.error.code).toBe('revision.invalid_transition');

    await root('POST', `/v1/agents/${agent.id}/revisions/${r1.id}/publish`);
    await root('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: r1.id });
    const retireActive = await root('POST', `/v1/agents/${agent.id}/revisions/${r1.id}/retire`);
    expect(retireActive.status).toBe(409);
    expect(retireActive.body.error.code).toBe('revision.invalid_transition');

    await root('POST', `/v1/agents/${agent.id}/revisions/${r2.id}/publish`);
    expect((await root('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: r2.id })).body.activeRevisionId).toBe(r2.id);
    const retired = await root('POST', `/v1/agents/${agent.id}/revisions/${r1.id}/retire`);
    expect(retired.status).toBe(200);
    expect(retired.body).toMatchObject({ status: 'retired' });
    expect(retired.body.retiredAt).not.toBeNull();

    // a retired revision can be neither activated nor published again
    const retiredActive = await root('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: r1.id });
    expect(retiredActive.status).toBe(409);
    expect(retiredActive.body.error.code).toBe('revision.not_published');
    const republish = await root('POST', `/v1/agents/${agent.id}/revisions/${r1.id}/publish`);
    expect(republish.status).toBe(409);
    expect(republish.body.error.code).toBe('revision.invalid_transition');

    // unknown revision ids (well-formed or not) are 404
    for (const id of [randomUUID(), 'not-a-uuid']) {
      const res = await root('GET', `/v1/agents/${agent.id}/revisions/${id}`);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('revision.not_found');
    }
    const missing = await root('PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: randomUUID() });
    expect(missing.status).toBe(404);
  });

  it('rejects a second agent with the same slug in the org (409 agent.conflict) and uuid-shaped slugs', async () => {
    const agent = await newAgent();
    const dup = await root('POST', '/v1/agents', { slug: agent.slug, name: 'x', description: 'y' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('agent.conflict');
    const uuidSlug = await root('POST', '/v1/agents', { slug: randomUUID(), name: 'x', description: 'y' });
    expect(uuidSlug.status).toBe(422);
    expect(uuidSlug.body.error.details.issues[0].path).toBe('slug');
  });

  it('updates identity fields with PATCH, never the slug', async () => {
    const agent = await newAgent();
    const res = await root('PATCH', `/v1/agents/${agent.slug}`, { name: 'Renamed', iconUrl: 'https://acme.test/i.png', provider: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: agent.id, slug: agent.slug, name: 'Renamed', iconUrl: 'https://acme.test/i.png', provider: null });
    const slugChange = await root('PATCH', `/v1/agents/${agent.id}`, { slug: 'other' });
    expect(slugChange.status).toBe(422);
    const empty = await root('PATCH', `/v1/agents/${agent.id}`, {});
    expect(empty.status).toBe(422);
  });

  it('binding: 409 binding.conflict on a second create through the service, 404 before one exists', async () => {
    const agent = await newAgent();
    const none = await root('GET', `/v1/agents/${agent.id}/bindings/a2a`);
    expect(none.status).toBe(404);
    expect(none.body.error.code).toBe('binding.not_found');
    const patchNone = await root('PATCH', `/v1/agents/${agent.id}/bindings/a2a`, { enabled: false });
    expect(patchNone.status).toBe(404);
    const bindings = app.get(BindingService);
    const orgId = (await root('GET', '/v1/organization')).body.id;
    await bindings.create(orgId, agent.id, {});
    await expect(bindings.create(orgId, agent.id, {})).rejects.toMatchObject({ code: 'binding.conflict' });
    // GRPC is a transport now (the gRPC binding); an unknown one is refused
    const badTransport = await root('PUT', `/v1/agents/${agent.id}/bindings/a2a`, { transports: ['SOAP'] });
    expect(badTransport.status).toBe(422);
    expect(badTransport.body.error.details.issues[0].path).toBe('transports.0');
  });
});

describe('admin API: revision immutability and validation', () => {
  it('a published revision cannot be modified (409 revision.immutable), and its content is unchanged', async () => {
    const agent = await newAgent();
    const rev = await newDraft(agent.id);
    await root('POST', `/v1/agents/${agent.id}/revisions/${rev.id}/publish`);
    const patch = await root('PATCH', `/v1/agents/${agent.id}/revisions/${rev.id}`, { runtime: { kind: 'scripted', rules: [], defaultRule: 'echo' } });
    expect(patch.status).toBe(409);
    expect(patch.body.error.code).toBe('revision.immutable');
    const after = await root('GET', `/v1/agents/${agent.id}/revisions/${rev.id}`);
    expect(after.body.runtime).toEqual({ kind: 'scripted', rules: [], defaultRule: 'echo' });
  });

  it('when a publish races an edit, the database trigger rejects it and the API still answers 409 revision.immutable', async () => {
    const agent = await newAgent();
    const rev = await newDraft(agent.id);
    await root('POST', `/v1/agents/${agent.id}/revisions/${rev.id}/publish`);
    // the service's own check sees the revision as it was just before the publish committed
    const repo = app.get(RevisionRepository);
    const find = repo.find.bind(repo);
    const spy = vi.spyOn(repo, 'find').mockImplementationOnce(async (...args) => {
      const current = await find(...args);
      return current ? { ...current, status: 'draft' as const, publishedAt: null } : null;
    });
    const newProfiles = { a2a: { skillsProjection: [{ ...SKILL, name: 'Changed' }] } };
    const res = await root('PATCH', `/v1/agents/${agent.id}/revisions/${rev.id}`, { protocolProfiles: newProfiles });
    expect(spy).toHaveBeenCalled();
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('revision.immutable');
    const stored = await root('GET', `/v1/agents/${agent.id}/revisions/${rev.id}`);
    expect(stored.body.protocolProfiles.a2a.skillsProjection[0].name).toBe('Echo');
    // and the trigger guards direct SQL too
    await expect(db.query(`UPDATE agent_revisions SET runtime = '{}'::jsonb WHERE id = $1`, [rev.id])).rejects.toMatchObject({ code: '23514' });
  });

  it('a draft can be edited; invalid profiles and runtimes are 422 request.invalid with issue paths', async () => {
    const agent = await newAgent();
    const rev = await newDraft(agent.id);

    const badProfile = await root('POST', `/v1/agents/${agent.id}/revisions`, { protocolProfiles: { a2a: { skillsProjection: [] } }, runtime: RUNTIME });
    expect(badProfile.status).toBe(422);
    expect(badProfile.body.error.code).toBe('request.invalid');
    expect(badProfile.body.error.details.issues.map((i: { path: string }) => i.path)).toContain('protocolProfiles.a2a.skillsProjection');

    const badRuntime = await root('POST', `/v1/agents/${agent.id}/revisions`, {
      protocolProfiles: PROFILES,
      runtime: { kind: 'scripted', rules: [{ match: { text: '(' }, steps: [{ type: 'message', text: 'x' }] }] },
    });
    expect(badRuntime.status).toBe(422);
    expect(badRuntime.body.error.details.issues).toEqual([expect.objectContaining({ path: 'runtime.rules.0.match.text' })]);

    const unknownKind = await root('POST', `/v1/agents/${agent.id}/revisions`, { protocolProfiles: PROFILES, runtime: { kind: 'llm' } });
    expect(unknownKind.status).toBe(422);
    expect(unknownKind.body.error.code).toBe('runtime.unknown_kind');

    const missingKind = await root('POST', `/v1/agents/${agent.id}/revisions`, { protocolProfiles: PROFILES, runtime: {} });
    expect(missingKind.status).toBe(422);
    expect(missingKind.body.error.details.issues[0].path).toBe('runtime.kind');

    const badPatch = await root('PATCH', `/v1/agents/${agent.id}/revisions/${rev.id}`, { runtime: { kind: 'scripted', rules: 'nope' } });
    expect(badPatch.status).toBe(422);
    expect(badPatch.body.error.details.issues[0].path).toBe('runtime.rules');

    const rules = [{ match: { text: 'hello' }, steps: [{ type: 'reply', text: 'hi' }] }];
    const edited = await root('PATCH', `/v1/agents/${agent.id}/revisions/${rev.id}`, { runtime: { kind: 'scripted', rules } });
    expect(edited.status).toBe(200);
    expect(edited.body.runtime.rules).toEqual(rules);
    expect(edited.body.status).toBe('draft');
    // nothing invalid was stored
    expect((await root('GET', `/v1/agents/${agent.id}/revisions`)).body.revisions).toHaveLength(1);
  });
});

describe('admin API: tenancy', () => {
  it("org B's key sees none of org A's agents, revisions, bindings, runs or keys (404, never 403)", async () => {
    const pub = await publishAgent(base, ROOT_KEY, { slug: `ten-${uid()}` });
    const orgB = await newOrg();
    const orgA = (await root('GET', '/v1/organization')).body;
    const { run } = await runsOf(app).createRun({
      orgId: orgA.id,
      agentId: pub.agentId,
      revisionId: pub.revisionId,
      message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hi' }] },
    });
    const keyA = await root('POST', '/v1/api-keys', { name: 'a-key', scopes: ['a2a:invoke'] });

    const asB = (method: string, path: string, body?: unknown) => call(orgB.key, method, path, body);
    expect((await asB('GET', '/v1/organization')).body).toMatchObject({ id: orgB.id, slug: orgB.slug });
    const probes: Array<[string, string, unknown?]> = [
      ['GET', `/v1/agents/${pub.agentId}`],
      ['GET', `/v1/agents/${pub.slug}`],
      ['PATCH', `/v1/agents/${pub.agentId}`, { name: 'pwned' }],
      ['GET', `/v1/agents/${pub.agentId}/revisions`],
      ['GET', `/v1/agents/${pub.agentId}/revisions/${pub.revisionId}`],
      ['POST', `/v1/agents/${pub.agentId}/revisions`, { protocolProfiles: PROFILES, runtime: RUNTIME }],
      ['POST', `/v1/agents/${pub.agentId}/revisions/${pub.revisionId}/retire`],
      ['PUT', `/v1/agents/${pub.agentId}/active-revision`, { revisionId: pub.revisionId }],
      ['GET', `/v1/agents/${pub.agentId}/bindings/a2a`],
      ['PATCH', `/v1/agents/${pub.agentId}/bindings/a2a`, { enabled: false }],
      ['PUT', `/v1/agents/${pub.agentId}/bindings/a2a`, {}],
      ['GET', `/v1/runs/${run.id}`],
      ['GET', `/v1/runs/${run.id}/events`],
      ['DELETE', `/v1/api-keys/${keyA.body.id}`],
    ];
    for (const [method, path, body] of probes) {
      const res = await asB(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    expect((await asB('GET', '/v1/agents')).body.agents).toEqual([]);
    expect((await asB('GET', '/v1/runs')).body.runs).toEqual([]);
    expect((await asB('GET', `/v1/runs?agentId=${pub.agentId}`)).body.runs).toEqual([]);
    expect((await asB('GET', '/v1/api-keys')).body.apiKeys.map((k: { id: string }) => k.id)).toEqual([orgB.keyId]);

    // nothing of A changed; A still sees it all
    expect((await root('GET', `/v1/agents/${pub.agentId}`)).body).toMatchObject({ name: pub.slug, binding: { enabled: true } });
    expect((await root('GET', `/v1/runs/${run.id}`)).status).toBe(200);

    // B may reuse A's agent slug in its own org
    const same = await asB('POST', '/v1/agents', { slug: pub.slug, name: 'B', description: 'b' });
    expect(same.status).toBe(201);
    // B's admin key is not a platform key
    const orgC = await asB('POST', '/v1/organizations', { slug: `org-${uid()}`, name: 'C' });
    expect(orgC.status).toBe(403);
    expect(orgC.body.error.code).toBe('auth.forbidden');
  });

  it('creating an organization with a taken slug is 409 org.conflict', async () => {
    const res = await root('POST', '/v1/organizations', { slug: ORG_SLUG, name: 'again' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('org.conflict');
  });
});

describe('admin API: authentication', () => {
  it('401 without a key, 401 with a bad one, 403 without the scope', async () => {
    const missing = await call(null, 'GET', '/v1/agents');
    expect(missing.status).toBe(401);
    expect(missing.body.error.code).toBe('auth.missing_credentials');
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    expect(typeof missing.body.requestId).toBe('string');

    for (const bad of ['nonsense', `aaas_${alnum(8)}_${alnum(32)}`, `${ROOT_KEY.slice(0, -1)}${ROOT_KEY.endsWith('a') ? 'b' : 'a'}`]) {
      const res = await call(bad, 'GET', '/v1/agents');
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('auth.invalid_credentials');
    }

    const invoke = await root('POST', '/v1/api-keys', { name: 'invoker', scopes: ['a2a:invoke'] });
    expect(invoke.status).toBe(201);
    expect(invoke.body.key).toMatch(/^aaas_[A-Za-z0-9]{8}_[A-Za-z0-9]{32}$/);
    expect(invoke.body.key.split('_')[1]).toBe(invoke.body.prefix);
    for (const [method, path] of [['GET', '/v1/agents'], ['GET', '/v1/organization'], ['GET', '/v1/runs'], ['POST', '/v1/api-keys']] as const) {
      const res = await call(invoke.body.key, method, path, method === 'POST' ? { name: 'x', scopes: ['admin'] } : undefined);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error.code).toBe('auth.forbidden');
    }
  });

  it('accepts X-API-Key; lists keys without secrets; a revoked key stops working', async () => {
    const created = await root('POST', '/v1/api-keys', { name: 'temp', scopes: ['admin'] });
    const key: string = created.body.key;
    const viaHeader = await adminRequest(base, null, 'GET', '/v1/organization', undefined, { 'x-api-key': key });
    expect(viaHeader.status).toBe(200);

    expect(created.body.lastUsedAt).toBeNull();
    // the call above is recorded as the key's last use, off the request path: it may land a little later
    const list = await vi.waitFor(
      async () => {
        const res = await root('GET', '/v1/api-keys');
        expect(res.body.apiKeys.find((k: { id: string }) => k.id === created.body.id).lastUsedAt).not.toBeNull();
        return res;
      },
      { timeout: 2_000, interval: 25 },
    );
    const listed = list.body.apiKeys.find((k: { id: string }) => k.id === created.body.id);
    expect(listed).toEqual({ id: created.body.id, name: 'temp', prefix: created.body.prefix, scopes: ['admin'], createdAt: created.body.createdAt, revokedAt: null, lastUsedAt: expect.any(String) });
    expect(JSON.stringify(list.body)).not.toContain(key.split('_')[2]);
    const [stored] = await db.query<{ secret_hash: string }>('SELECT secret_hash FROM api_keys WHERE id = $1', [created.body.id]);
    expect(stored!.secret_hash).toMatch(/^[0-9a-f]{64}$/);

    const del = await root('DELETE', `/v1/api-keys/${created.body.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    const after = await call(key, 'GET', '/v1/organization');
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('auth.invalid_credentials');
    expect((await root('GET', '/v1/api-keys')).body.apiKeys.find((k: { id: string }) => k.id === created.body.id).revokedAt).not.toBeNull();
    expect((await root('DELETE', `/v1/api-keys/${randomUUID()}`)).status).toBe(404);
    expect((await root('DELETE', '/v1/api-keys/not-a-uuid')).status).toBe(404);
  });

  it('a key cannot grant scopes it does not hold', async () => {
    const org = await newOrg();
    const res = await call(org.key, 'POST', '/v1/api-keys', { name: 'escalate', scopes: ['admin', 'platform'] });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'auth.forbidden', details: { scopes: ['platform'] } });
    const bad = await root('POST', '/v1/api-keys', { name: 'x', scopes: ['root'] });
    expect(bad.status).toBe(422);
  });
});

describe('admin API: request handling', () => {
  it('malformed JSON is 400 request.malformed; unknown routes are 404; unknown fields are 422', async () => {
    const malformed = await root('POST', '/v1/agents', '{"slug": "x",');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('request.malformed');
    const malformedPatch = await root('PATCH', '/v1/agents/whatever', '{nope');
    expect(malformedPatch.status).toBe(400);

    const unknown = await root('GET', '/v1/nothing-here');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('route.not_found');

    const extra = await root('POST', '/v1/agents', { slug: `x-${uid()}`, name: 'x', description: 'y', color: 'red' });
    expect(extra.status).toBe(422);
    expect(extra.body.error.code).toBe('request.invalid');
  });
});

describe('admin API: Idempotency-Key', () => {
  it('replays the stored response for the same request and runs it once', async () => {
    const key = `idem-${randomUUID()}`;
    const body = { slug: `idem-${uid()}`, name: 'Idem', description: 'once' };
    const first = await root('POST', '/v1/agents', body, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    // same request, keys in another order: same canonical body
    const second = await root('POST', '/v1/agents', { description: 'once', name: 'Idem', slug: body.slug }, { 'idempotency-key': key });
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    const agents = (await root('GET', '/v1/agents')).body.agents.filter((a: { slug: string }) => a.slug === body.slug);
    expect(agents).toHaveLength(1);

    const mismatch = await root('POST', '/v1/agents', { ...body, name: 'Other' }, { 'idempotency-key': key });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.error.code).toBe('idempotency.mismatch');
    // the same key on another route is another request too
    const otherRoute = await root('POST', '/v1/api-keys', { name: 'k', scopes: ['admin'] }, { 'idempotency-key': key });
    expect(otherRoute.status).toBe(422);
    expect(otherRoute.body.error.code).toBe('idempotency.mismatch');
  });

  it('concurrent duplicates have one effect and all get the same response', async () => {
    const key = `idem-${randomUUID()}`;
    const agent = await newAgent();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => root('POST', `/v1/agents/${agent.id}/revisions`, { protocolProfiles: PROFILES, runtime: RUNTIME }, { 'idempotency-key': key })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect((await root('GET', `/v1/agents/${agent.id}/revisions`)).body.revisions).toHaveLength(1);
  });

  it('a failed request is not recorded: the same key runs again', async () => {
    const key = `idem-${randomUUID()}`;
    const agent = await newAgent();
    const body = { slug: agent.slug, name: 'dup', description: 'dup' };
    const conflict = await root('POST', '/v1/agents', body, { 'idempotency-key': key });
    expect(conflict.status).toBe(409);
    const [row] = await db.query<{ n: string }>('SELECT count(*) AS n FROM idempotency_records WHERE key = $1', [key]);
    expect(Number(row!.n)).toBe(0);
  });

  it('replays a created API key without its secret, which is never stored', async () => {
    const key = `idem-${randomUUID()}`;
    const first = await root('POST', '/v1/api-keys', { name: 'ci', scopes: ['a2a:invoke'] }, { 'idempotency-key': key });
    const second = await root('POST', '/v1/api-keys', { name: 'ci', scopes: ['a2a:invoke'] }, { 'idempotency-key': key });
    expect(second.status).toBe(201);
    expect(first.body.key).toMatch(/^aaas_/);
    expect(second.body).toEqual({ ...first.body, key: null });
    const [stored] = await db.query<{ response: unknown }>('SELECT response FROM idempotency_records WHERE key = $1', [key]);
    expect(JSON.stringify(stored!.response)).not.toContain(first.body.key);
    const keys = (await root('GET', '/v1/api-keys')).body.apiKeys.filter((k: { id: string }) => k.id === first.body.id);
    expect(keys).toHaveLength(1);
    const bad = await root('POST', '/v1/api-keys', { name: 'ci', scopes: ['a2a:invoke'] }, { 'idempotency-key': 'has space' });
    expect(bad.status).toBe(422);
  });
});

describe('admin API: default agent', () => {
  it('isDefault moves between agents, and resolveDefault serves the published default', async () => {
    const a = await publishAgent(base, ROOT_KEY, { slug: `def-${uid()}`, isDefault: true });
    const isDefault = async (id: string) => (await root('GET', `/v1/agents/${id}`)).body.isDefault as boolean;
    expect(await isDefault(a.agentId)).toBe(true);
    const directory = app.get(AgentDirectory);
    expect((await directory.resolveDefault()).agent.id).toBe(a.agentId);

    const b = await newAgent(ROOT_KEY, { isDefault: true });
    expect(await isDefault(b.id)).toBe(true);
    expect(await isDefault(a.agentId)).toBe(false);
    // b has no published revision: there is no servable default
    await expect(directory.resolveDefault()).rejects.toMatchObject({ code: 'agent.not_published' });

    const back = await root('PATCH', `/v1/agents/${a.agentId}`, { isDefault: true });
    expect(back.body.isDefault).toBe(true);
    expect(await isDefault(b.id)).toBe(false);
    expect((await directory.resolveDefault()).agent).toMatchObject({ id: a.agentId, isDefault: true });

    // concurrent moves: exactly one default remains in the deployment
    const many = await Promise.all(Array.from({ length: 4 }, () => newAgent()));
    await Promise.all(many.map((m) => root('PATCH', `/v1/agents/${m.id}`, { isDefault: true })));
    const [row] = await db.query<{ n: string }>('SELECT count(*) AS n FROM agents WHERE is_default');
    expect(Number(row!.n)).toBe(1);
  });

  it('only a platform key may make an agent the deployment default (403 for an org admin key)', async () => {
    const org = await newOrg();
    const asOrg = (method: string, path: string, body?: unknown) => call(org.key, method, path, body);
    const created = await asOrg('POST', '/v1/agents', { slug: `hijack-${uid()}`, name: 'H', description: 'h', isDefault: true });
    expect(created.status).toBe(403);
    expect(created.body.error).toMatchObject({ code: 'auth.forbidden', details: { requiredScope: 'platform' } });
    const plain = await asOrg('POST', '/v1/agents', { slug: `plain-${uid()}`, name: 'P', description: 'p' });
    expect(plain.status).toBe(201);
    const patched = await asOrg('PATCH', `/v1/agents/${plain.body.id}`, { isDefault: true });
    expect(patched.status).toBe(403);
    expect((await asOrg('GET', `/v1/agents/${plain.body.id}`)).body.isDefault).toBe(false);
    expect((await asOrg('PATCH', `/v1/agents/${plain.body.id}`, { isDefault: false })).status).toBe(200);
  });
});

describe('admin API: runs', () => {
  it('lists runs newest first with keyset pagination and filters; reads a run and its events', async () => {
    const pub = await publishAgent(base, ROOT_KEY, { slug: `runs-${uid()}` });
    const orgId = (await root('GET', '/v1/organization')).body.id;
    const runs = runsOf(app);
    const contextId = randomUUID();
    const created: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { run } = await runs.createRun({
        orgId,
        agentId: pub.agentId,
        revisionId: pub.revisionId,
        threadId: i < 2 ? contextId : undefined,
        message: { messageId: randomUUID(), role: 'user', parts: [{ text: `m${i}` }] },
      });
      created.push(run.id);
    }
    await runs.setStatus(orgId, created[0]!, 'completed');

    const seen: string[] = [];
    const statusAts: string[] = [];
    let cursor: string | null = null;
    const pageSizes: number[] = [];
    do {
      const q: string = `/v1/runs?agentId=${pub.agentId}&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
      const page = await root('GET', q);
      expect(page.status).toBe(200);
      pageSizes.push(page.body.runs.length);
      seen.push(...page.body.runs.map((r: { id: string }) => r.id));
      statusAts.push(...page.body.runs.map((r: { statusAt: string }) => r.statusAt));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(pageSizes).toEqual([3, 3, 1]);
    expect(new Set(seen)).toEqual(new Set(created));
    expect(seen[0]).toBe(created[0]); // its status changed last
    expect([...statusAts].sort().reverse()).toEqual(statusAts);

    const completed = await root('GET', `/v1/runs?agentId=${pub.agentId}&status=completed`);
    expect(completed.body.runs.map((r: { id: string }) => r.id)).toEqual([created[0]]);
    const several = await root('GET', `/v1/runs?agentId=${pub.agentId}&status=completed,submitted&limit=100`);
    expect(several.body.runs).toHaveLength(7);
    expect(several.body.nextCursor).toBeNull();
    const byContext = await root('GET', `/v1/runs?contextId=${contextId}`);
    expect(new Set(byContext.body.runs.map((r: { id: string }) => r.id))).toEqual(new Set(created.slice(0, 2)));
    expect(byContext.body.runs[0].contextId).toBe(contextId);
    expect((await root('GET', '/v1/runs')).body.runs.length).toBeLessThanOrEqual(20);

    // a cursor with a valid shape but no (or a wrong) signature is refused like garbage
    const forged = Buffer.from(JSON.stringify({ s: new Date().toISOString(), i: created[0], m: 'A'.repeat(22) })).toString('base64url');
    for (const q of ['cursor=garbage', `cursor=${Buffer.from('{"s":"x","i":"y"}').toString('base64url')}`, `cursor=${forged}`, 'limit=0', 'limit=101', 'status=bogus', 'agentId=nope']) {
      const bad = await root('GET', `/v1/runs?${q}`);
      expect(bad.status, q).toBe(422);
      expect(bad.body.error.code).toBe('request.invalid');
    }

    const detail = await root('GET', `/v1/runs/${created[0]}`);
    expect(detail.status).toBe(200);
    expect(detail.body.run).toMatchObject({ id: created[0], status: 'completed', agentId: pub.agentId });
    expect(detail.body.history).toEqual([expect.objectContaining({ role: 'user', parts: [{ text: 'm0' }] })]);

    const events = await root('GET', `/v1/runs/${created[0]}/events`);
    expect(events.body.events.map((e: { sequence: number; event: { type: string } }) => [e.sequence, e.event.type])).toEqual([
      [1, 'run.created'],
      [2, 'message.added'],
      [3, 'run.status_changed'],
    ]);
    expect(events.body.nextAfter).toBe(3);
    const tail = await root('GET', `/v1/runs/${created[0]}/events?after=1&limit=1`);
    expect(tail.body.events.map((e: { sequence: number }) => e.sequence)).toEqual([2]);
    expect(tail.body.nextAfter).toBe(2);
    const none = await root('GET', `/v1/runs/${created[0]}/events?after=3`);
    expect(none.body).toEqual({ events: [], nextAfter: 3 });

    expect((await root('GET', `/v1/runs/${randomUUID()}`)).status).toBe(404);
    expect((await root('GET', '/v1/runs/not-a-uuid/events')).status).toBe(404);
  });
});

describe('admin API: OpenAPI', () => {
  it('documents the admin routes at /docs/openapi.json', async () => {
    const doc = await adminRequest(base, null, 'GET', '/docs/openapi.json');
    expect(doc.status).toBe(200);
    const paths = doc.body.paths as Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown>; security?: unknown }>>;
    for (const [path, method] of [
      ['/v1/organizations', 'post'],
      ['/v1/organization', 'get'],
      ['/v1/api-keys', 'post'],
      ['/v1/api-keys/{id}', 'delete'],
      ['/v1/agents', 'post'],
      ['/v1/agents/{agent}', 'patch'],
      ['/v1/agents/{agent}/revisions', 'post'],
      ['/v1/agents/{agent}/revisions/{revisionId}/publish', 'post'],
      ['/v1/agents/{agent}/revisions/{revisionId}/retire', 'post'],
      ['/v1/agents/{agent}/active-revision', 'put'],
      ['/v1/agents/{agent}/bindings/a2a', 'put'],
      ['/v1/runs', 'get'],
      ['/v1/runs/{runId}/events', 'get'],
    ] as const) {
      expect(paths[path]?.[method], `${method} ${path}`).toBeDefined();
      expect(paths[path]![method]!.security).toEqual([{ 'X-API-Key': [] }, { bearer: [] }]);
    }
    const createAgent = paths['/v1/agents']!.post!;
    expect(createAgent.requestBody).toMatchObject({ content: { 'application/json': { schema: { required: ['slug', 'name', 'description'] } } } });
    expect(createAgent.responses['201']).toMatchObject({ content: { 'application/json': { schema: { properties: { activeRevisionId: {} } } } } });
    expect(createAgent.responses['401']).toBeDefined();
    const createRevision = paths['/v1/agents/{agent}/revisions']!.post!;
    expect(createRevision.requestBody).toMatchObject({ content: { 'application/json': { schema: { properties: { protocolProfiles: {}, runtime: {} } } } } });
    expect(doc.body.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });
});
