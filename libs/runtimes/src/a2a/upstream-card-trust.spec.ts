import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { A2ARuntimeConfigSchema, type RequireSignedCard } from '#libs/contracts';
import { outboundPolicy } from '#libs/outbound';
import { signAgentCard } from '#libs/trust';
import { describeChecks, jkuInHosts, UpstreamCardTrust } from './upstream-card-trust.js';

describe('jkuInHosts', () => {
  it('a bare host admits that host over https only, any path, exact host and port', () => {
    expect(jkuInHosts('https://keys.example.com/.well-known/jwks.json', ['keys.example.com'])).toBe(true);
    expect(jkuInHosts('https://KEYS.example.com/jwks', ['keys.example.com'])).toBe(true);
    expect(jkuInHosts('http://keys.example.com/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://keys.example.com:8443/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://keys.example.com:8443/jwks', ['keys.example.com:8443'])).toBe(true);
    expect(jkuInHosts('https://keys.example.com:443/jwks', ['keys.example.com'])).toBe(true);
  });

  it('no suffix, prefix or credential tricks', () => {
    expect(jkuInHosts('https://keys.example.com.evil.net/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://evil-keys.example.com/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://keys.example.com@evil.net/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://user:pw@keys.example.com/jwks', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('file:///etc/passwd', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('not a url', ['keys.example.com'])).toBe(false);
    expect(jkuInHosts('https://keys.example.com/jwks', undefined)).toBe(false);
  });

  it('an origin entry admits exactly its scheme (plain http only when named)', () => {
    expect(jkuInHosts('http://127.0.0.1:8080/jwks.json', ['http://127.0.0.1:8080'])).toBe(true);
    expect(jkuInHosts('https://127.0.0.1:8080/jwks.json', ['http://127.0.0.1:8080'])).toBe(false);
    expect(jkuInHosts('http://127.0.0.1:8081/jwks.json', ['http://127.0.0.1:8080'])).toBe(false);
    expect(jkuInHosts('https://[::1]:9/jwks', ['[::1]:9'])).toBe(true);
  });
});

describe('requireSignedCard config', () => {
  const base = { kind: 'a2a', cardUrl: 'https://up.example.com/.well-known/agent-card.json' };
  const key = { kty: 'EC', crv: 'P-256', kid: 'k1', x: 'xx', y: 'yy' };

  it('takes keys, JWKS URLs and jku hosts; at least one anchor', () => {
    expect(A2ARuntimeConfigSchema.parse({ ...base, requireSignedCard: { keys: [key] } }).requireSignedCard?.keys).toHaveLength(1);
    expect(A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: { jwksUrls: ['https://k.example.com/jwks.json'], jkuHosts: ['k.example.com', 'http://127.0.0.1:8080'] } }).success).toBe(true);
    expect(A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: {} }).success).toBe(false);
    expect(A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: { keys: [] } }).success).toBe(false);
  });

  it('refuses a private or symmetric key, a jku host with a path, and a config without cardUrl', () => {
    const priv = A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: { keys: [{ ...key, d: 'secret' }] } });
    expect(priv.success).toBe(false);
    expect(priv.error!.issues[0]!.message).toMatch(/must be public/);
    expect(A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: { keys: [{ kty: 'oct', kid: 'k', k: 'abc' }] } }).success).toBe(false);
    expect(A2ARuntimeConfigSchema.safeParse({ ...base, requireSignedCard: { jkuHosts: ['https://k.example.com/keys'] } }).success).toBe(false);
    const noCard = A2ARuntimeConfigSchema.safeParse({ kind: 'a2a', url: 'https://up.example.com/a2a', requireSignedCard: { keys: [key] } });
    expect(noCard.success).toBe(false);
    expect(noCard.error!.issues.map((i) => i.path.join('.'))).toContain('requireSignedCard');
  });
});

describe('describeChecks', () => {
  it('one clause per signature, the unsigned case in plain words', () => {
    expect(describeChecks([{ index: -1, valid: false, reason: 'the card has no signatures' }])).toBe('the card has no signatures');
    expect(describeChecks([{ index: 0, kid: 'a', valid: false, reason: 'x' }, { index: 1, valid: false, reason: 'y' }])).toBe('signature 0 (kid a): x; signature 1: y');
  });
});

