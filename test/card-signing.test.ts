import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentCard, verifyAgentCardSignature } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { createLocalJWKSet, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAgentCard } from '#libs/trust';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/** Signed Agent Cards: per-organization keys, the JWKS, rotation, verification by us and by the SDK. */
let stack: Stack;
let agent: PublishedAgent;
let unsigned: PublishedAgent;

const SIGNED = { identityProjection: { name: 'Signed Ünïcode Agent', version: '1.0.0' }, capabilities: { signedAgentCard: true } };

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { SIGNING_KEY_ENCRYPTION_SECRET: 'test-signing-secret-0123456789' } });
  unsigned = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'unsigned', a2a: { identityProjection: { name: 'Plain Agent', version: '1.0.0' } } });
});
afterAll(async () => {
  await stack?.close();
});

const card = async () => (await (await fetch(agent.cardUrl)).json()) as Record<string, unknown> & { signatures?: Array<{ protected: string }> };
const jwksUrl = () => `${stack.baseUrl}/a2a/${agent.orgSlug}/.well-known/jwks.json`;
const jwks = async () => (await (await fetch(jwksUrl())).json()) as { keys: JWK[] };
const verifyOurs = async (c: Record<string, unknown>) => {
  const set = await jwks();
  return verifyAgentCard(c, async (kid, _jku, alg) => {
    const jwk = set.keys.find((k) => k.kid === kid);
    return jwk ? ((await importJWK(jwk, alg)) as never) : null;
  }, { trustedJku: [`${stack.baseUrl}/a2a/`] });
};

describe('signed Agent Cards', () => {
  it('signedAgentCard needs a key to publish; signed only when the profile declares it (a profile without it stays unsigned with keys present); verifiable through the JWKS, by us and by the SDK', async () => {
    // declaring a signed card before the organization has a key is refused at publish
    const early = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'too-early', a2a: SIGNED }).catch((e: Error) => e);
    expect(String(early)).toMatch(/422[\s\S]*revision\.unsupported_capability[\s\S]*signing key/);
    const created = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys', { alg: 'ES256' });
    expect(created.status).toBe(201);
    expect(created.body.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-256', kid: created.body.kid });
    expect(JSON.stringify(created.body)).not.toMatch(/"d"/);
    agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'signed', a2a: SIGNED });

    // the organization has an active key, but this profile does not declare signedAgentCard: unsigned, both shapes
    const plain = (await (await fetch(unsigned.cardUrl)).json()) as Record<string, unknown>;
    expect(plain.name).toBe('Plain Agent');
    expect(plain.signatures).toBeUndefined();
    expect(((await (await fetch(unsigned.cardUrl, { headers: { 'a2a-version': '0.3' } })).json()) as Record<string, unknown>).signatures).toBeUndefined();

    const signed = await card();
    expect(signed.signatures).toHaveLength(1);
    const header = JSON.parse(Buffer.from(signed.signatures![0]!.protected, 'base64url').toString()) as Record<string, string>;
    expect(header).toMatchObject({ alg: 'ES256', typ: 'JOSE', kid: created.body.kid, jku: jwksUrl() });
    expect(await verifyOurs(signed)).toMatchObject({ valid: true });

    const set = createLocalJWKSet(await jwks());
    await expect(verifyAgentCardSignature((kid) => set({ alg: 'ES256', kid }) as never)(AgentCard.fromJSON(signed))).resolves.toBeUndefined();
    // the official client still resolves and uses the signed card
    const client = await new ClientFactory().createFromUrl(`${stack.baseUrl}${agent.basePath}/`);
    expect((await client.getAgentCard()).name).toBe('Signed Ünïcode Agent');
  });

  it('rotation: old and new keys sign side by side; retiring the old one leaves one signature and drops it from the JWKS', async () => {
    const before = (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', '/v1/signing-keys')).body.signingKeys as Array<{ id: string; kid: string }>;
    const next = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys', { alg: 'EdDSA' });
    const both = await card();
    expect(both.signatures).toHaveLength(before.length + 1);
    expect((await verifyOurs(both)).checks.every((c) => c.valid)).toBe(true);
    for (const old of before) expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/signing-keys/${old.id}/retire`)).status).toBe(200);
    // other instances may use the old key set for a few seconds; this one dropped it at once
    const after = await card();
    expect(after.signatures).toHaveLength(1);
    expect((await jwks()).keys.map((k) => k.kid)).toEqual([next.body.kid]);
    expect(await verifyOurs(after)).toMatchObject({ valid: true });
    // a tampered card fails against the published keys
    expect((await verifyOurs({ ...after, description: 'changed' })).valid).toBe(false);
    // the last active key cannot be retired while a served card declares signedAgentCard (it would lose every signature)
    const last = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/signing-keys/${next.body.id}/retire`);
    expect(last.status).toBe(409);
    expect(last.body.error.code).toBe('signing_key.in_use');
    expect((await card()).signatures).toHaveLength(1);
  });

  it('the CLI verifies a served card (exit 0), refuses a tampered one (exit 1), and reports bad input (exit 2)', async () => {
    const cli = (...args: string[]) =>
      new Promise<{ code: number; out: string }>((resolve) => {
        execFile(process.execPath, ['dist/apps/cli/src/main.js', ...args], { timeout: 20_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
        );
      });
    const ok = await cli('verify-card', agent.cardUrl);
    expect(ok.code, ok.out).toBe(0);
    expect(ok.out).toContain('signature verified');
    const tamperedFile = join(tmpdir(), `card-${process.pid}.json`);
    writeFileSync(tamperedFile, JSON.stringify({ ...(await card()), name: 'Forged' }));
    const bad = await cli('verify-card', tamperedFile, '--jwks', jwksUrl());
    expect(bad.code, bad.out).toBe(1);
    expect(bad.out).toContain('does not match the canonical card');
    expect((await cli('verify-card', 'http://127.0.0.1:1/nothing')).code).toBe(2);
  });

  it('errors: an unknown key is 404; signing off (no secret) is 409 signing.disabled, and a signed card cannot be published there', async () => {
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/signing-keys/00000000-0000-4000-8000-000000000000/retire')).status).toBe(404);
    const plain = await startStack({ worker: false });
    try {
      const r = await adminRequest(plain.baseUrl, plain.adminKey, 'POST', '/v1/signing-keys', {});
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe('signing.disabled');
      const refused = await publishAgent(plain.baseUrl, plain.adminKey, { slug: 'wants-signing', a2a: SIGNED }).catch((e: Error) => e);
      expect(String(refused)).toMatch(/422[\s\S]*SIGNING_KEY_ENCRYPTION_SECRET/);
    } finally {
      await plain.close();
    }
  });
});
