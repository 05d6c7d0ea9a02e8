import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Endpoint security with bearer JWTs (binding `security: { scheme: 'jwt' }`): a local OIDC issuer
 * (discovery document + JWKS over real HTTP) signs tokens with `jose`; every operation of both
 * bindings refuses a missing, malformed, expired, wrong-audience, wrong-issuer or foreign-key token
 * with 401 and a Bearer challenge, a token without the required scope with 403, and accepts a
 * valid one — whose subject then owns the tasks it creates.
 */
const RUNTIME = { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] };
const AUDIENCE = 'a2a-test-audience';

let stack: Stack;
let agent: PublishedAgent;
let issuerServer: http.Server;
let issuer: string;
let signingKey: CryptoKey;
let rogueKey: CryptoKey;
const KID = 'test-key-1';

/** A signed token; `exp` / `iat` in epoch seconds, `null` to leave the claim out. */
async function token(opts: { sub?: string; scope?: string; aud?: string; iss?: string; exp?: number | null; iat?: number | null; key?: CryptoKey } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ scope: opts.scope ?? 'a2a.invoke' })
    .setProtectedHeader({ alg: 'ES256', kid: KID })
    .setIssuer(opts.iss ?? issuer)
    .setAudience(opts.aud ?? AUDIENCE)
    .setSubject(opts.sub ?? 'alice');
  if (opts.iat !== null) jwt.setIssuedAt(opts.iat ?? now);
  if (opts.exp !== null) jwt.setExpirationTime(opts.exp ?? now + 300);
  return jwt.sign(opts.key ?? signingKey);
}

async function rpc(bearer: string | null, method: string, params: unknown, basePath = agent.basePath): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(`${stack.baseUrl}${basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...(bearer !== null ? { authorization: `Bearer ${bearer}` } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const hold = () => ({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] }, configuration: { returnImmediately: true } });

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  signingKey = pair.privateKey;
  rogueKey = (await generateKeyPair('ES256')).privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  issuerServer = http.createServer((req, res) => {
    const send = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/.well-known/openid-configuration') return send({ issuer, jwks_uri: `${issuer}/jwks`, token_endpoint: `${issuer}/token` });
    if (req.url === '/jwks') return send({ keys: [jwk] });
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => issuerServer.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(issuerServer.address() as AddressInfo).port}`;
  stack = await startStack({ env: { JWT_ISSUER_ALLOWED_CIDRS: '127.0.0.0/8' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'guarded',
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON'],
    security: { scheme: 'jwt', issuer, audience: AUDIENCE, requiredScopes: ['a2a.invoke'], tokenUrl: `${issuer}/token` } as never,
  });
});

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => issuerServer?.close(() => r()));
});

