import { describe, expect, it } from 'vitest';
import { A2ARuntimeConfigSchema } from '#libs/contracts';
import { describeChecks, jkuInHosts } from './upstream-card-trust.js';

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
