import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import canonicalize from 'canonicalize';
import { base64url, flattenedVerify, importJWK, type JWK } from 'jose';
import { isLegacyAgentCard, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAgentCard } from '#libs/trust';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The v0.3 Agent Card (served to a caller that asks with `A2A-Version: 0.3`; a header-less fetch
 * gets v1.0) carries `signatures` (v0.3 `AgentCard.signatures`, `AgentCardSignature { protected,
 * signature, header? }`) once its organization has a signing key: every active key signs it, as
 * it signs the v1.0 card, with the same protected header (`alg`, `typ`, `kid`, `jku` = the org's
 * JWKS). The v0.3 card is defined by a JSON Schema, not a proto, so there are no presence rules:
 * each signature is a detached JWS over RFC 8785 of the card as served without `signatures`.
 * Checked here against the v0.3 JSON Schema, with our verifier, and with nothing but
 * `canonicalize` and `jose` over the JWKS.
 */

type Card = Record<string, unknown> & { signatures?: Array<{ protected: string; signature: string; header?: unknown }> };

let stack: Stack;
let agent: PublishedAgent;

const EXTENSIONS = [{ uri: 'https://example.test/ext/data/v1', description: 'data only', required: false, params: { zone: 'eu', levels: [1, 2], nested: { empty: [], off: false } } }];

const fetchCard = async (version: string | null, headers: Record<string, string> = {}) => {
  const res = await fetch(agent.cardUrl, { headers: { ...(version ? { 'a2a-version': version } : {}), ...headers } });
  return { status: res.status, headers: res.headers, body: res.status === 200 ? ((await res.json()) as Card) : null };
};
const v03Card = async () => (await fetchCard('0.3')).body!;
const jwksUrl = () => `${stack.baseUrl}/a2a/${agent.orgSlug}/.well-known/jwks.json`;
const jwks = async () => (await (await fetch(jwksUrl())).json()) as { keys: JWK[] };
const protectedHeader = (sig: { protected: string }) => JSON.parse(Buffer.from(sig.protected, 'base64url').toString()) as Record<string, string>;

/** Our verifier (libs/trust), keys from the org's JWKS, jku trusted under this deployment. */
async function verifyOurs(card: Card) {
  const set = await jwks();
  return verifyAgentCard(card, async (kid, _jku, alg) => {
    const jwk = set.keys.find((k) => k.kid === kid);
    return jwk ? ((await importJWK(jwk, alg)) as never) : null;
  }, { trustedJku: [`${stack.baseUrl}/a2a/`] });
}

/** Without libs/trust: each signature as a detached JWS over RFC 8785 of the card minus `signatures`. */
async function verifyPlain(card: Card): Promise<boolean[]> {
  const { signatures, ...rest } = card;
  const payload = base64url.encode(canonicalize(rest)!);
  const set = await jwks();
  return Promise.all(
    (signatures ?? []).map(async (sig) => {
      const { kid, alg } = protectedHeader(sig);
      const jwk = set.keys.find((k) => k.kid === kid);
      if (!jwk) return false;
      try {
        await flattenedVerify({ protected: sig.protected, payload, signature: sig.signature }, await importJWK(jwk, alg), { algorithms: ['ES256', 'EdDSA'] });
        return true;
      } catch {
        return false;
      }
    }),
  );
}

/** The v0.3 JSON Schema's AgentCard (spec/v0.3/a2a.json, draft-07). */
function v03Schema() {
  const schema = JSON.parse(readFileSync('/work/shared/spec/v0.3/a2a.json', 'utf8')) as Record<string, unknown>;
  const ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addSchema(schema, 'a2a-v03');
  return ajv.getSchema('a2a-v03#/definitions/AgentCard')!;
}

const LEGACY = {
  description: 'Speaks 0.3 — and signs it ✓',
  transports: ['JSONRPC', 'HTTP+JSON'] as Array<'JSONRPC' | 'HTTP+JSON'>,
  security: { scheme: 'apiKey' as const },
  a2a: { identityProjection: { name: 'Légacy Agent 日本', version: '2.1.0' }, extensions: EXTENSIONS },
};

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { SIGNING_KEY_ENCRYPTION_SECRET: 'test-signing-secret-v03-0123456789' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'legacy', ...LEGACY });
});

afterAll(async () => {
  await stack?.close();
});

