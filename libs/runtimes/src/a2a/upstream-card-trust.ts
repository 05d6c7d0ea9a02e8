import { createHash } from 'node:crypto';
import { AppError, TtlLruCache } from '#libs/common';
import type { RequireSignedCard } from '#libs/contracts';
import { outboundFetch, type OutboundPolicy } from '#libs/outbound';
import { verifyAgentCard, type SignatureCheck, type SigningKey } from '#libs/trust';

/** How long a fetched JWK Set is reused (ms); a kid it lacks refetches it once it is this old. */
const JWKS_TTL_MS = 300_000;
const JWKS_REFRESH_ON_MISS_MS = 30_000;
/** Longest a JWK Set fetch may take (ms), its largest body (bytes), the most keys read from it. */
const JWKS_TIMEOUT_MS = 5000;
const JWKS_MAX_BYTES = 64 * 1024;
const JWKS_MAX_KEYS = 50;
/** How long a card that verified under a set of anchors is not verified again (ms). */
const VERDICT_TTL_MS = 60_000;
/** Members of a JWK that only a private or symmetric key has: never used to verify. */
const PRIVATE_MEMBERS = ['d', 'k', 'p', 'q', 'dp', 'dq', 'qi', 'oth'];

/** A public JWK as read from a trust anchor (only what verification uses). */
type PublicJwk = Record<string, unknown> & { kid?: string; kty?: string };

/**
 * True when a signature's `jku` lies inside `jkuHosts` (see TrustedJkuHostSchema): an entry
 * `host[:port]` admits `https://host[:port]/…` only; an entry `http(s)://host[:port]` admits that
 * exact scheme and host. Default ports compare as absent (`https://h:443/` matches `h`). No suffix
 * or prefix matching: `keys.example.com` does not admit `keys.example.com.evil`.
 * A jku with credentials, or that is not an http(s) URL, is never admitted.
 */
export function jkuInHosts(jku: string, jkuHosts: readonly string[] | undefined): boolean {
  let url: URL;
  try {
    url = new URL(jku);
  } catch {
    return false;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) return false;
  return (jkuHosts ?? []).some((entry) => {
    const origin = /^https?:\/\//i.test(entry) ? safeUrl(entry) : safeUrl(`https://${entry}`);
    return origin !== null && origin.protocol === url.protocol && origin.host === url.host;
  });
}

function safeUrl(s: string): URL | null {
  try {
    return new URL(s);
  } catch {
    return null;
  }
}

/**
 * Why a card did not verify, for people: one clause per signature ("the card has no signatures"
 * when it has none).
 */
export function describeChecks(checks: readonly SignatureCheck[]): string {
  return checks
    .map((c) => (c.index < 0 ? c.reason : `signature ${c.index}${c.kid ? ` (kid ${c.kid})` : ''}: ${c.reason}`))
    .join('; ');
}

/**
 * Verifies upstream Agent Cards for the `a2a` runtime's `requireSignedCard` (A2A v1.0 §8.4.3, by
 * `verifyAgentCard` of libs/trust): at least one signature must verify with a key of the anchors.
 *
 * Key resolution for a signature (kid, jku): a key of `keys` or of a `jwksUrls` set with that kid
 * (pinned: the signature's jku is then irrelevant and never fetched); else its `jku` when
 * `jkuInHosts` admits it; else the signature is refused without fetching anything.
 *
 * JWK Sets are fetched under the outbound policy (guarded addresses, no redirects, no credentials,
 * 5 s, 64 KiB), kept JWKS_TTL_MS in a bounded cache (refetched at most every 30 s when a kid is
 * missing: key rotation), concurrent fetches of one URL shared. A card that verified under the
 * same anchors is not verified again for VERDICT_TTL_MS (a refusal always is).
 */
export class UpstreamCardTrust {
  private readonly sets: TtlLruCache<string, PublicJwk[]>;
  private readonly inflight = new Map<string, Promise<PublicJwk[]>>();
  private readonly verdicts: TtlLruCache<string, true>;

  /** `now`: the caches' clock (ms; tests move it). */
  constructor(
    private readonly policy: OutboundPolicy,
    now: () => number = () => performance.now(),
  ) {
    this.sets = new TtlLruCache(200, JWKS_TTL_MS, now);
    this.verdicts = new TtlLruCache(500, VERDICT_TTL_MS, now);
  }

