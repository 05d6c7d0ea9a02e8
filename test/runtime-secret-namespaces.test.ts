import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { sendMessageRpc } from './support/a2a-rpc.js';
import { seedAgent } from './support/fixtures.js';
import { runsOf } from './support/runs.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43 row 12: `AAAS_RUNTIME_SECRET_ACME_EU_*` belonged to `acme` until an org `acme-eu` was
 * created (the longest existing slug owned a name). Now a worker variable's owner is read from its
 * name and the operator's RUNTIME_SECRET_ENV_NAMESPACES only: `acme`, `acme-eu` (mapped by the
 * operator to the token `ACME_EU`, its older release's names) and `acme-us` (not mapped) answer
 * the same before and after the others are created, at draft (422 naming the field) and when their
 * runs resolve the variable, and each run signs with its own organization's value.
 */
const P = 'AAAS_RUNTIME_SECRET_';
const base = `acme${randomUUID().slice(0, 8)}`;
const SLUG = { acme: base, eu: `${base}-eu`, us: `${base}-us` };
const T = base.toUpperCase();

let stack: Stack;
let receiver: http.Server;
let url = '';
const received: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string }> = [];
const keys: Record<string, string> = {};
const setVars: string[] = [];
const orgs: Record<keyof typeof SLUG, { id: string; key: string }> = {} as never;

const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;
const idForm = (orgId: string) => `${P}${orgId.replace(/-/g, '').toUpperCase()}_`;
function setVar(name: string): string {
  keys[name] = whsec();
  process.env[name] = keys[name];
  setVars.push(name);
  return name;
}

/** The variables an older release derived from the slugs: which organization they belong to must not follow which slugs exist. */
const HOOK = `${P}${T}_HOOK`;
const EU_HOOK = `${P}${T}_EU_HOOK`;
const US_HOOK = `${P}${T}_US_HOOK`;
const WEBHOOK_KEY = `${P}${T}_WEBHOOK_KEY`;

async function createOrg(which: keyof typeof SLUG): Promise<void> {
  const res = await adminRequest<{ id: string; adminKey: { key: string } }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/organizations', { slug: SLUG[which], name: which });
  expect(res.status).toBe(201);
  orgs[which] = { id: res.body.id, key: res.body.adminKey.key };
}

let agentSeq = 0;
/** Draft an http revision (or an a2a one) naming `secretEnv` for `which`: the status, and the error when refused. */
async function draft(which: keyof typeof SLUG, secretEnv: string, kind: 'http' | 'a2a' = 'http') {
  const key = orgs[which].key;
  const agent = await adminRequest<{ id: string }>(stack.baseUrl, key, 'POST', '/v1/agents', { slug: `draft-${++agentSeq}`, name: 'd', description: 'd' });
  const runtime = kind === 'http' ? { kind, url: `${url}/hook`, secretEnv } : { kind, url: `${url}/a2a`, credentials: { secretEnv } };
  const res = await adminRequest<any>(stack.baseUrl, key, 'POST', `/v1/agents/${agent.body.id}/revisions`, {
    protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }] } },
    runtime,
  });
  return { status: res.status, error: res.body?.error };
}

/** 201 or 422 for each variable, drafted by `which`. */
async function verdicts(which: keyof typeof SLUG, names: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (await draft(which, n)).status;
  return out;
}

const signedWith = (r: { headers: http.IncomingHttpHeaders; body: string }, key: string) => {
  try {
    new Webhook(key).verify(r.body, { 'webhook-id': String(r.headers['webhook-id']), 'webhook-timestamp': String(r.headers['webhook-timestamp']), 'webhook-signature': String(r.headers['webhook-signature']) });
    return true;
  } catch {
    return false;
  }
};

/** Publish an http agent of `which` signing with `secretEnv`, send it a message: the run's status, and the request its backend got. */
async function runWith(which: keyof typeof SLUG, secretEnv: string) {
  const path = `/hook/${which}-${++agentSeq}`;
  const agent = await publishAgent(stack.baseUrl, orgs[which].key, { slug: `run-${agentSeq}`, runtime: { kind: 'http', url: `${url}${path}`, secretEnv, retries: 0 } });
  const res = await sendMessageRpc(`${stack.baseUrl}${agent.basePath}`, 'hello');
  return { state: res.body.result?.task?.status?.state, request: received.find((r) => r.path === path) };
}

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ operations: [{ op: 'status', status: 'completed' }] }));
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  // the operator keeps acme-eu's names of the older release: it maps the slug to the token ACME…_EU
  stack = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', RUNTIME_SECRET_ENV_NAMESPACES: `${SLUG.eu}=${T}_EU` } });
  for (const v of [HOOK, EU_HOOK, US_HOOK, WEBHOOK_KEY]) setVar(v);
  await createOrg('acme');
  setVar(`${idForm(orgs.acme.id)}WEB_HOOK`);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => receiver?.close(() => r()));
  for (const v of setVars) delete process.env[v];
});

