import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * What a card says about security is what fetching and calling need (A2A v1.0 `securitySchemes` /
 * `securityRequirements`, v0.3 `securitySchemes` / `security`): a binding with alternative schemes
 * (`anyOf`: an API key of the organization OR a JWT of an issuer) lists one requirement per
 * alternative, and the access check accepts either credential; the extended card is declared by
 * both card versions exactly when it is served, and a v0.3 client (the SDK's compat layer)
 * discovers it on the v0.3 card and fetches it with `agent/getAuthenticatedExtendedCard`.
 */
const AUDIENCE = 'a2a-card-security';
const SECRET_SKILL = { id: 'secret', name: 'Secret skill', description: 'Only for members', tags: ['private'] };
const KID = 'card-security-key';

let stack: Stack;
let either: PublishedAgent;
let open: PublishedAgent;
let issuerServer: http.Server;
let issuer: string;
let signingKey: CryptoKey;
let invokeKey: string;

async function token(sub = 'alice'): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ scope: 'a2a.invoke' }).setProtectedHeader({ alg: 'ES256', kid: KID }).setIssuer(issuer).setAudience(AUDIENCE).setSubject(sub).setIssuedAt(now).setExpirationTime(now + 300).sign(signingKey);
}

/** `fetch` that adds headers (the credential) to every request the SDK makes. */
const withHeaders = (headers: Record<string, string>): typeof fetch => (input, init) => {
  const h = new Headers(init?.headers);
  for (const [k, v] of Object.entries(headers)) h.set(k, v);
  return fetch(input, { ...init, headers: h });
};

/** The SDK client a v0.3 peer uses: asks for the 0.3 card, reads it with the compat layer, calls with the v0.3 JSON-RPC transport. */
function v03Factory(credential: Record<string, string>): ClientFactory {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true }, fetchImpl: withHeaders({ 'a2a-version': '0.3' }) }),
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true }, fetchImpl: withHeaders(credential) })],
    }),
  );
}

function v1Factory(credential: Record<string, string>): ClientFactory {
  return new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl: withHeaders(credential) })] }));
}

const send = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });

async function rpc(agent: PublishedAgent, headers: Record<string, string>, method = 'ListTasks'): Promise<{ status: number; body: any }> {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} }),
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  signingKey = pair.privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  issuerServer = http.createServer((req, res) => {
    const sendJson = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/.well-known/openid-configuration') return sendJson({ issuer, jwks_uri: `${issuer}/jwks` });
    if (req.url === '/jwks') return sendJson({ keys: [jwk] });
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => issuerServer.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(issuerServer.address() as AddressInfo).port}`;
  stack = await startStack({ env: { JWT_ISSUER_ALLOWED_CIDRS: '127.0.0.0/8' } });
  const a2a = { capabilities: { extendedAgentCard: true }, extendedCard: { description: 'The members-only card', skillsProjection: [SECRET_SKILL] } };
  either = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'either',
    a2a,
    security: { scheme: 'anyOf', anyOf: [{ scheme: 'apiKey' }, { scheme: 'jwt', issuer, audience: AUDIENCE, requiredScopes: ['a2a.invoke'], maxTokenLifetimeSeconds: 3600 }] },
  });
  open = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'open-extended', a2a });
  invokeKey = (await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] })).body.key;
});

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => issuerServer?.close(() => r()));
});

describe('a binding with alternative schemes (API key or JWT)', () => {
  it('the card lists both schemes and one requirement per alternative, in both versions', async () => {
    const v1 = (await (await fetch(either.cardUrl)).json()) as Record<string, any>;
    expect(Object.keys(v1.securitySchemes).sort()).toEqual(['apiKey', 'bearer', 'oidc']);
    expect(v1.securityRequirements).toEqual([{ schemes: { apiKey: {} } }, { schemes: { bearer: { list: [] } } }]);
    const v03 = (await (await fetch(either.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as Record<string, any>;
    expect(v03.security).toEqual([{ apiKey: [] }, { bearer: [] }]);
    expect(v03.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(v03.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  });

  it('accepts either credential (the SDK client with an API key, then with a JWT); each caller owns its tasks; nothing or a bad one is 401', async () => {
    const byKey = await (await v1Factory({ 'x-api-key': invokeKey }).createFromUrl(`${stack.baseUrl}${either.basePath}/`)).sendMessage(send('hello by key'));
    expect((byKey as Task).status!.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const jwtClient = await v1Factory({ authorization: `Bearer ${await token('alice')}` }).createFromUrl(`${stack.baseUrl}${either.basePath}/`);
    const byJwt = (await jwtClient.sendMessage(send('hello by jwt'))) as Task;
    expect(byJwt.status!.state).toBe(TaskState.TASK_STATE_COMPLETED);
    // an API key as a bearer token is read as a key, not as a JWT
    expect((await rpc(either, { authorization: `Bearer ${invokeKey}` })).body.result.tasks.map((t: Task) => t.id)).toEqual([(byKey as Task).id]);
    expect((await rpc(either, { authorization: `Bearer ${await token('alice')}` })).body.result.tasks.map((t: Task) => t.id)).toEqual([byJwt.id]);

    const none = await rpc(either, {});
    expect(none.status).toBe(401);
    expect(none.body.error.message).toMatch(/API key .* or a JWT bearer token/);
    expect((await rpc(either, { 'x-api-key': 'aaas_AAAAAAAA_forgedforgedforgedforged00' })).status).toBe(401);
    expect((await rpc(either, { authorization: 'Bearer not.a.jwt' })).status).toBe(401);
  });

  it('the extended card is fetched with either credential', async () => {
    for (const credential of [{ 'x-api-key': invokeKey }, { authorization: `Bearer ${await token('bob')}` }] as Array<Record<string, string>>) {
      const r = await rpc(either, credential, 'GetExtendedAgentCard');
      expect(r.body.result.skills.map((s: { id: string }) => s.id)).toEqual(['echo', 'secret']);
    }
  });
});

describe('the extended card, declared by both versions exactly when served', () => {
  it('a v0.3 client (SDK compat) discovers it on the v0.3 card and fetches it with agent/getAuthenticatedExtendedCard', async () => {
    const raw = (await (await fetch(open.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as Record<string, any>;
    expect(raw.supportsAuthenticatedExtendedCard).toBe(true);
    // an open binding: the API key that fetching the extended card needs is declared, anonymous as the other alternative
    expect(raw.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(raw.security).toEqual([{}, { apiKey: [] }]);

    const client = await v03Factory({ 'x-api-key': invokeKey }).createFromUrl(`${stack.baseUrl}${open.basePath}/`);
    expect(client.protocolVersion).toBe('0.3');
    const extended = await client.getAgentCard();
    expect(extended.description).toBe('The members-only card');
    expect(extended.skills.map((s) => s.id)).toEqual(['echo', 'secret']);
    // and the same over the anyOf binding with a JWT
    const jwtClient = await v03Factory({ authorization: `Bearer ${await token('carol')}` }).createFromUrl(`${stack.baseUrl}${either.basePath}/`);
    expect((await jwtClient.getAgentCard()).skills.map((s) => s.id)).toEqual(['echo', 'secret']);

    // without a credential the v0.3 client is refused
    const anonymous = await v03Factory({}).createFromUrl(`${stack.baseUrl}${open.basePath}/`);
    await expect(anonymous.getAgentCard()).rejects.toThrow();
  });
});