describe('UpstreamCardTrust (real HTTP, a JWK Set server on 127.0.0.1)', () => {
  let server: http.Server;
  let base = '';
  const sets = new Map<string, unknown>();
  const hits = new Map<string, number>();
  const keys: Record<string, { privateKey: CryptoKey; publicJwk: JWK }> = {};
  const loopback = outboundPolicy(['127.0.0.0/8']);
  const card = (name: string) => ({
    name,
    description: 'd',
    version: '1',
    supportedInterfaces: [{ url: 'https://up.example.com/a2a', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: {},
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 's', name: 's', description: 's', tags: ['t'] }],
  });
  const sign = (c: Record<string, unknown>, kid: string, jku?: string) => signAgentCard(c, { privateKey: keys[kid]!.privateKey, kid, alg: 'ES256', jku });
  const reasonOf = async (p: Promise<void>) => {
    try {
      await p;
      return 'verified';
    } catch (e) {
      expect((e as { code?: string }).code).toBe('runtime.upstream_card_unverified');
      return (e as Error).message;
    }
  };

  beforeAll(async () => {
    for (const kid of ['k1', 'k2', 'k3']) {
      const pair = await generateKeyPair('ES256', { extractable: true });
      keys[kid] = { privateKey: pair.privateKey, publicJwk: { ...(await exportJWK(pair.publicKey)), kid } };
    }
    server = http.createServer((req, res) => {
      const name = req.url!.slice(1);
      hits.set(name, (hits.get(name) ?? 0) + 1);
      const body = sets.get(name);
      if (body === undefined) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('a JWK Set is fetched once for many cards, concurrent verifications included', async () => {
    sets.set('shared', { keys: [keys.k1!.publicJwk] });
    const trust = new UpstreamCardTrust(loopback);
    const anchors: RequireSignedCard = { jwksUrls: [`${base}/shared`] };
    const cards = await Promise.all(['a', 'b', 'c', 'd'].map((n) => sign(card(n), 'k1')));
    await Promise.all(cards.map((c) => trust.requireVerified(c, anchors, 'https://up.example.com/card')));
    await trust.requireVerified(await sign(card('e'), 'k1'), anchors, 'https://up.example.com/card');
    expect(hits.get('shared')).toBe(1);
  });

  it('rotation: a kid the cached set lacks refetches it, at most every 30 s', async () => {
    sets.set('rotating', { keys: [keys.k1!.publicJwk] });
    let now = 0;
    const trust = new UpstreamCardTrust(loopback, () => now);
    const anchors: RequireSignedCard = { jkuHosts: [base] };
    const jku = `${base}/rotating`;
    expect(await reasonOf(trust.requireVerified(await sign(card('a'), 'k1', jku), anchors, 'c'))).toBe('verified');
    sets.set('rotating', { keys: [keys.k1!.publicJwk, keys.k2!.publicJwk] });
    // the set was read just now: not refetched for a new kid yet
    now = 10_000;
    expect(await reasonOf(trust.requireVerified(await sign(card('b'), 'k2', jku), anchors, 'c'))).toMatch(/neither the trusted keys nor the JWK Set at its jku .* have kid k2/);
    expect(hits.get('rotating')).toBe(1);
    now = 31_000;
    expect(await reasonOf(trust.requireVerified(await sign(card('b'), 'k2', jku), anchors, 'c'))).toBe('verified');
    expect(hits.get('rotating')).toBe(2);
  });

  it('the outbound rules apply: a refused address, a set too large, private members ignored', async () => {
    sets.set('big', JSON.stringify({ keys: [keys.k1!.publicJwk], pad: 'x'.repeat(70 * 1024) }));
    sets.set('private', { keys: [{ ...(await exportJWK(keys.k1!.privateKey)), kid: 'k1' }] });
    const signed = await sign(card('a'), 'k1');
    // loopback not allowed: never connected
    const before = hits.get('shared') ?? 0;
    expect(await reasonOf(new UpstreamCardTrust(outboundPolicy([])).requireVerified(signed, { jwksUrls: [`${base}/shared`] }, 'c'))).toMatch(/the JWK Set .*\/shared could not be read: refused/);
    expect(hits.get('shared') ?? 0).toBe(before);
    expect(await reasonOf(new UpstreamCardTrust(loopback).requireVerified(signed, { jwksUrls: [`${base}/big`] }, 'c'))).toMatch(/larger than 65536 bytes/);
    expect(await reasonOf(new UpstreamCardTrust(loopback).requireVerified(signed, { jwksUrls: [`${base}/private`] }, 'c'))).toMatch(/no trusted key has kid k1/);
  });

  it('a pinned kid is verified with the pinned key whatever its jku; a v0.3 card verifies as v0.3 signs it', async () => {
    const trust = new UpstreamCardTrust(loopback);
    sets.set('evil', { keys: [keys.k3!.publicJwk] });
    const pinned: RequireSignedCard = { keys: [keys.k1!.publicJwk as never] };
    expect(await reasonOf(trust.requireVerified(await sign(card('a'), 'k1', `${base}/evil`), pinned, 'c'))).toBe('verified');
    expect(hits.get('evil') ?? 0).toBe(0);
    const v03 = { protocolVersion: '0.3.0', name: 'old', description: 'd', url: 'https://up.example.com/a2a', version: '1', capabilities: { streaming: false }, defaultInputModes: [], defaultOutputModes: [], skills: [] };
    expect(await reasonOf(trust.requireVerified(await sign(v03, 'k1'), pinned, 'c'))).toBe('verified');
    expect(await reasonOf(trust.requireVerified({ ...(await sign(v03, 'k1')), name: 'new' }, pinned, 'c'))).toMatch(/does not match the canonical card/);
    expect(await reasonOf(trust.requireVerified('not a card', pinned, 'c'))).toMatch(/not a JSON object/);
  });
});