describe('issue #43 row 12: runtime-secret namespaces do not follow which slugs exist', () => {
  let before: Record<string, number>;
  let hookRun: Awaited<ReturnType<typeof runWith>> | undefined;

  it('acme alone: its id form and its one-_ slug form are its own; the names acme-eu and acme-us would read as are not, nor a slug form with _ in the name', async () => {
    const names = [HOOK, `${idForm(orgs.acme.id)}WEB_HOOK`, EU_HOOK, US_HOOK, WEBHOOK_KEY];
    before = await verdicts('acme', names);
    expect(before).toEqual({ [HOOK]: 201, [`${idForm(orgs.acme.id)}WEB_HOOK`]: 201, [EU_HOOK]: 422, [US_HOOK]: 422, [WEBHOOK_KEY]: 422 });
    // mapped to acme-eu by the operator, whether acme-eu exists or not
    const eu = await draft('acme', EU_HOOK);
    expect(eu.error).toMatchObject({ code: 'runtime.secret_not_allowed', details: { path: 'runtime.secretEnv', secretEnv: EU_HOOK, allowed: `${idForm(orgs.acme.id)}<NAME>` } });
    expect(eu.error.message).toContain("is outside this organization's namespace");
    // ambiguous (acme's US_HOOK, or an acme-us's HOOK): refused, saying so and what to rename it to, at the field
    for (const [kind, path] of [['http', 'runtime.secretEnv'], ['a2a', 'runtime.credentials.secretEnv']] as const) {
      const us = await draft('acme', US_HOOK, kind);
      expect(us.error).toMatchObject({ code: 'runtime.secret_not_allowed', details: { path, secretEnv: US_HOOK, rename: `${idForm(orgs.acme.id)}US_HOOK` } });
      expect(us.error.message).toMatch(/is ambiguous: a name derived from the organization slug with more than one _/);
    }
    expect((await draft('acme', WEBHOOK_KEY)).error.details.rename).toBe(`${idForm(orgs.acme.id)}WEBHOOK_KEY`);
    // a run of acme signs with acme's variable (published now, run again once the others exist)
    hookRun = await runWith('acme', HOOK);
    expect(hookRun.state).toBe('TASK_STATE_COMPLETED');
    expect(signedWith(hookRun.request!, keys[HOOK]!)).toBe(true);
  });

  it('acme-eu and acme-us are created: acme answers exactly as before; each of the three keeps its own namespace', async () => {
    await createOrg('eu');
    await createOrg('us');
    expect(await verdicts('acme', Object.keys(before))).toEqual(before);
    const idOf = (w: keyof typeof SLUG) => `${idForm(orgs[w].id)}HOOK`;
    expect(await verdicts('eu', [EU_HOOK, idOf('eu'), HOOK, US_HOOK, idOf('acme'), idOf('us')])).toEqual({
      [EU_HOOK]: 201,
      [idOf('eu')]: 201,
      [HOOK]: 422,
      [US_HOOK]: 422,
      [idOf('acme')]: 422,
      [idOf('us')]: 422,
    });
    expect(await verdicts('us', [US_HOOK, idOf('us'), HOOK, EU_HOOK, idOf('acme'), idOf('eu')])).toEqual({
      [US_HOOK]: 422,
      [idOf('us')]: 201,
      [HOOK]: 422,
      [EU_HOOK]: 422,
      [idOf('acme')]: 422,
      [idOf('eu')]: 422,
    });
    // acme-us's own older name is ambiguous too (acme's US_HOOK): refused, with its id form to rename to
    expect((await draft('us', US_HOOK)).error.details).toMatchObject({ path: 'runtime.secretEnv', rename: `${idForm(orgs.us.id)}HOOK` });
  });

  it('runs sign with their own organization\'s variable: acme\'s published before the others existed still does', async () => {
    setVar(`${idForm(orgs.us.id)}HOOK`);
    for (const [which, name] of [['acme', HOOK], ['acme', `${idForm(orgs.acme.id)}WEB_HOOK`], ['eu', EU_HOOK], ['us', `${idForm(orgs.us.id)}HOOK`]] as const) {
      const run = await runWith(which, name);
      expect(run.state, `${which} ${name}`).toBe('TASK_STATE_COMPLETED');
      for (const [other, key] of Object.entries(keys)) expect(signedWith(run.request!, key), `${which} ${name} signed with ${other}`).toBe(other === name);
    }
  });

  it('a revision published before this rule (seeded) naming the ambiguous variable fails its run in the worker, for acme and acme-us alike, sending nothing', async () => {
    const db = stack.api.get(DatabaseService);
    const runs = runsOf(stack.api);
    for (const which of ['acme', 'us'] as const) {
      const path = `/leak/${which}`;
      const seed = await seedAgent(db, { kind: 'http', url: `${url}${path}`, secretEnv: US_HOOK, timeoutMs: 60000, retries: 0 }, { orgId: orgs[which].id });
      const created = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'x' }] } });
      expect((await runs.waitUntilSettled(seed.orgId, created.run.id, 15_000, 50)).status).toBe('failed');
      const events = await db.query<{ type: string; payload: any }>('SELECT type, payload FROM run_events WHERE run_id = $1 ORDER BY sequence', [created.run.id]);
      const text = events.find((e) => e.type === 'run.status_changed' && e.payload.status === 'failed')!.payload.message.parts[0].text as string;
      expect(text).toMatch(new RegExp(`^The agent's backend is not configured \\(worker variable ${US_HOOK}\\): worker variable ${US_HOOK} is ambiguous`));
      expect(text).toContain('Nothing was sent');
      expect(received.filter((r) => r.path === path)).toEqual([]);
    }
  });
});
