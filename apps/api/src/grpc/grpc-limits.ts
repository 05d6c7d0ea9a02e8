import { createHash } from 'node:crypto';
import { TtlLruCache } from '#libs/common';
import type { AppConfig } from '#libs/config';

/** Failed authentications one credential may have per minute from one address (as the HTTP limiter). */
const AUTH_FAILURES_PER_CREDENTIAL = 5;
const WINDOW_MS = 60_000;
/** Most addresses and credentials counted per process; the least recently used are forgotten first. */
const MAX_COUNTERS = 100_000;

/** A fixed one-minute window's count. */
interface Window {
  count: number;
  resetAt: number;
}

/** Why a call is refused, and when to retry (s). */
export interface Refusal {
  message: string;
  retryAfterSeconds: number;
}

/**
 * The HTTP edge's limits applied to gRPC calls, with the same rules (apps/api/src/common/rate-limit.ts):
 * RATE_LIMIT_PER_KEY calls per minute per API key — counted only for a key that authenticated —,
 * RATE_LIMIT_PER_IP per address for every other call (no key, a JWT, a key that did not
 * authenticate: a stranger who knows a key's prefix spends his address's budget, never the key's),
 * and failed authentications (UNAUTHENTICATED) counted per address and per (credential, address)
 * pair — a valid credential is never refused for its address's failures; past the address's
 * budget only further FAILED attempts are answered RESOURCE_EXHAUSTED; one credential failing
 * AUTH_FAILURES_PER_CREDENTIAL times from an address is refused there before it is checked.
 * Counted in this process (the HTTP limits share Redis across instances; gRPC's are per instance).
 * 0 turns a limit off.
 */
export class GrpcCallLimits {
  private readonly windows = new TtlLruCache<string, Window>(MAX_COUNTERS, WINDOW_MS);

  constructor(
    private readonly config: Pick<AppConfig, 'RATE_LIMIT_PER_KEY' | 'RATE_LIMIT_PER_IP' | 'RATE_LIMIT_AUTH_FAILURES_PER_IP'>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Before a credential is checked: a refusal when this (credential, address) pair failed
   * AUTH_FAILURES_PER_CREDENTIAL times in the window (nothing is counted), or null.
   */
  spentCredential(address: string, credential: string | undefined): Refusal | null {
    const budget = this.config.RATE_LIMIT_AUTH_FAILURES_PER_IP;
    if (budget === 0 || credential === undefined) return null;
    const pair = this.peek(`authfail:cred:${fingerprint(credential)}:${address}`);
    return pair && pair.count >= Math.min(AUTH_FAILURES_PER_CREDENTIAL, budget) ? this.refusal(pair, 'too many failed authentications with this credential from this address') : null;
  }

  /**
   * Count a call: against `authenticatedKeyPrefix` (RATE_LIMIT_PER_KEY) when its API key
   * authenticated, else against its address (RATE_LIMIT_PER_IP). A refusal, or null.
   */
  count(address: string, authenticatedKeyPrefix: string | undefined): Refusal | null {
    const limit = authenticatedKeyPrefix ? this.config.RATE_LIMIT_PER_KEY : this.config.RATE_LIMIT_PER_IP;
    if (limit === 0) return null;
    const w = this.increment(authenticatedKeyPrefix ? `key:${authenticatedKeyPrefix}` : `ip:${address}`);
    return w.count > limit ? this.refusal(w, authenticatedKeyPrefix ? 'per API key' : 'per client address') : null;
  }

  /**
   * After a call failed authentication: counts it, and returns a refusal when the address is past
   * its budget (the call is then answered RESOURCE_EXHAUSTED instead of UNAUTHENTICATED).
   */
  failedAuthentication(address: string, credential: string | undefined): Refusal | null {
    const budget = this.config.RATE_LIMIT_AUTH_FAILURES_PER_IP;
    if (budget === 0 || credential === undefined) return null;
    this.increment(`authfail:cred:${fingerprint(credential)}:${address}`);
    const w = this.increment(`authfail:${address}`);
    return w.count > budget ? this.refusal(w, 'too many failed authentications from this address') : null;
  }

  private peek(key: string): Window | undefined {
    const w = this.windows.get(key);
    return w && w.resetAt > this.now() ? w : undefined;
  }

  private increment(key: string): Window {
    let w = this.peek(key);
    if (!w) {
      w = { count: 0, resetAt: this.now() + WINDOW_MS };
      this.windows.set(key, w);
    }
    w.count++;
    return w;
  }

  private refusal(w: Window, what: string): Refusal {
    const retryAfterSeconds = Math.max(1, Math.ceil((w.resetAt - this.now()) / 1000));
    return { message: `rate limit exceeded (${what}); retry in ${retryAfterSeconds} s`, retryAfterSeconds };
  }
}

/** A credential's counter name: 128 bits of its SHA-256 (the secret itself is never kept). */
function fingerprint(credential: string): string {
  return createHash('sha256').update(credential).digest('hex').slice(0, 32);
}
