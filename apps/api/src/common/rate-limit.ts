import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { A2AError } from '#libs/a2a';
import { AppError } from '#libs/common';
import type { AppConfig } from '#libs/config';
import { edgeErrorBody, sendEdgeError } from './edge-errors.js';

/** Routes never limited: probes and the metrics scrape. */
const EXEMPT = new Set(['/healthz', '/readyz', '/metrics']);

/** The key a caller is limited by: its API key's public prefix when it shows one, else its address. */
export function callerKey(req: FastifyRequest): string {
  const x = req.headers['x-api-key'];
  const auth = req.headers.authorization;
  const key = typeof x === 'string' ? x : typeof auth === 'string' ? /^Bearer\s+(\S+)/i.exec(auth)?.[1] : undefined;
  // aaas_<prefix>_<secret>: the prefix identifies the key; the secret never becomes a Redis key
  const prefix = key ? /^aaas_([A-Za-z0-9]{8})_/.exec(key)?.[1] : undefined;
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

/**
 * Rate limits with `@fastify/rate-limit` on Redis (shared by every API instance), per minute:
 * RATE_LIMIT_PER_KEY requests per API key and RATE_LIMIT_PER_IP per client address for callers
 * without a key; 0 turns a limit off.
 *
 * Failed authentications (a 401 to a request that presented a credential) are counted per
 * client address and per (credential, address) pair, and never stop a valid credential:
 * - an address past RATE_LIMIT_AUTH_FAILURES_PER_IP failures has its further FAILED attempts
 *   answered 429 instead of 401 (the guesser learns to stop; its budget of 401s is spent), while
 *   a request from it presenting a valid credential is served as usual;
 * - one credential failing AUTH_FAILURES_PER_CREDENTIAL times from an address (at most the
 *   address budget) is refused from that address before it is checked. A valid credential never
 *   fails, so it never reaches this; its fingerprint (not the secret) names the counter.
 * Checks cost one Redis read per credentialed request (the pair); failures two increments.
 * Over a limit: 429 with `Retry-After`, in the surface's error shape (a JSON-RPC error on the
 * JSON-RPC endpoint). The limiter's Redis connection never queues: while Redis is down the
 * limits are not enforced (fail open) and nothing waits.
 */
export async function installRateLimits(fastify: FastifyInstance, config: AppConfig): Promise<() => void> {
  const redis = new Redis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 2_000, commandTimeout: 1_000 });
  redis.on('error', () => undefined);
  await fastify.register(rateLimit, { global: false, redis, skipOnError: true, nameSpace: `${config.REDIS_PREFIX}:rl:`, timeWindow: 60_000 });

  const requests = fastify.createRateLimit({
    keyGenerator: callerKey,
    max: (_req, key) => (key.startsWith('key:') ? config.RATE_LIMIT_PER_KEY : config.RATE_LIMIT_PER_IP) || Number.MAX_SAFE_INTEGER,
    timeWindow: 60_000,
  });
  const authBudget = config.RATE_LIMIT_AUTH_FAILURES_PER_IP;
  // `remaining` is max - failures recorded: 0 means the budget is spent (Redis down: never 0)
  const addressFailures = fastify.createRateLimit({ keyGenerator: (req) => `authfail:${req.ip}`, max: authBudget || 1, timeWindow: 60_000 });
  const pairFailures = fastify.createRateLimit({
    keyGenerator: (req) => `authfail:cred:${credentialFingerprint(presentedCredential(req) ?? '')}:${req.ip}`,
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

  fastify.addHook('onRequest', async (req, reply) => {
    if (EXEMPT.has(req.url.split('?')[0]!)) return;
    if (authBudget > 0 && presentedCredential(req) !== undefined) {
      const pair = await pairFailures(req, { increment: false });
      if (!pair.isAllowed && pair.remaining === 0) return refuse(req, reply, Math.max(1, pair.ttlInSeconds), 'too many failed authentications with this credential from this address');
    }
    if (config.RATE_LIMIT_PER_KEY === 0 && config.RATE_LIMIT_PER_IP === 0) return;
    const r = await requests(req);
    if (!r.isAllowed && r.isExceeded) return refuse(req, reply, r.ttlInSeconds, r.key.startsWith('key:') ? 'per API key' : 'per client address');
  });
  // A failure is counted before its answer leaves, so the caller's next attempt already sees it;
  // a failure past the address's budget leaves as 429 (only failures do: a valid credential's
  // answer is never touched).
  fastify.addHook('onSend', async (req, reply, payload) => {
    if (reply.statusCode !== 401 || authBudget === 0 || presentedCredential(req) === undefined) return payload;
    const [address] = await Promise.all([addressFailures(req), pairFailures(req)]).catch(() => [undefined] as const);
    if (!address || address.isAllowed || !address.isExceeded) return payload;
    const ttl = Math.max(1, address.ttlInSeconds);
    const { a2a, admin } = tooMany(ttl, 'too many failed authentications from this address');
    reply.code(429).removeHeader('www-authenticate').header('retry-after', String(ttl)).header('content-type', 'application/json; charset=utf-8');
    return edgeErrorBody(req, 429, a2a, admin, jsonRpcIdOf(req));
  });
  return () => redis.disconnect();
}
