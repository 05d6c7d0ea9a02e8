import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { A2AError } from '#libs/a2a';
import { AppError } from '#libs/common';
import type { AppConfig } from '#libs/config';
import { API_KEY_PATTERN, type ApiKeyService } from '#libs/registry';
import { edgeErrorBody, sendEdgeError } from './edge-errors.js';

/** Routes never limited: probes and the metrics scrape. */
const EXEMPT = new Set(['/healthz', '/readyz', '/metrics']);

/** The public prefix of the API key the edge authenticated on a request (set by `installRateLimits`). */
const AUTHENTICATED_KEY = Symbol('authenticatedKeyPrefix');
type KeyedRequest = FastifyRequest & { [AUTHENTICATED_KEY]?: string };

/** The API key a request presents, if it has the key's shape: `X-API-Key`, else `Authorization: Bearer`. */
function presentedKey(req: FastifyRequest): { key: string; prefix: string } | undefined {
  const x = req.headers['x-api-key'];
  const auth = req.headers.authorization;
  const key = typeof x === 'string' && x.trim() !== '' ? x.trim() : typeof auth === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1] : undefined;
  // aaas_<prefix>_<secret>: the prefix identifies the key; the secret never becomes a Redis key
  const prefix = key ? API_KEY_PATTERN.exec(key)?.[1] : undefined;
  return prefix ? { key: key!, prefix } : undefined;
}

/**
 * Longest the edge waits for a presented key's authentication before it treats the request as one
 * without a valid key (ms): a key seen in the last 5 s is answered from memory, another one is one
 * indexed lookup; a database that is slow or down must not be waited on twice (the route checks
 * the key again and waits its own DATABASE_CONNECT_TIMEOUT_MS). The lookup goes on meanwhile, and
 * once it succeeds the key is answered from memory.
 */
export const EDGE_AUTH_WAIT_MS = 250;

/** Whether `key` authenticates, known within EDGE_AUTH_WAIT_MS (later, or failing, is no). */
export function authenticatesAtEdge(keys: Pick<ApiKeyService, 'authenticate'>, key: string): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), EDGE_AUTH_WAIT_MS);
    keys.authenticate(key).then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(false);
      },
    );
  });
}

/**
 * The key a caller is limited by (requests per minute, open streams): its API key's public prefix
 * once that key authenticated at the edge, else its address. Presenting a key's prefix with a
 * wrong secret makes a request its address's, never the key's.
 */
export function callerKey(req: FastifyRequest): string {
  const prefix = (req as KeyedRequest)[AUTHENTICATED_KEY];
  return prefix ? `key:${prefix}` : `ip:${req.ip}`;
}

/**
 * Failed authentications a single credential may have per minute from one address before that
 * (credential, address) pair is refused without being checked; at most the per-address budget.
 */
const AUTH_FAILURES_PER_CREDENTIAL = 5;

/** What a request presents as a credential (`X-API-Key`, else `Authorization`), or undefined. */
function presentedCredential(req: FastifyRequest): string | undefined {
  const x = req.headers['x-api-key'];
  if (typeof x === 'string') return x;
  const auth = req.headers.authorization;
  return typeof auth === 'string' ? auth : undefined;
}

/** A credential's Redis name: 128 bits of its SHA-256 (the secret itself never becomes a key). */
function credentialFingerprint(credential: string): string {
  return createHash('sha256').update(credential).digest('hex').slice(0, 32);
}

