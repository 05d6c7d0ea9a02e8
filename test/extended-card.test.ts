import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { importJWK, type JWK } from 'jose';
import { verifyAgentCard } from '#libs/trust';

/** The authenticated extended card (A2A v1.0 §3.1.11) on JSON-RPC v1.0, v0.3 and HTTP+JSON. */
let stack: Stack;
let rich: PublishedAgent;
let empty: PublishedAgent;
let plain: PublishedAgent;
let invokeKey: string;

const SKILL = { id: 'secret', name: 'Secret skill', description: 'Only for members', tags: ['private'] };

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { SIGNING_KEY_ENCRYPTION_SECRET: 'test-signing-secret-0123456789' } });
  const caps = { streaming: false, pushNotifications: false, extendedAgentCard: true };
  expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys', { alg: 'ES256' })).status).toBe(201);
  rich = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rich', transports: ['JSONRPC', 'HTTP+JSON'], a2a: { capabilities: { ...caps, signedAgentCard: true }, extendedCard: { description: 'The members-only card', skillsProjection: [SKILL] } } });
  empty = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'declared-empty', transports: ['JSONRPC', 'HTTP+JSON'], a2a: { capabilities: caps } });
  plain = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'plain', transports: ['JSONRPC', 'HTTP+JSON'] });
  invokeKey = (await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] })).body.key;
});
afterAll(async () => {
  await stack?.close();
});

const rpc = async (agent: PublishedAgent, method: string, key?: string, version = '1.0') => {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(version ? { 'a2a-version': version } : {}), ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} }),
  });
  return (await res.json()) as { result?: Record<string, any>; error?: { code: number; message: string } };
};
const rest = async (agent: PublishedAgent, key?: string) => {
  const res = await fetch(`${stack.baseUrl}${agent.basePath}/extendedAgentCard`, { headers: { 'a2a-version': '1.0', ...(key ? { 'x-api-key': key } : {}) } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

describe('extended agent card', () => {
  it('the public card declares it; an authenticated caller gets the richer card on every binding and version', async () => {
    const publicCard = (await (await fetch(rich.cardUrl)).json()) as { capabilities: { extendedAgentCard: boolean }; skills: Array<{ id: string }> };
    expect(publicCard.capabilities.extendedAgentCard).toBe(true);
    expect(publicCard.skills.map((s) => s.id)).toEqual(['echo']);
    // an open binding: fetching the extended card needs an API key, so the card declares it, anonymous as the other alternative
    expect(publicCard).toMatchObject({ securitySchemes: { apiKey: { apiKeySecurityScheme: { location: 'header', name: 'X-API-Key' } } }, securityRequirements: [{}, { schemes: { apiKey: {} } }] });
    // declared but not configured is not served: no card claims it
    const emptyCard = (await (await fetch(empty.cardUrl)).json()) as Record<string, any>;
    expect(emptyCard.capabilities.extendedAgentCard).toBe(false);
    expect(emptyCard.securitySchemes).toBeUndefined();
    expect(((await (await fetch(empty.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as Record<string, any>).supportsAuthenticatedExtendedCard).toBe(false);

    const v1 = await rpc(rich, 'GetExtendedAgentCard', invokeKey);
    expect(v1.result!.description).toBe('The members-only card');
    expect(v1.result!.skills.map((s: { id: string }) => s.id)).toEqual(['echo', 'secret']);
    const v03 = await rpc(rich, 'agent/getAuthenticatedExtendedCard', invokeKey, '');
    expect(v03.result!.skills.map((s: { id: string }) => s.id)).toEqual(['echo', 'secret']);
    expect(v03.result!.url).toBeDefined();
    const r = await rest(rich, invokeKey);
    expect(r.status).toBe(200);
    expect(r.body.skills.map((s: { id: string }) => s.id)).toEqual(['echo', 'secret']);
  });

  it('is signed like the public card (its profile declares signedAgentCard), in each shape over its own canonical form', async () => {
    const jwks = (await (await fetch(`${stack.baseUrl}/a2a/${rich.orgSlug}/.well-known/jwks.json`)).json()) as { keys: JWK[] };
    const verify = (card: Record<string, unknown>) =>
      verifyAgentCard(card, async (kid, _jku, alg) => {
        const jwk = jwks.keys.find((k) => k.kid === kid);
        return jwk ? ((await importJWK(jwk, alg)) as never) : null;
      }, { trustedJku: [`${stack.baseUrl}/a2a/`] });
    const cards = [(await rpc(rich, 'GetExtendedAgentCard', invokeKey)).result!, (await rpc(rich, 'agent/getAuthenticatedExtendedCard', invokeKey, '')).result!, (await rest(rich, invokeKey)).body];
    for (const card of cards) {
      expect(card.signatures).toHaveLength(1);
      const result = await verify(card);
      expect(result.valid, JSON.stringify(result.checks)).toBe(true);
    }
    // the members-only description is covered by the signature
    const tampered = { ...cards[0]!, description: 'changed' };
    expect((await verify(tampered)).valid).toBe(false);
  });

  it('only to an authenticated caller: no key or a wrong key is Unauthenticated (REST 401)', async () => {
    expect((await rpc(rich, 'GetExtendedAgentCard')).error!.code).toBe(-32000);
    expect((await rpc(rich, 'GetExtendedAgentCard', 'aaas_AAAAAAAA_forgedforgedforgedforged00')).error!.code).toBe(-32000);
    const r = await rest(rich);
    expect(r.status).toBe(401);
    expect(r.body.error.status).toBe('UNAUTHENTICATED');
  });

  it('UnsupportedOperation when not declared; ExtendedAgentCardNotConfigured when declared but absent', async () => {
    expect((await rpc(plain, 'GetExtendedAgentCard', invokeKey)).error!.code).toBe(-32004);
    expect((await rest(plain, invokeKey)).status).toBe(400);
    expect((await rpc(empty, 'GetExtendedAgentCard', invokeKey)).error!.code).toBe(-32007);
    expect((await rpc(empty, 'agent/getAuthenticatedExtendedCard', invokeKey, '')).error!.code).toBe(-32007);
  });
});