  /**
   * Throws `runtime.upstream_card_unverified` (details: cardUrl, the per-signature checks) unless
   * a signature of `rawCard` (the card's JSON as served) verifies under `anchors`.
   */
  async requireVerified(rawCard: unknown, anchors: RequireSignedCard, cardUrl: string): Promise<void> {
    if (typeof rawCard !== 'object' || rawCard === null || Array.isArray(rawCard)) {
      throw unverified(cardUrl, 'the card is not a JSON object', []);
    }
    const card = rawCard as Record<string, unknown>;
    const verdictKey = `${digest(card)} ${digest(anchors)}`;
    if (this.verdicts.get(verdictKey)) return;
    const pinned = new Map<string, PublicJwk>();
    for (const k of anchors.keys ?? []) pinned.set(k.kid, k);
    const setErrors = new Map<string, string>();
    // read only for a kid the inline keys lack (a cached set without it is refetched when 30 s old)
    const readSets = async (kid: string) => {
      for (const url of anchors.jwksUrls ?? []) {
        try {
          for (const k of await this.keySet(url, kid)) if (!pinned.has(k.kid!)) pinned.set(k.kid!, k);
          setErrors.delete(url);
        } catch (e) {
          setErrors.set(url, `the JWK Set ${url} could not be read: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    };
    const result = await verifyAgentCard(
      card,
      async (kid, jku) => {
        if (!pinned.has(kid) && (anchors.jwksUrls ?? []).length > 0) await readSets(kid);
        const key = pinned.get(kid);
        // a pinned kid is verified with the pinned key whatever its jku says
        if (key) return publicOnly(key);
        if (jku !== undefined && jkuInHosts(jku, anchors.jkuHosts)) {
          const found = (await this.keySet(jku, kid)).find((k) => k.kid === kid);
          if (found) return publicOnly(found);
          throw new Error(`neither the trusted keys nor the JWK Set at its jku ${jku} have kid ${kid}`);
        }
        const sets = setErrors.size > 0 ? ` (${[...setErrors.values()].join('; ')})` : '';
        if (jku !== undefined) throw new Error(`no trusted key has kid ${kid}${sets}, and its jku ${jku} is outside jkuHosts: not fetched`);
        throw new Error(`no trusted key has kid ${kid}${sets}`);
      },
      // the jku rule is applied by the resolver above, after the pinned keys (a pinned kid needs no jku)
      { trustedJku: () => true },
    );
    if (!result.valid) throw unverified(cardUrl, describeChecks(result.checks), result.checks);
    this.verdicts.set(verdictKey, true);
  }

  /** The keys of the JWK Set at `url` (cached; refetched when `kid` is missing and the set is 30 s old). */
  private async keySet(url: string, kid: string): Promise<PublicJwk[]> {
    const cached = this.sets.get(url);
    if (cached && (!kid || cached.some((k) => k.kid === kid) || this.sets.get(url, JWKS_REFRESH_ON_MISS_MS))) return cached;
    let pending = this.inflight.get(url);
    if (!pending) {
      pending = this.fetchSet(url).finally(() => this.inflight.delete(url));
      this.inflight.set(url, pending);
    }
    const keys = await pending;
    this.sets.set(url, keys);
    return keys;
  }

  private async fetchSet(url: string): Promise<PublicJwk[]> {
    const signal = AbortSignal.timeout(JWKS_TIMEOUT_MS);
    let text: string;
    try {
      const res = await outboundFetch(this.policy)(url, { headers: { accept: 'application/jwk-set+json, application/json' }, signal });
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        throw new Error(`HTTP ${res.status}`);
      }
      if (Number(res.headers.get('content-length') ?? 0) > JWKS_MAX_BYTES) throw new Error(`larger than ${JWKS_MAX_BYTES} bytes`);
      text = await readBounded(res, JWKS_MAX_BYTES);
    } catch (e) {
      if (signal.aborted) throw new Error(`no answer within ${JWKS_TIMEOUT_MS} ms`);
      throw e;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error('not JSON');
    }
    const keys = (body as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(keys)) throw new Error('not a JWK Set (no keys array)');
    return keys
      .slice(0, JWKS_MAX_KEYS)
      .filter((k): k is PublicJwk => typeof k === 'object' && k !== null && typeof (k as PublicJwk).kid === 'string')
      .filter((k) => (k.use === undefined || k.use === 'sig') && !PRIVATE_MEMBERS.some((m) => m in k));
  }
}

/** The key as jose verifies with it: a public JWK, nothing else. */
function publicOnly(k: PublicJwk): SigningKey {
  const out: Record<string, unknown> = {};
  for (const [m, v] of Object.entries(k)) if (!PRIVATE_MEMBERS.includes(m)) out[m] = v;
  return out as SigningKey;
}

async function readBounded(res: Response, maxBytes: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += chunk.length;
    if (size > maxBytes) throw new Error(`larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function digest(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64url');
}

function unverified(cardUrl: string, why: string, checks: readonly SignatureCheck[]): AppError {
  return new AppError('runtime.upstream_card_unverified', `the upstream agent card at ${cardUrl} is not signed by a trusted key: ${why}`, {
    details: { cardUrl, checks: checks.map(({ index, kid, alg, jku, valid, reason }) => ({ index, kid, alg, jku, valid, reason })) },
  });
}