/** A JSON-RPC request's id, read back from the body Fastify parsed (null when there is none). */
function jsonRpcIdOf(req: FastifyRequest): string | number | null {
  const id = (req.body as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** How often the request counters of this process are added to the shared ones in Redis (ms). */
export const RATE_LIMIT_SYNC_MS = 50;

interface WindowEntry {
  /** Requests counted here and not yet added in Redis. */
  pending: number;
  /** Requests being added by the flush in flight. */
  sending: number;
  /** The shared count in Redis (every instance's) as of this process's last flush of the key. */
  shared: number;
  /** When the window ends (ms since epoch): the Redis key's expiry as last reported. */
  resetAt: number;
}

// INCRBY the window's counter and start its expiry when it is new: [count, pttl ms]
const WINDOW_ADD_LUA = `local c = redis.call('INCRBY', KEYS[1], ARGV[1])
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]); t = tonumber(ARGV[2]) end
return {c, t}`;

/**
 * Fixed-window request counters shared by every API instance through Redis, without a Redis
 * round trip on the request path: each request is counted in this process and decided against
 * `shared + counted here`; every RATE_LIMIT_SYNC_MS the counts of all keys that saw requests go
 * to Redis in one pipeline (`INCRBY` + window expiry per key), which answers each key's total
 * over every instance and the window's remaining time. One instance's decisions are exact; with
 * several, a key may overshoot its limit by what the other instances counted since their last
 * flush (at most RATE_LIMIT_SYNC_MS of traffic each). While Redis is not connected the limits
 * are not enforced and nothing is counted (fail open), as before.
 */
export class SharedWindowCounter {
  private readonly entries = new Map<string, WindowEntry>();
  private flushing = false;

  constructor(
    private readonly redis: Redis & { rlWindowAdd?: (key: string, n: number, windowMs: number) => Promise<[number, number]> },
    private readonly prefix: string,
    private readonly windowMs: number,
  ) {
    redis.defineCommand('rlWindowAdd', { numberOfKeys: 1, lua: WINDOW_ADD_LUA });
  }

  /**
   * Count one request for `key` against `max` per window. Returns whether it is within the
   * limit, and the seconds until the window ends (for Retry-After; at least 1).
   */
  hit(key: string, max: number, now = Date.now()): { allowed: boolean; ttlSeconds: number } {
    if (this.redis.status !== 'ready') return { allowed: true, ttlSeconds: 0 };
    let e = this.entries.get(key);
    if (!e) {
      e = { pending: 0, sending: 0, shared: 0, resetAt: now + this.windowMs };
      this.entries.set(key, e);
    } else if (now >= e.resetAt) {
      // the shared window expired: a new one starts (Redis sets the expiry at the next flush)
      e.shared = 0;
      e.resetAt = now + this.windowMs;
    }
    e.pending += 1;
    return { allowed: e.shared + e.sending + e.pending <= max, ttlSeconds: Math.max(1, Math.ceil((e.resetAt - now) / 1000)) };
  }

  /** Add the counts of this process to Redis (one pipeline) and learn each key's shared total. */
  async flush(): Promise<void> {
    if (this.flushing) return;
    const now = Date.now();
    const batch: Array<[string, WindowEntry, number]> = [];
    for (const [key, e] of this.entries) {
      if (e.pending > 0) batch.push([key, e, e.pending]);
      else if (e.sending === 0 && now >= e.resetAt) this.entries.delete(key);
    }
    if (batch.length === 0) return;
    if (this.redis.status !== 'ready') {
      for (const [, e] of batch) e.pending = 0;
      return;
    }
    this.flushing = true;
    const pipeline = this.redis.pipeline();
    for (const [key, e, n] of batch) {
      e.pending -= n;
      e.sending += n;
      (pipeline as unknown as { rlWindowAdd(key: string, n: number, windowMs: number): void }).rlWindowAdd(`${this.prefix}${key}`, n, this.windowMs);
    }
    try {
      const results = (await pipeline.exec()) ?? [];
      const at = Date.now();
      batch.forEach(([, e, n], i) => {
        e.sending -= n;
        const [err, value] = results[i] ?? [new Error('no reply'), null];
        if (err || !Array.isArray(value)) return;
        e.shared = Number(value[0]);
        e.resetAt = at + Number(value[1]);
      });
    } catch {
      // Redis went away mid-flush: these counts are dropped (fail open)
      for (const [, e, n] of batch) e.sending -= n;
    } finally {
      this.flushing = false;
    }
  }
}

/**
 * Rate limits on Redis (shared by every API instance), per minute: RATE_LIMIT_PER_KEY requests
 * per API key and RATE_LIMIT_PER_IP per client address for every other request; 0 turns a
 * limit off. A key counts only once it authenticated: a request presenting one is authenticated
 * here, before it is counted (`authenticatesAtEdge`: a key seen in the last 5 s is answered from
 * memory, another one costs the lookup by prefix that the route would make anyway — twice for a
 * wrong secret, the route checking it again), and a key that does not authenticate makes the
 * request its address's (issue #43: 400 wrong secrets with a key's prefix used to spend the key's budget).
 * Requests are counted by SharedWindowCounter: decided in this process, added to
 * Redis in batches, so no request waits on Redis.
 *
 * Failed authentications (a 401 to a request that presented a credential) are counted per
 * client address and per (credential, address) pair, and never stop a valid credential:
 * - an address past RATE_LIMIT_AUTH_FAILURES_PER_IP failures has its further FAILED attempts
 *   answered 429 instead of 401 (the guesser learns to stop; its budget of 401s is spent), while
 *   a request from it presenting a valid credential is served as usual;
 * - one credential failing AUTH_FAILURES_PER_CREDENTIAL times from an address (at most the
 *   address budget) is refused from that address before it is checked. A valid credential never
 *   fails, so it never reaches this; its fingerprint (not the secret) names the counter.
 * Failures cost two increments (`@fastify/rate-limit`), whose answers tell this process which
 * pairs are spent: the check before authentication reads only that local knowledge (no Redis
 * round trip on the request path). With several instances, an instance that has not yet seen a
 * spent pair fail checks it once more; that failure's increment tells it.
 * Over a limit: 429 with `Retry-After`, in the surface's error shape (a JSON-RPC error on the
 * JSON-RPC endpoint). The limiter's Redis connection never queues: while Redis is down the
 * limits are not enforced (fail open) and nothing waits.
 */
export async function installRateLimits(fastify: FastifyInstance, config: AppConfig, keys: Pick<ApiKeyService, 'authenticate'>): Promise<() => void> {
  const redis = new Redis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 2_000, commandTimeout: 1_000 });
  redis.on('error', () => undefined);
  await fastify.register(rateLimit, { global: false, redis, skipOnError: true, nameSpace: `${config.REDIS_PREFIX}:rl:`, timeWindow: 60_000 });

  const requests = new SharedWindowCounter(redis, `${config.REDIS_PREFIX}:rl:req:`, 60_000);
  const sync = setInterval(() => void requests.flush(), RATE_LIMIT_SYNC_MS);
  sync.unref();
  const authBudget = config.RATE_LIMIT_AUTH_FAILURES_PER_IP;
  // `remaining` is max - failures recorded: 0 means the budget is spent (Redis down: never 0)
  const addressFailures = fastify.createRateLimit({ keyGenerator: (req) => `authfail:${req.ip}`, max: authBudget || 1, timeWindow: 60_000 });
  const pairKey = (req: FastifyRequest) => `authfail:cred:${credentialFingerprint(presentedCredential(req) ?? '')}:${req.ip}`;
  const pairFailures = fastify.createRateLimit({
    keyGenerator: pairKey,
    max: Math.min(AUTH_FAILURES_PER_CREDENTIAL, authBudget) || 1,
    timeWindow: 60_000,
  });

  const tooMany = (ttlSeconds: number, what: string) => {
    const msg = `rate limit exceeded (${what}); retry in ${ttlSeconds} s`;
    return {
      a2a: new A2AError('InvalidRequest', msg, { metadata: { retryAfterSeconds: String(ttlSeconds) } }),
      admin: new AppError('request.rate_limited', msg, { details: { retryAfterSeconds: ttlSeconds } }),
    };
  };
  const refuse = (req: FastifyRequest, reply: FastifyReply, ttlSeconds: number, what: string) => {
    const { a2a, admin } = tooMany(ttlSeconds, what);
    reply.header('retry-after', String(ttlSeconds));
    return sendEdgeError(req, reply, 429, a2a, admin);
  };

  const limitRequests = (req: FastifyRequest, reply: FastifyReply): boolean => {
    if (config.RATE_LIMIT_PER_KEY === 0 && config.RATE_LIMIT_PER_IP === 0) return true;
    const key = callerKey(req);
    const byKey = key.startsWith('key:');
    const r = requests.hit(key, (byKey ? config.RATE_LIMIT_PER_KEY : config.RATE_LIMIT_PER_IP) || Number.MAX_SAFE_INTEGER);
    if (r.allowed) return true;
    void refuse(req, reply, r.ttlSeconds, byKey ? 'per API key' : 'per client address');
    return false;
  };
  // (credential, address) pairs whose failures reached their limit, as the failure counts in Redis
  // last answered this process (the pair's counter key → when its window ends, ms since epoch)
  const spentPairs = new Map<string, number>();
  fastify.addHook('onRequest', (req, reply, done) => {
    if (EXEMPT.has(pathOf(req.url))) return done();
    if (authBudget > 0 && spentPairs.size > 0 && redis.status === 'ready' && presentedCredential(req) !== undefined) {
      const key = pairKey(req);
      const until = spentPairs.get(key);
      if (until !== undefined && until > Date.now()) {
        return void refuse(req, reply, Math.max(1, Math.ceil((until - Date.now()) / 1000)), 'too many failed authentications with this credential from this address');
      }
      if (until !== undefined) spentPairs.delete(key);
    }
    const presented = presentedKey(req);
    if (!presented) {
      if (limitRequests(req, reply)) done();
      return;
    }
    // counted as the key's only once it authenticated (its stream slots too: callerKey)
    void authenticatesAtEdge(keys, presented.key).then((ok) => {
      if (ok) (req as KeyedRequest)[AUTHENTICATED_KEY] = presented.prefix;
      if (limitRequests(req, reply)) done();
    });
  });
  // A failure is counted before its answer leaves, so the caller's next attempt already sees it;
  // a failure past the address's budget leaves as 429 (only failures do: a valid credential's
  // answer is never touched).
  fastify.addHook('onSend', async (req, reply, payload) => {
    if (reply.statusCode !== 401 || authBudget === 0 || presentedCredential(req) === undefined) return payload;
    const [address, pair] = await Promise.all([addressFailures(req), pairFailures(req)]).catch(() => [undefined, undefined] as const);
    // the pair's count as Redis answered it: once spent, this process refuses the pair before checking it
    if (pair && !pair.isAllowed && pair.remaining === 0 && pair.ttl > 0) {
      if (spentPairs.size >= MAX_SPENT_PAIRS) forgetExpired(spentPairs);
      if (spentPairs.size < MAX_SPENT_PAIRS) spentPairs.set(pair.key, Date.now() + pair.ttl);
    }
    if (!address || address.isAllowed || !address.isExceeded) return payload;
    const ttl = Math.max(1, address.ttlInSeconds);
    const { a2a, admin } = tooMany(ttl, 'too many failed authentications from this address');
    reply.code(429).removeHeader('www-authenticate').header('retry-after', String(ttl)).header('content-type', 'application/json; charset=utf-8');
    return edgeErrorBody(req, 429, a2a, admin, jsonRpcIdOf(req));
  });
  return () => {
    clearInterval(sync);
    redis.disconnect();
  };
}

/** Most spent (credential, address) pairs remembered; expired ones are forgotten first. */
const MAX_SPENT_PAIRS = 100_000;

function forgetExpired(pairs: Map<string, number>): void {
  const now = Date.now();
  for (const [key, until] of pairs) if (until <= now) pairs.delete(key);
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}
