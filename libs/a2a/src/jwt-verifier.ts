import { Inject, Injectable } from '@nestjs/common';
import { createLocalJWKSet, createRemoteJWKSet, customFetch, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { TtlLruCache } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { BindingSecurity } from '#libs/contracts';
import { outboundFetch, outboundPolicy } from '#libs/outbound';
import { A2AError } from './a2a.errors.js';

type JwtSecurity = Extract<BindingSecurity, { scheme: 'jwt' }>;

/** A verified bearer token's caller. */
export interface JwtCaller {
  issuer: string;
  subject: string;
  scopes: string[];
}

/** How long a discovered jwks_uri is trusted before the discovery document is read again (ms). */
const DISCOVERY_TTL_MS = 10 * 60_000;
/** Most issuers (discovery answers, key sets) kept per process; the least recently used go first. */
const ISSUERS_MAX = 1_000;
/** Longest a discovery or JWKS fetch may take (ms). */
const FETCH_TIMEOUT_MS = 5_000;
/** Clock skew tolerated between the issuer and this service (s): `exp`, `nbf` and the lifetime's `exp - now`. */
const CLOCK_TOLERANCE_S = 30;
/** A binding's maximum token lifetime when it predates `maxTokenLifetimeSeconds` (s): the schema's default. */
const DEFAULT_MAX_TOKEN_LIFETIME_S = 86_400;

/** RFC 6750 §3 challenge for a bearer-token binding. */
export function bearerChallenge(error?: 'invalid_token' | 'insufficient_scope', description?: string, scope?: string): string {
  const parts = ['Bearer realm="a2a"'];
  if (error) parts.push(`error="${error}"`);
  if (description) parts.push(`error_description="${description.replace(/["\\\\]/g, "'").slice(0, 200)}"`);
  if (scope) parts.push(`scope="${scope}"`);
  return parts.join(', ');
}

/**
 * Verifies the bearer JWTs of a `jwt` binding with `jose`: the signature against the issuer's
 * keys (the binding's `jwksUri`, else the `jwks_uri` of the issuer's OIDC discovery document,
 * whose `issuer` must be the configured one), then `iss`, `aud`, `exp` / `nbf` (30 s of clock
 * tolerance), the token's lifetime and the binding's required scopes (`scope`, space separated,
 * or `scp`). `exp` is required, and a token living longer than the binding's
 * `maxTokenLifetimeSeconds` (default 24 h) is refused: `exp - iat` when `iat` is present, and
 * always `exp - now` (plus the 30 s tolerance), so a future `iat` does not stretch it. Key sets are
 * cached per URI by jose for 10 min (refetched on an unknown `kid`, at most every 30 s). A failed
 * fetch is remembered for JWT_ISSUER_FAILURE_TTL_MS (default 5 s): meanwhile calls needing that
 * document or key set get the same answer without a fetch (keys held from an earlier fetch keep
 * verifying the tokens they match), so bogus tokens cannot make the service hammer a failing
 * issuer; concurrent calls share one discovery fetch, as jose shares a key set's.
 * Errors: Unauthenticated (a challenge with `invalid_token` in `metadata.challenge`) for a missing,
 * malformed, badly signed, expired, wrong-issuer / wrong-audience, never-expiring or too
 * long-lived token; Unauthorized
 * (`insufficient_scope`) when a required scope is missing; and, when the issuer's discovery
 * document or key set cannot be read (unreachable, no answer within FETCH_TIMEOUT_MS, not 200, not
 * a key set), an InternalError marked `unavailable` (503 with Retry-After): the caller's token may
 * be fine, so asking it to authenticate again (401) would not help.
 *
 * Issuer and JWKS URLs come from an organization's binding, so both fetches go through the
 * outbound guard (the address connected to must be public unicast unless it falls in
 * JWT_ISSUER_ALLOWED_CIDRS; no redirects): a binding cannot make the service probe its own network.
 */
@Injectable()
export class JwtVerifier {
  // key sets keep their own cooldown and key cache (jose); this bounds how many issuers are held
  private readonly keySets = new TtlLruCache<string, ReturnType<typeof createRemoteJWKSet>>(ISSUERS_MAX, 0);
  private readonly discovered = new TtlLruCache<string, string>(ISSUERS_MAX, DISCOVERY_TTL_MS);
  /** Discovery fetches in flight, shared by the calls that need them. */
  private readonly discovering = new Map<string, Promise<string>>();
  /** What a discovery document (`discovery:<issuer>`) or key set (`jwks:<uri>`) failed with lately; null when failures are not remembered. */
  private readonly failures: TtlLruCache<string, Error> | null;
  /** The local key set of a remote set's last keys (used without a reload while a reload fails). */
  private readonly heldSets = new WeakMap<JSONWebKeySet, ReturnType<typeof createLocalJWKSet>>();
  private readonly fetch: typeof fetch;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.fetch = outboundFetch(outboundPolicy(config.JWT_ISSUER_ALLOWED_CIDRS));
    this.failures = config.JWT_ISSUER_FAILURE_TTL_MS > 0 ? new TtlLruCache(ISSUERS_MAX, config.JWT_ISSUER_FAILURE_TTL_MS) : null;
  }

  async verify(token: string | undefined, sec: JwtSecurity): Promise<JwtCaller> {
    if (!token) {
      throw new A2AError('Unauthenticated', 'this agent requires a bearer token (Authorization: Bearer <JWT>)', { metadata: { challenge: bearerChallenge() } });
    }
    let payload: JWTPayload;
    try {
      const keys = await this.keySet(sec);
      ({ payload } = await jwtVerify(token, keys, { issuer: sec.issuer, audience: sec.audience, clockTolerance: CLOCK_TOLERANCE_S, requiredClaims: ['exp'] }));
    } catch (e) {
      if (e instanceof A2AError) throw e;
      if (e instanceof KeySetUnavailable) {
        throw issuerUnavailable(`the token issuer's key set could not be read (${e.message})`, e);
      }
      const reason = describeJoseError(e);
      throw new A2AError('Unauthenticated', `the bearer token is not valid for this agent: ${reason}`, { metadata: { challenge: bearerChallenge('invalid_token', reason) } });
    }
    const tooLong = lifetimeExcess(payload, sec.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_S);
    if (tooLong) {
      throw new A2AError('Unauthenticated', `the bearer token is not valid for this agent: ${tooLong}`, { metadata: { challenge: bearerChallenge('invalid_token', tooLong) } });
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') {
      throw new A2AError('Unauthenticated', 'the bearer token has no subject (sub)', { metadata: { challenge: bearerChallenge('invalid_token', 'no sub claim') } });
    }
    const scopes = scopesOf(payload);
    const missing = sec.requiredScopes.filter((s) => !scopes.includes(s));
    if (missing.length > 0) {
      throw new A2AError('Unauthorized', `the bearer token lacks scope ${missing.join(' ')}`, {
        metadata: { requiredScope: missing.join(' '), challenge: bearerChallenge('insufficient_scope', undefined, sec.requiredScopes.join(' ')) },
      });
    }
    return { issuer: sec.issuer, subject: payload.sub, scopes };
  }

  /** The binding's key set; what fails in it other than the key lookup throws KeySetUnavailable. */
  private async keySet(sec: JwtSecurity): Promise<JWTVerifyGetKey> {
    const uri = sec.jwksUri ?? (await this.discover(sec.issuer));
    let set = this.keySets.get(uri);
    if (!set) {
      set = createRemoteJWKSet(new URL(uri), { timeoutDuration: FETCH_TIMEOUT_MS, cooldownDuration: 30_000, [customFetch]: this.fetch });
      this.keySets.set(uri, set);
    }
    const remote = set;
    const failureKey = `jwks:${uri}`;
    return async (header, token) => {
      const failed = this.failures?.get(failureKey);
      if (failed) {
        // a fetch failed lately: no fetch now; keys still held verify the tokens they match
        const keys = remote.fresh ? remote.jwks() : undefined;
        if (!keys) throw failed;
        let held = this.heldSets.get(keys);
        if (!held) this.heldSets.set(keys, (held = createLocalJWKSet(keys)));
        try {
          return await held(header, token);
        } catch (e) {
          // about the token: answered as usual; an unknown key would need the reload that failed,
          // and held keys jose cannot use are what failed
          const code = (e as { code?: string }).code ?? '';
          if (KEY_LOOKUP_ERRORS.has(code) && code !== 'ERR_JWKS_NO_MATCHING_KEY') throw e;
          throw failed;
        }
      }
      try {
        return await remote(header, token);
      } catch (e) {
        if (KEY_LOOKUP_ERRORS.has((e as { code?: string }).code ?? '')) throw e;
        const unavailable = new KeySetUnavailable(keySetFailure(e), { cause: e });
        this.failures?.set(failureKey, unavailable);
        throw unavailable;
      }
    };
  }

  /**
   * OIDC discovery (OpenID Connect Discovery 1.0 §4): the issuer's jwks_uri; one fetch at a time
   * per issuer, its failure remembered for JWT_ISSUER_FAILURE_TTL_MS.
   */
  private async discover(issuer: string): Promise<string> {
    const hit = this.discovered.get(issuer);
    if (hit) return hit;
    const failed = this.failures?.get(`discovery:${issuer}`);
    if (failed) throw failed;
    let pending = this.discovering.get(issuer);
    if (!pending) {
      pending = this.fetchDiscovery(issuer)
        .catch((e: unknown) => {
          this.failures?.set(`discovery:${issuer}`, e instanceof Error ? e : new Error(String(e)));
          throw e;
        })
        .finally(() => this.discovering.delete(issuer));
      this.discovering.set(issuer, pending);
    }
    return pending;
  }

  private async fetchDiscovery(issuer: string): Promise<string> {
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    let doc: { issuer?: unknown; jwks_uri?: unknown };
    try {
      const res = await this.fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        throw new Error(`HTTP ${res.status}`);
      }
      doc = (await res.json()) as typeof doc;
    } catch (e) {
      throw issuerUnavailable(`the token issuer's discovery document could not be read (${keySetFailure(e)})`, e);
    }
    if (doc.issuer !== issuer || typeof doc.jwks_uri !== 'string') {
      throw new A2AError('Unauthenticated', "the token issuer's discovery document does not name this issuer and a jwks_uri", {
        metadata: { challenge: bearerChallenge('invalid_token', 'issuer discovery mismatch') },
      });
    }
    this.discovered.set(issuer, doc.jwks_uri);
    return doc.jwks_uri;
  }
}

