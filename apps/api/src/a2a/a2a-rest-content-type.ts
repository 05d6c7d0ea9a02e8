import { Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { A2AError, toRestError } from '#libs/a2a';
import { JSON_RPC_CONTENT_TYPES, mediaTypeOf, sendJson } from './a2a-http.js';

/** Fastify route config flag of the HTTP+JSON routes whose request body must be JSON (checked by A2ARestContentTypeGuard). */
export const A2A_REST_BODY = 'a2aRestBody';

/** True when the request carries a body (RFC 9112 §6.3: Content-Length > 0 or Transfer-Encoding). */
export function hasBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * 415 in the HTTP+JSON error shape for a body that is not JSON (A2A v1.0 §11.2: requests are
 * `application/json`; `application/a2a+json` is accepted too), on the routes marked with
 * `A2A_REST_BODY` in their config. It must run as an `onRequest` hook: Fastify refuses a Content-Type it has
 * no parser for before any handler runs, with the admin API's error body; this answers first,
 * and the same way for every non-JSON type. A body without a Content-Type is refused too.
 */
@Injectable()
export class A2ARestContentTypeGuard implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    // a synchronous hook: it runs on every request, and most are not an HTTP+JSON body route
    fastify.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
      const config = req.routeOptions.config as unknown as Record<string, unknown> | undefined;
      if (config?.[A2A_REST_BODY] !== true || !hasBody(req)) return done();
      const mediaType = mediaTypeOf(req);
      if (mediaType !== undefined && JSON_RPC_CONTENT_TYPES.includes(mediaType)) return done();
      const shown = (mediaType ?? 'none').slice(0, 100);
      const err = new A2AError('ContentTypeNotSupported', `Content-Type ${shown} is not accepted; send application/json or application/a2a+json`, {
        metadata: { contentType: shown },
      });
      const { httpStatus, body } = toRestError(err, 415);
      // answered here: the request goes no further (done is not called)
      sendJson(reply, httpStatus, body);
    });
  }
}
