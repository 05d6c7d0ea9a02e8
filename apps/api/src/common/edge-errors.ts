import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { A2AError, errorShapeVersion, jsonRpcErrorResponse, toRestError } from '#libs/a2a';
import { AppError, ERROR_CODES } from '#libs/common';

/** Which error shape a URL answers in. */
export type Surface = 'jsonrpc' | 'rest' | 'admin' | 'other';

/** JSON-RPC is `POST /a2a/<org>/<agent>[/]`; anything else under /a2a is HTTP+JSON (or a card). */
export function surfaceOf(method: string, url: string): Surface {
  const path = url.split('?')[0]!;
  if (path.startsWith('/v1/') || path === '/v1') return 'admin';
  if (path.startsWith('/a2a/')) return method === 'POST' && /^\/a2a\/[^/]+\/[^/]+\/?$/.test(path) ? 'jsonrpc' : 'rest';
  return 'other';
}

function a2aVersion(req: FastifyRequest): string | undefined {
  const h = req.headers['a2a-version'];
  return typeof h === 'string' ? h : undefined;
}

/**
 * Answer an error raised at the edge (before any controller) in the surface's own shape: a
 * JSON-RPC error object on the JSON-RPC endpoint, `google.rpc.Status` on HTTP+JSON, and
 * `{ error: { code, message }, requestId }` on the admin API and elsewhere. `a2a` is the A2A
 * error; `admin` the canonical code; `status` the HTTP status.
 */
export function sendEdgeError(req: FastifyRequest, reply: FastifyReply, status: number, a2a: A2AError, admin: AppError): FastifyReply {
  reply.status(status).header('content-type', 'application/json; charset=utf-8');
  return reply.send(edgeErrorBody(req, status, a2a, admin));
}

/**
 * The JSON body `sendEdgeError` sends, for a hook that replaces a response already on its way
 * (onSend); `jsonRpcId` is the request's JSON-RPC id when known (null otherwise).
 */
export function edgeErrorBody(req: FastifyRequest, status: number, a2a: A2AError, admin: AppError, jsonRpcId: string | number | null = null): string {
  const surface = surfaceOf(req.method, req.url);
  if (surface === 'jsonrpc') return JSON.stringify(jsonRpcErrorResponse(jsonRpcId, a2a, errorShapeVersion(a2aVersion(req))));
  if (surface === 'rest') return JSON.stringify(toRestError(a2a, status).body);
  return JSON.stringify({ error: { code: admin.code, message: admin.message, ...(admin.details ? { details: admin.details } : {}) }, requestId: req.id });
}

// a NUL byte in a path segment or query value (raw or percent-encoded)
const NUL_IN_URL = /%00|\u0000/i;

/**
 * Edge guards for every request, before routing reaches a controller:
 * - a NUL byte anywhere in the URL → 400 InvalidParams / `request.invalid` (PostgreSQL text cannot
 *   hold it; ids and slugs never contain it);
 * - Fastify's own errors (body too large 413, unsupported content type 415, request timeout 408,
 *   malformed URL 400) answered in the surface's shape instead of Fastify's default body.
 */
export function installEdgeGuards(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (req, reply, done) => {
    if (NUL_IN_URL.test(req.url)) {
      const msg = 'the URL contains a NUL byte (%00)';
      void sendEdgeError(req, reply, 400, new A2AError('InvalidParams', msg), new AppError('request.invalid', msg));
      return;
    }
    done();
  });
}

/** Fastify error codes raised outside controllers, with the status and A2A error they map to. */
export function edgeErrorFor(e: { code?: string; statusCode?: number; message?: string }): { status: number; a2a: A2AError; admin: AppError } | null {
  const code = e.code ?? '';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e.statusCode === 413) {
    const msg = 'the request body is larger than this server accepts';
    return { status: 413, a2a: new A2AError('InvalidRequest', msg), admin: new AppError('request.too_large', msg) };
  }
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' || e.statusCode === 415) {
    const msg = 'unsupported Content-Type: send application/json (or application/a2a+json)';
    return { status: 415, a2a: new A2AError('ContentTypeNotSupported', msg), admin: new AppError('request.unsupported_media_type', msg) };
  }
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || code === 'FST_ERR_BAD_URL' || code === 'FST_ERR_CTP_INVALID_TYPE') {
    const msg = code === 'FST_ERR_BAD_URL' ? 'the URL is malformed' : 'the request body is malformed';
    return { status: 400, a2a: new A2AError('InvalidRequest', msg), admin: new AppError('request.malformed', msg) };
  }
  if (e.statusCode === 408) {
    const msg = 'the request took too long to arrive';
    return { status: 408, a2a: new A2AError('InvalidRequest', msg), admin: new AppError('request.timeout', msg) };
  }
  return null;
}

export { ERROR_CODES };
