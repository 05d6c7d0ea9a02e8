import { FlattenedSign, base64url, decodeProtectedHeader, flattenedVerify, type CryptoKey, type JWK, type KeyObject } from 'jose';
import { canonicalCard } from './card-canonical.js';

/** A2A v1.0 `AgentCardSignature` (JSON): detached JWS over the canonical card. */
export interface AgentCardSignature {
  protected: string;
  signature: string;
  header?: Record<string, unknown>;
}

export type SigningKey = CryptoKey | KeyObject | JWK | Uint8Array;

/** Algorithms we sign and accept (A2A cards: asymmetric only). */
export const CARD_SIGNING_ALGORITHMS = ['ES256', 'EdDSA'] as const;
export type CardSigningAlgorithm = (typeof CARD_SIGNING_ALGORITHMS)[number];

/**
 * Sign an Agent Card (A2A v1.0 §8.4.2): a detached JWS (RFC 7515 App. F) whose payload is
 * `canonicalCard(card)`; protected header `{ alg, typ: "JOSE", kid, jku? }`. Returns the card with
 * the signature appended to `signatures` (existing ones are kept: several keys may sign during a
 * rotation).
 */
export async function signAgentCard<C extends Record<string, unknown>>(
  card: C,
  key: { privateKey: SigningKey; kid: string; alg: CardSigningAlgorithm; jku?: string },
): Promise<C & { signatures: AgentCardSignature[] }> {
  const payload = new TextEncoder().encode(canonicalCard(card));
  const header = { alg: key.alg, typ: 'JOSE', kid: key.kid, ...(key.jku ? { jku: key.jku } : {}) };
  const jws = await new FlattenedSign(payload).setProtectedHeader(header).sign(key.privateKey as CryptoKey);
  const existing = Array.isArray(card.signatures) ? (card.signatures as AgentCardSignature[]) : [];
  return { ...card, signatures: [...existing, { protected: jws.protected!, signature: jws.signature }] };
}

/** The outcome of checking one signature of a card. */
export interface SignatureCheck {
  index: number;
  kid?: string;
  alg?: string;
  jku?: string;
  valid: boolean;
  /** Why it is not valid (which field, which rule). */
  reason?: string;
}

/**
 * Whether `jku` lies within the trust anchor `anchor` (an absolute http(s) URL): the same origin
 * (scheme, host and port, compared as parsed URLs, so `https://keys.example.com` does not admit
 * `https://keys.example.com.evil.net/` nor `https://keys.example.com@evil.net/`), no user info, and
 * a path under the anchor's by whole segments (`/keys` admits `/keys` and `/keys/…`, not
 * `/keys-old/…`; dot segments are resolved first, so `/keys/../admin` is outside). A string that
 * does not parse as such a URL is never within.
 */
export function jkuWithin(jku: string, anchor: string): boolean {
  let u: URL;
  let a: URL;
  try {
    u = new URL(jku);
    a = new URL(anchor);
  } catch {
    return false;
  }
  if (!/^https?:$/.test(u.protocol) || u.username || u.password || a.username || a.password) return false;
  if (u.origin !== a.origin) return false;
  const base = a.pathname.endsWith('/') ? a.pathname : `${a.pathname}/`;
  return u.pathname === a.pathname || u.pathname.startsWith(base);
}

/**
 * Verify every signature of a card (A2A v1.0 §8.4.3): re-canonicalize the card without
 * `signatures`, and check each detached JWS with the key `resolveKey(kid, jku)` returns. A `jku`
 * outside `trustedJku` (URL anchors, matched by `jkuWithin`, or a predicate given the jku and the signature's kid) is
 * refused before any key is fetched (A2A #2096); only asymmetric `alg`s (ES256, EdDSA) are
 * accepted (a v0.3 card is canonicalized as v0.3 defines it, see `canonicalCard`). Never throws:
 * each signature gets a verdict and a reason. `valid` is true when at least one signature verifies.
 */
export async function verifyAgentCard(
  card: Record<string, unknown>,
  resolveKey: (kid: string, jku: string | undefined, alg: string) => Promise<SigningKey | null>,
  opts: { trustedJku?: readonly string[] | ((jku: string, kid: string) => boolean) } = {},
): Promise<{ valid: boolean; checks: SignatureCheck[] }> {
  const sigs = card.signatures;
  if (!Array.isArray(sigs) || sigs.length === 0) return { valid: false, checks: [{ index: -1, valid: false, reason: 'the card has no signatures' }] };
  const payload = base64url.encode(canonicalCard(card));
  const trusted = opts.trustedJku;
  const jkuTrusted = typeof trusted === 'function' ? trusted : (jku: string) => (trusted ?? []).some((anchor) => jkuWithin(jku, anchor));
  const checks: SignatureCheck[] = [];
  for (const [index, raw] of sigs.entries()) {
    const sig = raw as Partial<AgentCardSignature>;
    if (typeof sig?.protected !== 'string' || typeof sig.signature !== 'string') {
      checks.push({ index, valid: false, reason: 'signatures[i].protected and .signature must be strings' });
      continue;
    }
    let header: Record<string, unknown>;
    try {
      header = decodeProtectedHeader({ protected: sig.protected, payload: '', signature: sig.signature }) as Record<string, unknown>;
    } catch {
      checks.push({ index, valid: false, reason: 'signatures[i].protected is not a base64url JSON JOSE header' });
      continue;
    }
    const kid = typeof header.kid === 'string' ? header.kid : undefined;
    const alg = typeof header.alg === 'string' ? header.alg : undefined;
    const jku = typeof header.jku === 'string' ? header.jku : undefined;
    const base = { index, kid, alg, jku };
    if (!alg || !(CARD_SIGNING_ALGORITHMS as readonly string[]).includes(alg)) {
      checks.push({ ...base, valid: false, reason: `protected header alg ${alg ?? '(missing)'} is not accepted (ES256, EdDSA)` });
      continue;
    }
    if (!kid) {
      checks.push({ ...base, valid: false, reason: 'protected header has no kid' });
      continue;
    }
    if (jku !== undefined && !jkuTrusted(jku, kid)) {
      checks.push({ ...base, valid: false, reason: `jku ${jku} is outside the trust anchors; its keys are not fetched` });
      continue;
    }
    let key: SigningKey | null;
    try {
      key = await resolveKey(kid, jku, alg);
    } catch (e) {
      checks.push({ ...base, valid: false, reason: `key ${kid} could not be resolved: ${e instanceof Error ? e.message : String(e)}` });
      continue;
    }
    if (!key) {
      checks.push({ ...base, valid: false, reason: `no key with kid ${kid}` });
      continue;
    }
    try {
      await flattenedVerify({ protected: sig.protected, payload, signature: sig.signature }, key as CryptoKey, { algorithms: [alg] });
      checks.push({ ...base, valid: true });
    } catch (e) {
      checks.push({ ...base, valid: false, reason: `the signature does not match the canonical card (a field changed after signing, or another key signed it): ${e instanceof Error ? e.message : String(e)}` });
    }
  }
  return { valid: checks.some((c) => c.valid), checks };
}
