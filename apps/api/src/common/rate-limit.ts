import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { A2AError } from '#libs/a2a';
import { AppError } from '#libs/common';
import type { AppConfig } from '#libs/config';
import { sendEdgeError } from './edge-errors.js';

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
 * Rate limits with `@fastify/rate-limit` on Redis (shared by every API instance), per minute:
 * RATE_LIMIT_PER_KEY requests per API key, RATE_LIMIT_PER_IP per client address for callers
 * without a key, and RATE_LIMIT_AUTH_FAILURES_PER_IP failed authentications (401) per address,
 * after which requests carrying credentials from it are refused until the window passes.
 * Over a limit: 429 with `Retry-After`, in the surface's error shape (a JSON-RPC error on the
 * JSON-RPC endpoint). The limiter's Redis connection never queues: while Redis is down the
 * limits are not enforced (fail open) and nothing waits. 0 turns a limit off.
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
  const authFailures = fastify.createRateLimit({
    keyGenerator: (req) => `authfail:${req.ip}`,
    // the check does not count: N failures recorded (count N > N - 1) refuse the next attempt
    max: config.RATE_LIMIT_AUTH_FAILURES_PER_IP > 1 ? config.RATE_LIMIT_AUTH_FAILURES_PER_IP - 1 : config.RATE_LIMIT_AUTH_FAILURES_PER_IP || Number.MAX_SAFE_INTEGER,
    timeWindow: 60_000,
  });
  const carriesCredentials = (req: FastifyRequest) => req.headers.authorization !== undefined || req.headers['x-api-key'] !== undefined;

  const refuse = (req: FastifyRequest, reply: FastifyReply, ttlSeconds: number, what: string) => {
    const msg = `rate limit exceeded (${what}); retry in ${ttlSeconds} s`;
    reply.header('retry-after', String(ttlSeconds));
    return sendEdgeError(req, reply, 429, new A2AError('InvalidRequest', msg, { metadata: { retryAfterSeconds: String(ttlSeconds) } }), new AppError('request.rate_limited', msg, { details: { retryAfterSeconds: ttlSeconds } }));
  };

  fastify.addHook('onRequest', async (req, reply) => {
    if (EXEMPT.has(req.url.split('?')[0]!)) return;
    if (config.RATE_LIMIT_AUTH_FAILURES_PER_IP > 0 && carriesCredentials(req)) {
      const f = await authFailures(req, { increment: false });
      if (!f.isAllowed && f.isExceeded) return refuse(req, reply, f.ttlInSeconds, 'too many failed authentications from this address');
    }
    if (config.RATE_LIMIT_PER_KEY === 0 && config.RATE_LIMIT_PER_IP === 0) return;
    const r = await requests(req);
    if (!r.isAllowed && r.isExceeded) return refuse(req, reply, r.ttlInSeconds, r.key.startsWith('key:') ? 'per API key' : 'per client address');
  });
  // counted before the 401 leaves, so the caller's next attempt already sees it
  fastify.addHook('onSend', async (req, reply, payload) => {
    if (reply.statusCode === 401 && config.RATE_LIMIT_AUTH_FAILURES_PER_IP > 0) await authFailures(req).catch(() => undefined);
    return payload;
  });
  return () => redis.disconnect();
}