describe('bearer JWT endpoint security', () => {
  it('the card declares the bearer scheme, the OAuth2 client-credentials flow and OIDC discovery (v1.0 and v0.3)', async () => {
    const card = (await (await fetch(agent.cardUrl)).json()) as any;
    expect(card.securitySchemes.bearer).toEqual({ httpAuthSecurityScheme: expect.objectContaining({ scheme: 'Bearer', bearerFormat: 'JWT' }) });
    expect(card.securitySchemes.oauth2.oauth2SecurityScheme.flows.clientCredentials).toEqual({ tokenUrl: `${issuer}/token`, scopes: { 'a2a.invoke': expect.any(String) } });
    expect(card.securitySchemes.oidc.openIdConnectSecurityScheme.openIdConnectUrl).toBe(`${issuer}/.well-known/openid-configuration`);
    expect(card.securityRequirements).toEqual([{ schemes: { bearer: { list: [] } } }, { schemes: { oauth2: { list: ['a2a.invoke'] } } }]);
    const v03 = (await (await fetch(agent.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as any;
    expect(v03.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    expect(v03.securitySchemes.oauth2).toMatchObject({ type: 'oauth2', flows: { clientCredentials: { tokenUrl: `${issuer}/token` } } });
    expect(v03.security).toEqual([{ bearer: [] }, { oauth2: ['a2a.invoke'] }]);
  });

  it('refuses missing, malformed, expired, wrong-audience, wrong-issuer and foreign-key tokens with 401 and a Bearer challenge, on both bindings', async () => {
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, string | null, RegExp]> = [
      ['missing', null, /^Bearer realm="a2a"$/],
      ['malformed', 'not.a.jwt', /error="invalid_token".*malformed/],
      ['expired', await token({ exp: now - 120 }), /error="invalid_token".*expired/],
      ['wrong audience', await token({ aud: 'someone-else' }), /error="invalid_token".*aud/],
      ['wrong issuer', await token({ iss: 'https://evil.example' }), /error="invalid_token".*iss/],
      ['foreign key', await token({ key: rogueKey }), /error="invalid_token".*signature/],
    ];
    for (const [what, bearer, challenge] of cases) {
      const r = await rpc(bearer, 'ListTasks', {});
      expect(r.status, what).toBe(401);
      expect(r.headers.get('www-authenticate'), what).toMatch(challenge);
      expect(r.body.error, what).toBeDefined();
      const rest = await fetch(`${stack.baseUrl}${agent.basePath}/tasks`, { headers: { 'a2a-version': '1.0', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) } });
      expect(rest.status, `${what} (REST)`).toBe(401);
      expect(rest.headers.get('www-authenticate'), `${what} (REST)`).toMatch(challenge);
    }
    // an API key is not a credential for a jwt binding
    expect((await rpc(stack.adminKey, 'ListTasks', {})).status).toBe(401);
  });

  it('a token without the required scope is 403 insufficient_scope', async () => {
    const r = await rpc(await token({ scope: 'other' }), 'SendMessage', hold());
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="a2a.invoke"/);
  });

  it('a valid token works with the SDK client; its subject owns its tasks, another subject cannot see them, a2a:all-tasks can', async () => {
    const alice = await token({ sub: 'alice' });
    const client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl: (input, init) => fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), authorization: `Bearer ${alice}` } }) })],
    }).createFromUrl(`${stack.baseUrl}${agent.basePath}/`);
    const task = (await client.sendMessage(SendMessageRequest.fromJSON(hold()))) as Task;
    expect(task.id).toMatch(/^[0-9a-f-]{36}$/);
    const bob = await token({ sub: 'bob' });
    expect((await rpc(bob, 'GetTask', { id: task.id })).body.error.code).toBe(-32001);
    expect((await rpc(bob, 'ListTasks', {})).body.result.tasks).toEqual([]);
    const operator = await token({ sub: 'ops', scope: 'a2a.invoke a2a:all-tasks' });
    expect((await rpc(operator, 'GetTask', { id: task.id })).body.result.id).toBe(task.id);
    const rest = await fetch(`${stack.baseUrl}${agent.basePath}/tasks/${task.id}`, { headers: { 'a2a-version': '1.0', authorization: `Bearer ${alice}` } });
    expect(rest.status).toBe(200);
    expect((await rpc(alice, 'CancelTask', { id: task.id })).body.result.status.state).toBe('TASK_STATE_CANCELED');
  });
});