/** The issuer's key set could not be read or used (the token itself may be fine). */
class KeySetUnavailable extends Error {}

/** What jose's key set throws about the token (no key for its `kid` / `alg`), not about the set. */
const KEY_LOOKUP_ERRORS = new Set(['ERR_JWKS_NO_MATCHING_KEY', 'ERR_JWKS_MULTIPLE_MATCHING_KEYS', 'ERR_JOSE_NOT_SUPPORTED']);

/** A key set failure as one readable reason: a timeout, a network error (with its code), or jose's words (not 200, not JSON, malformed). */
function keySetFailure(e: unknown): string {
  const err = e as { code?: unknown; name?: string; message?: string; cause?: unknown };
  if (err.code === 'ERR_JWKS_TIMEOUT') return `no answer within ${FETCH_TIMEOUT_MS / 1000} s`;
  // along the cause chain: a timeout (ours aborts the request: AbortError / TimeoutError), or the
  // socket error's code, worded as fetch words it ("fetch failed: ECONNREFUSED")
  let code: string | undefined;
  for (let c: any = e, depth = 0; c && typeof c === 'object' && depth < 5; c = c.cause, depth++) {
    if (c.name === 'TimeoutError' || c.name === 'AbortError' || c.code === 'ABORT_ERR') return `no answer within ${FETCH_TIMEOUT_MS / 1000} s`;
    if (depth > 0 && typeof c.code === 'string' && /^E[A-Z]+$/.test(c.code)) code ??= c.code;
  }
  if (code) return `fetch failed: ${code}`;
  return err.message ?? String(e);
}

