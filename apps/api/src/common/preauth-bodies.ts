import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { A2AError } from '#libs/a2a';
import { AppError } from '#libs/common';
import type { AppConfig } from '#libs/config';
import { sendEdgeError } from './edge-errors.js';
import { callerKey } from './rate-limit.js';

const RELEASE = Symbol('preauthBodyRelease');
type HeldRequest = FastifyRequest & { [RELEASE]?: () => void };

/**
 * What a request without a valid API key may make the API hold while its body arrives (issue #43,
 * the HTTP side of what GrpcCallGate bounds on gRPC). Fastify reads a request's whole body before
 * any route runs, so before authentication a stranger could hold REQUEST_BODY_LIMIT_BYTES per
 * connection for REQUEST_TIMEOUT_MS, over any number of connections. A request whose API key
 * authenticated at the edge (`installRateLimits`, before this hook) is not limited here; any other
 * request with a body (anonymous, a JWT, a wrong key) is held to:
 * - HTTP_PREAUTH_MAX_BODY_BYTES: a larger Content-Length is 413 before a byte is read, a chunked
 *   body is cut with 413 when it passes it;
 * - HTTP_PREAUTH_MAX_BODIES at once per API process, HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS per client
 *   address (as TRUST_PROXY yields it): past them 429 with `Retry-After: 1`, before the body is
 *   read. A place is held until the body has been read (or the request ends).
 * So strangers' bodies in memory stay below HTTP_PREAUTH_MAX_BODIES × HTTP_PREAUTH_MAX_BODY_BYTES.
 * Answers are in the surface's error shape, with `Connection: close` (the unread body is not
 * drained). 0 turns a count off.
 */
export function installPreauthBodyLimits(
  fastify: FastifyInstance,
  config: Pick<AppConfig, 'REQUEST_BODY_LIMIT_BYTES' | 'HTTP_PREAUTH_MAX_BODY_BYTES' | 'HTTP_PREAUTH_MAX_BODIES' | 'HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS'>,
): void {
  const maxBody = Math.min(config.HTTP_PREAUTH_MAX_BODY_BYTES, config.REQUEST_BODY_LIMIT_BYTES);
  if (maxBody >= config.REQUEST_BODY_LIMIT_BYTES && config.HTTP_PREAUTH_MAX_BODIES === 0 && config.HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS === 0) return;
  const byAddress = new Map<string, number>();
  let held = 0;
  const tooLarge = () => {
    const msg = `the request body is larger than a request without a valid API key may send (${maxBody} bytes, HTTP_PREAUTH_MAX_BODY_BYTES)`;
    return { a2a: new A2AError('InvalidRequest', msg), admin: new AppError('request.too_large', msg) };
  };

  fastify.addHook('onRequest', (req, reply, done) => {
    if (!hasBody(req) || callerKey(req).startsWith('key:')) return done();
    const length = Number(req.headers['content-length']);
    if (Number.isFinite(length) && length > maxBody) {
      const { a2a, admin } = tooLarge();
      // the body is never read: the connection closes after the answer instead of draining it
      reply.header('connection', 'close');
      void sendEdgeError(req, reply, 413, a2a, admin);
      return;
    }
    const address = req.ip;
    const mine = byAddress.get(address) ?? 0;
    const what =
      config.HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS > 0 && mine >= config.HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS
        ? `from this address (HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS ${config.HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS})`
        : config.HTTP_PREAUTH_MAX_BODIES > 0 && held >= config.HTTP_PREAUTH_MAX_BODIES
          ? `(HTTP_PREAUTH_MAX_BODIES ${config.HTTP_PREAUTH_MAX_BODIES})`
          : null;
    if (what) {
      const msg = `too many requests without a valid API key are sending their body ${what}; retry in 1 s`;
      reply.header('retry-after', '1').header('connection', 'close');
      void sendEdgeError(req, reply, 429, new A2AError('InvalidRequest', msg, { metadata: { retryAfterSeconds: '1' } }), new AppError('request.rate_limited', msg, { details: { retryAfterSeconds: 1 } }));
      return;
    }
    held++;
    byAddress.set(address, mine + 1);
    let holding = true;
    const release = () => {
      if (!holding) return;
      holding = false;
      held--;
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left <= 0) byAddress.delete(address);
      else byAddress.set(address, left);
    };
    (req as HeldRequest)[RELEASE] = release;
    req.raw.once('close', release);
    done();
  });

  // a chunked body (no Content-Length) is counted as it arrives
  fastify.addHook('preParsing', (req, _reply, payload, done) => {
    if (!(req as HeldRequest)[RELEASE] || req.headers['content-length'] !== undefined) return done(null, payload);
    let seen = 0;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, next) {
        seen += chunk.length;
        if (seen > maxBody) return next(Object.assign(new Error(tooLarge().admin.message), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }));
        next(null, chunk);
      },
    });
    payload.on('error', (e) => counted.destroy(e));
    done(null, payload.pipe(counted));
  });

  // the body has been read: the place is free for another (the request's own end frees it too)
  const release = (req: FastifyRequest, _reply: unknown, done: () => void) => {
    (req as HeldRequest)[RELEASE]?.();
    done();
  };
  fastify.addHook('preValidation', release);
  fastify.addHook('onResponse', release);
}

/** Whether a request carries a body (a Content-Length above 0, or a chunked one). */
function hasBody(req: FastifyRequest): boolean {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return false;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