describe('token lifetime (exp required, maxTokenLifetimeSeconds)', () => {
  const HOUR = 3600;
  const YEAR = 365 * 24 * HOUR;
  const now = () => Math.floor(Date.now() / 1000);

  /** Both bindings answer the same: 401 with an invalid_token challenge saying why, or success. */
  async function expectRefused(bearer: string, why: RegExp, basePath = agent.basePath): Promise<void> {
    const r = await rpc(bearer, 'ListTasks', {}, basePath);
    expect(r.status).toBe(401);
    expect(r.body.error.message).toMatch(why);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer realm="a2a", error="invalid_token", error_description=".+"$/);
    expect(r.headers.get('www-authenticate')).toMatch(why);
    const rest = await fetch(`${stack.baseUrl}${basePath}/tasks`, { headers: { 'a2a-version': '1.0', authorization: `Bearer ${bearer}` } });
    expect(rest.status).toBe(401);
    expect(rest.headers.get('www-authenticate')).toMatch(why);
  }
  async function expectAccepted(bearer: string, basePath = agent.basePath): Promise<void> {
    const r = await rpc(bearer, 'ListTasks', {}, basePath);
    expect(r.status).toBe(200);
    expect(r.body.result.tasks).toBeInstanceOf(Array);
    const rest = await fetch(`${stack.baseUrl}${basePath}/tasks`, { headers: { 'a2a-version': '1.0', authorization: `Bearer ${bearer}` } });
    expect(rest.status).toBe(200);
  }

  it('a token without exp is refused (with or without iat), on both bindings', async () => {
    await expectRefused(await token({ exp: null }), /no expiry \(exp\)/);
    await expectRefused(await token({ exp: null, iat: null }), /no expiry \(exp\)/);
  });

  it('a 10-year token is refused under the default maximum (24 h), whether it says iat or not, or claims a future iat', async () => {
    await expectRefused(await token({ exp: now() + 10 * YEAR }), /lifetime \(\d+ s\) exceeds this agent's maximum of 86400 s/);
    await expectRefused(await token({ exp: now() + 10 * YEAR, iat: null }), /exceeds this agent's maximum of 86400 s/);
    // iat one day before exp, both ten years away: exp - iat is 24 h, but what is left is ten years
    await expectRefused(await token({ exp: now() + 10 * YEAR, iat: now() + 10 * YEAR - 24 * HOUR }), /exceeds this agent's maximum of 86400 s/);
    // issued long ago for 25 h, 2 h left: the granted lifetime is what counts
    const t = now();
    await expectRefused(await token({ iat: t - 23 * HOUR, exp: t + 2 * HOUR }), /lifetime \(90000 s\)/);
  });

  it('a 1-hour token is accepted, with or without iat; exactly 24 h is accepted too', async () => {
    await expectAccepted(await token({ exp: now() + HOUR }));
    await expectAccepted(await token({ exp: now() + HOUR, iat: null }));
    const t = now();
    await expectAccepted(await token({ iat: t, exp: t + 24 * HOUR }));
  });

  it('a binding with its own maximum: 10 min accepted, 1 h refused; the value is validated with bounds and shown on the binding', async () => {
    const short = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'short-lived',
      runtime: RUNTIME,
      transports: ['JSONRPC', 'HTTP+JSON'],
      security: { scheme: 'jwt', issuer, audience: AUDIENCE, requiredScopes: ['a2a.invoke'], maxTokenLifetimeSeconds: 900 },
    });
    await expectAccepted(await token({ exp: now() + 600 }), short.basePath);
    await expectRefused(await token({ exp: now() + HOUR }), /lifetime \(3600 s\) exceeds this agent's maximum of 900 s/, short.basePath);
    // the default agent still takes the hour-long token
    await expectAccepted(await token({ exp: now() + HOUR }));

    const binding = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/agents/${short.agentId}/bindings/a2a`);
    expect(binding.body.security).toMatchObject({ scheme: 'jwt', maxTokenLifetimeSeconds: 900 });
    const defaulted = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/agents/${agent.agentId}/bindings/a2a`);
    expect(defaulted.body.security.maxTokenLifetimeSeconds).toBe(86_400);

    for (const bad of [0, 59, 2_592_001, 1e12, 90.5, '3600', -1]) {
      const r = await adminRequest(stack.baseUrl, stack.adminKey, 'PUT', `/v1/agents/${short.agentId}/bindings/a2a`, {
        transports: ['JSONRPC'],
        security: { scheme: 'jwt', issuer, audience: AUDIENCE, maxTokenLifetimeSeconds: bad },
      });
      expect(r.status, String(bad)).toBe(422);
      expect(r.body.error.code, String(bad)).toBe('request.invalid');
      expect(JSON.stringify(r.body.error.details), String(bad)).toContain('maxTokenLifetimeSeconds');
    }
    // a refused update changed nothing
    await expectRefused(await token({ exp: now() + HOUR }), /maximum of 900 s/, short.basePath);
  });
});