/**
 * Why a verified token lives too long for a binding allowing `maxSeconds`, or null. `exp` is
 * present (jose required it). `exp - iat` is the lifetime the issuer granted; `exp - now` bounds
 * what is left of it whatever `iat` says (a future `iat` would otherwise hide a long life).
 */
function lifetimeExcess(payload: JWTPayload, maxSeconds: number): string | null {
  const exp = payload.exp!;
  const now = Math.floor(Date.now() / 1000);
  const lifetime = typeof payload.iat === 'number' ? Math.max(exp - payload.iat, exp - now - CLOCK_TOLERANCE_S) : exp - now - CLOCK_TOLERANCE_S;
  return lifetime > maxSeconds ? `the token lifetime (${lifetime} s) exceeds this agent's maximum of ${maxSeconds} s` : null;
}

function scopesOf(payload: JWTPayload): string[] {
  const scope = payload.scope;
  if (typeof scope === 'string') return scope.split(' ').filter(Boolean);
  const scp = payload.scp;
  if (Array.isArray(scp)) return scp.filter((s): s is string => typeof s === 'string');
  if (typeof scp === 'string') return scp.split(' ').filter(Boolean);
  return [];
}

/** jose's error as one readable reason (which claim or check failed). */
function describeJoseError(e: unknown): string {
  const err = e as { code?: string; claim?: string; reason?: string; message?: string };
  switch (err.code) {
    case 'ERR_JWT_EXPIRED':
      return 'the token has expired';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (err.claim === 'exp' && err.reason === 'missing') return 'the token has no expiry (exp): tokens that never expire are not accepted';
      return `claim ${err.claim ?? ''} check failed: ${err.message ?? ''}`.trim();
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'the signature does not verify';
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return "no key of the issuer's key set matches the token";
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return 'the token is malformed';
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return 'the token algorithm is not accepted';
    default:
      return err.message ?? String(e);
  }
}

/** The issuer's keys could not be read: 503 with Retry-After, the reason in the message. */
function issuerUnavailable(message: string, cause: unknown): A2AError {
  return new A2AError('InternalError', message, { cause, unavailable: true });
}
