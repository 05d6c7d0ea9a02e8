import { AgentCard, canonicalizeAgentCard, generateAgentCardSignature, verifyAgentCardSignature } from '@a2a-js/sdk';
import { exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { describe, expect, it } from 'vitest';
import { canonicalCard } from './card-canonical.js';
import { jkuWithin, signAgentCard, verifyAgentCard } from './card-signature.js';

/** A2A v1.0 §8.4.1 worked example (spec docs/specification.md, copied in shared/spec/examples/v1.0). */
const SPEC_EXAMPLE = {
  input: { name: 'Example Agent', description: '', capabilities: { streaming: false, pushNotifications: false, extensions: [] }, skills: [] },
  expectedCanonical: '{"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}',
};

/** A complete v1.0 card with the awkward parts: non-ASCII, numbers, empty arrays, odd key order. */
const CARD = {
  version: '1.0.0',
  name: 'Agent Ünïcødé ✓ 😀',
  description: 'Ça marche — “quotes” \u2028 line separator',
  supportedInterfaces: [{ url: 'https://example.com/a2a/acme/echo', protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  provider: { organization: 'Acme', url: 'https://acme.example' },
  capabilities: { streaming: true, pushNotifications: false, extensions: [{ uri: 'https://ext.example/v1', description: '', required: false, params: { n: 1e21, x: 0.1, s: [] } }] },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain', 'application/json'],
  skills: [{ tags: ['demo'], id: 'echo', name: 'Echo', description: 'Echoes', examples: [], inputModes: [] }],
  securitySchemes: {},
  securityRequirements: [],
};

const keyPair = async (alg: 'ES256' | 'EdDSA') => generateKeyPair(alg, { extractable: true });

describe('canonicalization (A2A v1.0 §8.4.1)', () => {
  it('reproduces the spec example byte for byte', () => {
    expect(canonicalCard(SPEC_EXAMPLE.input)).toBe(SPEC_EXAMPLE.expectedCanonical);
  });

  it('drops defaults by presence: empty repeated/map and implicit scalars go, REQUIRED and optional stay', () => {
    const text = canonicalCard(CARD);
    const back = JSON.parse(text) as Record<string, any>;
    expect(back.securitySchemes).toBeUndefined();
    expect(back.securityRequirements).toBeUndefined();
    expect(back.supportedInterfaces[0].tenant).toBeUndefined();
    expect(back.capabilities.pushNotifications).toBe(false);
    expect(back.capabilities.extensions[0]).toEqual({ uri: 'https://ext.example/v1', params: { n: 1e21, x: 0.1, s: [] } });
    expect(back.skills[0]).toEqual({ description: 'Echoes', id: 'echo', name: 'Echo', tags: ['demo'] });
    // key order and signatures do not matter
    const reordered = Object.fromEntries(Object.entries(CARD).reverse());
    expect(canonicalCard({ ...reordered, signatures: [{ protected: 'x', signature: 'y' }] })).toBe(text);
  });
});

describe('signing and verification', () => {
  for (const alg of ['ES256', 'EdDSA'] as const) {
    it(`${alg}: a card we sign verifies; tampering with any field fails and says why`, async () => {
      const { privateKey, publicKey } = await keyPair(alg);
      const signed = await signAgentCard(CARD, { privateKey, kid: 'k1', alg });
      const resolve = async (kid: string) => (kid === 'k1' ? publicKey : null);
      const ok = await verifyAgentCard(signed, resolve);
      expect(ok).toMatchObject({ valid: true, checks: [{ kid: 'k1', alg, valid: true }] });
      for (const tampered of [
        { ...signed, name: 'Evil' },
        { ...signed, description: `${CARD.description} ` },
        { ...signed, skills: [{ ...CARD.skills[0]!, tags: ['other'] }] },
        { ...signed, capabilities: { ...CARD.capabilities, pushNotifications: true } },
        { ...signed, supportedInterfaces: [{ ...CARD.supportedInterfaces[0]!, url: 'https://evil.example/a2a' }] },
        { ...signed, extra: 'field' },
      ]) {
        const r = await verifyAgentCard(tampered, resolve);
        expect(r.valid).toBe(false);
        expect(r.checks[0]!.reason).toContain('does not match the canonical card');
      }
    });
  }

  it('rotation: old and new signatures side by side; either key alone verifies the card', async () => {
    const old = await keyPair('ES256');
    const next = await keyPair('EdDSA');
    const both = await signAgentCard(await signAgentCard(CARD, { privateKey: old.privateKey, kid: 'old', alg: 'ES256' }), { privateKey: next.privateKey, kid: 'new', alg: 'EdDSA' });
    expect(both.signatures).toHaveLength(2);
    const onlyNew = await verifyAgentCard(both, async (kid) => (kid === 'new' ? next.publicKey : null));
    expect(onlyNew.valid).toBe(true);
    expect(onlyNew.checks.map((c) => [c.kid, c.valid])).toEqual([['old', false], ['new', true]]);
  });

  it('matches a jku to an anchor by origin and whole path segments, not by string prefix', () => {
    expect(jkuWithin('https://keys.example.com/jwks.json', 'https://keys.example.com')).toBe(true);
    expect(jkuWithin('https://keys.example.com/jwks.json', 'https://keys.example.com/')).toBe(true);
    expect(jkuWithin('https://keys.example.com.evil.net/jwks.json', 'https://keys.example.com')).toBe(false);
    expect(jkuWithin('https://keys.example.com@evil.net/jwks.json', 'https://keys.example.com')).toBe(false);
    expect(jkuWithin('https://keys.example.com:8443/jwks.json', 'https://keys.example.com')).toBe(false);
    expect(jkuWithin('http://keys.example.com/jwks.json', 'https://keys.example.com')).toBe(false);
    expect(jkuWithin('https://cp.example/keys/jwks.json', 'https://cp.example/keys')).toBe(true);
    expect(jkuWithin('https://cp.example/keys', 'https://cp.example/keys')).toBe(true);
    expect(jkuWithin('https://cp.example/keys-old/jwks.json', 'https://cp.example/keys')).toBe(false);
    expect(jkuWithin('https://cp.example/keys/../admin/jwks.json', 'https://cp.example/keys/')).toBe(false);
    expect(jkuWithin('https://cp.example/keys/%2e%2e/admin/jwks.json', 'https://cp.example/keys/')).toBe(false);
    expect(jkuWithin('file:///etc/jwks.json', 'file:///etc/')).toBe(false);
    expect(jkuWithin('not a url', 'https://cp.example/')).toBe(false);
  });

  it('refuses a jku outside the trust anchors without fetching anything, and unknown algorithms', async () => {
    const { privateKey, publicKey } = await keyPair('ES256');
    const signed = await signAgentCard(CARD, { privateKey, kid: 'k', alg: 'ES256', jku: 'https://attacker.example/jwks.json' });
    let asked = 0;
    const resolve = async () => {
      asked++;
      return publicKey;
    };
    const r = await verifyAgentCard(signed, resolve, { trustedJku: ['https://cp.example/'] });
    expect(r.valid).toBe(false);
    expect(r.checks[0]!.reason).toContain('outside the trust anchors');
    expect(asked).toBe(0);
    expect((await verifyAgentCard(signed, resolve, { trustedJku: ['https://attacker.example/'] })).valid).toBe(true);
    // a predicate decides with the jku and the signature's kid
    const seen: string[] = [];
    const refused = await verifyAgentCard(signed, resolve, { trustedJku: (jku, kid) => (seen.push(`${kid} ${jku}`), false) });
    expect(refused.checks[0]!.reason).toContain('outside the trust anchors');
    expect(seen).toEqual(['k https://attacker.example/jwks.json']);
    expect(asked).toBe(1);
    expect((await verifyAgentCard(signed, resolve, { trustedJku: (_jku, kid) => kid === 'k' })).valid).toBe(true);
    const hs = { ...signed, signatures: [{ protected: Buffer.from(JSON.stringify({ alg: 'HS256', kid: 'k' })).toString('base64url'), signature: 'x' }] };
    expect((await verifyAgentCard(hs, resolve)).checks[0]!.reason).toContain('HS256 is not accepted');
  });
});

describe('cross-verification with @a2a-js/sdk 1.3', () => {
  const sdkCard = (json: Record<string, unknown>) => AgentCard.fromJSON(json);
  // the SDK also drops empty lists inside Struct params (see the last test): cross-checked cards avoid them
  const CROSS = { ...CARD, capabilities: { ...CARD.capabilities, extensions: [{ ...CARD.capabilities.extensions[0]!, params: { n: 1e21, x: 0.1, s: ['a', 1] } }] } };

  it('a card signed by us verifies with the SDK verifier (ES256 and EdDSA)', async () => {
    for (const alg of ['ES256', 'EdDSA'] as const) {
      const { privateKey, publicKey } = await keyPair(alg);
      const signed = await signAgentCard(CROSS, { privateKey, kid: 'ours', alg });
      const verify = verifyAgentCardSignature(async () => publicKey as CryptoKey);
      await expect(verify(sdkCard(signed))).resolves.toBeUndefined();
    }
  });

  it('a card signed by the SDK verifies with ours', async () => {
    const { privateKey, publicKey } = await keyPair('ES256');
    const sign = generateAgentCardSignature(privateKey, { alg: 'ES256', kid: 'sdk', typ: 'JOSE' });
    const signedBySdk = AgentCard.toJSON(await sign(sdkCard(CROSS))) as Record<string, unknown>;
    const r = await verifyAgentCard(signedBySdk, async () => publicKey);
    expect(r).toMatchObject({ valid: true });
  });

  it('documents where the SDK canonicalizes differently: it drops an empty REQUIRED field (a2a-js #627)', () => {
    const card = { ...CARD, description: '' };
    const ours = canonicalCard(card);
    const theirs = canonicalizeAgentCard(sdkCard(card));
    expect(ours).toContain('"description":""');
    // if the SDK is fixed this expectation flips, and the test should be updated
    expect(theirs.includes('"description":""')).toBe(false);
  });

  it('documents a second SDK difference: inside a Struct (params) it drops empty lists and nulls, which protobuf JSON keeps', () => {
    expect(canonicalCard(CARD)).toContain('"s":[]');
    expect(canonicalizeAgentCard(sdkCard(CARD)).includes('"s":[]')).toBe(false);
    const withNull = { ...CARD, capabilities: { ...CARD.capabilities, extensions: [{ uri: 'u', params: { s: ['a', null] } }] } };
    expect(canonicalCard(withNull)).toContain('"s":["a",null]');
    expect(canonicalizeAgentCard(sdkCard(withNull))).toContain('"s":["a"]');
  });

  it('publishes keys as JWK the SDK and others can import', async () => {
    const { publicKey } = await keyPair('EdDSA');
    expect(await exportJWK(publicKey)).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
  });
});