describe('the v0.3 Agent Card', () => {
  it('is served for A2A-Version: 0.3 only (a header-less fetch gets v1.0), valid against the v0.3 JSON Schema, and unsigned when its profile does not declare signedAgentCard', async () => {
    const plain = await fetchCard(null);
    expect(plain.body!.supportedInterfaces).toBeDefined();
    expect(plain.body!.protocolVersion).toBeUndefined();
    const v03 = await fetchCard('0.3');
    expect(v03.headers.get('vary')).toMatch(/A2A-Version/i);
    expect(v03.body).toMatchObject({ protocolVersion: '0.3.0', name: 'Légacy Agent 日本', url: `${stack.baseUrl}${agent.basePath}`, preferredTransport: 'JSONRPC' });
    expect(v03.body!.securitySchemes).toBeDefined();
    expect(v03.body!.signatures).toBeUndefined();
    const validate = v03Schema();
    expect(validate(v03.body), JSON.stringify(validate.errors)).toBe(true);
    expect(isLegacyAgentCard(v03.body)).toBe(true);
  });

  it('is signed when its profile declares signedAgentCard: the v0.3 AgentCardSignature shape, the same header as the v1.0 card, verifiable through the org JWKS by our verifier and by plain RFC 8785 + jose', async () => {
    const created = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys', { alg: 'ES256' });
    expect(created.status).toBe(201);
    // the unsigned agent stays unsigned with a key present; the same agent declaring signedAgentCard is signed
    expect((await v03Card()).signatures).toBeUndefined();
    agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'legacy-signed', ...LEGACY, a2a: { ...LEGACY.a2a, capabilities: { signedAgentCard: true } } });
    const card = await v03Card();
    expect(card.signatures).toHaveLength(1);
    const validate = v03Schema();
    expect(validate(card), JSON.stringify(validate.errors)).toBe(true);
    const sig = card.signatures![0]!;
    expect(Object.keys(sig).sort()).toEqual(['protected', 'signature']);
    expect(sig.signature).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(protectedHeader(sig)).toEqual({ alg: 'ES256', typ: 'JOSE', kid: created.body.kid, jku: jwksUrl() });
    // the v1.0 card is signed by the same key with the same header, over its own canonical form
    const v1 = (await fetchCard('1.0')).body!;
    expect(protectedHeader(v1.signatures![0]!)).toEqual(protectedHeader(sig));
    expect(v1.signatures![0]!.signature).not.toBe(sig.signature);

    expect(await verifyOurs(card)).toMatchObject({ valid: true, checks: [{ valid: true, kid: created.body.kid }] });
    expect(await verifyPlain(card)).toEqual([true]);
    // each signature covers its own shape: the v1.0 signature does not verify the v0.3 card
    expect(await verifyPlain({ ...card, signatures: v1.signatures })).toEqual([false]);
    expect((await verifyOurs({ ...card, signatures: v1.signatures })).valid).toBe(false);
    // the SDK's v0.3 compat layer still recognizes and reads the signed card
    expect(isLegacyAgentCard(card)).toBe(true);
    expect(parseLegacyAgentCard(card).signatures.map((s) => [s.protected, s.signature])).toEqual([[sig.protected, sig.signature]]);
  });

  it('a changed field, a dropped field, or a signature moved to another card fails verification, naming why', async () => {
    const card = await v03Card();
    for (const tampered of [
      { ...card, url: 'https://evil.example/a2a' },
      { ...card, preferredTransport: 'HTTP+JSON' },
      { ...card, capabilities: { ...(card.capabilities as object), streaming: true } },
      Object.fromEntries(Object.entries(card).filter(([k]) => k !== 'security')),
    ] as Card[]) {
      expect(await verifyPlain(tampered)).toEqual([false]);
      const ours = await verifyOurs(tampered);
      expect(ours.valid).toBe(false);
      expect(ours.checks[0]!.reason).toMatch(/does not match the canonical card/);
    }
    // key order and whitespace are not part of what is signed
    const reordered = Object.fromEntries(Object.entries(card).reverse()) as Card;
    expect(await verifyPlain(reordered)).toEqual([true]);
    expect((await verifyOurs(JSON.parse(JSON.stringify(reordered, null, 2)))).valid).toBe(true);
  });

  it('rotation: every active key signs the v0.3 card; a retired key stops signing it; ETags follow and differ per version', async () => {
    const before = await fetchCard('0.3');
    const next = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys', { alg: 'EdDSA' });
    expect(next.status).toBe(201);
    const both = await fetchCard('0.3');
    expect(both.headers.get('etag')).not.toBe(before.headers.get('etag'));
    expect(both.body!.signatures!.map((s) => protectedHeader(s).alg)).toEqual(['ES256', 'EdDSA']);
    expect(await verifyPlain(both.body!)).toEqual([true, true]);
    expect((await verifyOurs(both.body!)).checks.every((c) => c.valid)).toBe(true);

    const keys = (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', '/v1/signing-keys')).body.signingKeys as Array<{ id: string; kid: string }>;
    for (const k of keys.filter((k) => k.kid !== next.body.kid)) expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/signing-keys/${k.id}/retire`)).status).toBe(200);
    const after = await fetchCard('0.3');
    expect(after.body!.signatures!.map((s) => protectedHeader(s).kid)).toEqual([next.body.kid]);
    expect(await verifyPlain(after.body!)).toEqual([true]);

    // conditional requests per version: the v0.3 ETag revalidates the v0.3 card only
    const etag03 = after.headers.get('etag')!;
    const v1 = await fetchCard('1.0');
    expect(v1.headers.get('etag')).not.toBe(etag03);
    expect((await fetchCard('0.3', { 'if-none-match': etag03 })).status).toBe(304);
    expect((await fetchCard('1.0', { 'if-none-match': etag03 })).status).toBe(200);
  });

  it('an agent with no 0.3 interface has no v0.3 card (404), signed or not', async () => {
    const restOnly = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rest-only', transports: ['HTTP+JSON'] });
    const res = await fetch(restOnly.cardUrl, { headers: { 'a2a-version': '0.3' } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.code).toBe('agent.not_published');
    expect((await fetch(restOnly.cardUrl)).status).toBe(200);
  });
});
