import { Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  A2AError,
  A2AJsonRpcHandler,
  errorShapeVersion,
  isJsonRpcStream,
  isUnavailableResponse,
  jsonRpcErrorResponse,
  type JsonRpcStream,
  requestIdOf,
  toA2AError,
  type JsonRpcCall,
  stringifyStreamResult,
} from '#libs/a2a';
import { RETRY_AFTER_SECONDS } from '#libs/common';
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AAdmission, callerOf } from './a2a-admission.js';
import { isMalformedJson } from '../common/malformed-json.js';
import { callerKey } from '../common/rate-limit.js';
import { SseHeartbeat } from '../common/sse.js';
import { JSON_RPC_CONTENT_TYPES, challengeOf, mediaTypeOf, requestedVersion, sendJson } from './a2a-http.js';


/** JSON-RPC methods that answer with a stream (v1.0 and v0.3): only these need the client's going-away signal. */
const STREAMING_METHODS = new Set(['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe']);

/** The route's path: each agent's binding path (JSON-RPC is a POST to the base URL itself). */
export const JSON_RPC_ROUTE = '/a2a/:org/:agent';

/**
 * A2A JSON-RPC binding (A2A v1.0 §9; v0.3 for callers without `A2A-Version`) at the agent's
 * binding path `/a2a/:org/:agent`. HTTP edge only: resolve the agent, check access, delegate the
 * body to A2AJsonRpcHandler. JSON-RPC errors are HTTP 200; the exceptions are an unknown or
 * unpublished agent (404: the endpoint does not exist) and access failures (401 with
 * `WWW-Authenticate`, 403), each with a JSON-RPC error body.
 *
 * A plain Fastify route (registered when the Nest module initialises, beside Nest's own routes),
 * not a Nest controller: the hot SendMessage path skips Nest's router, its parameter decorators
 * and exception zone. Everything around it is the app's as for any route: the global hooks (edge
 * guards, rate limits, security headers, tracing's span name, metrics, request id), Fastify's
 * body parser, and the error handler Nest installs (AppExceptionFilter) for anything thrown.
 */
@Injectable()
export class A2AJsonRpcRoute implements OnModuleInit {
  constructor(
    private readonly admission: A2AAdmission,
    private readonly handler: A2AJsonRpcHandler,
    private readonly sse: SseHeartbeat,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    // resolving with the reply tells Fastify the answer is on its way: resolving with undefined
    // before async onSend hooks finish would make it send (and run the hooks) a second time
    fastify.post<{ Params: { org: string; agent: string } }>(JSON_RPC_ROUTE, async (req, reply) => {
      await this.call(req.params.org, req.params.agent, req, reply);
      return reply;
    });
  }

  async call(org: string, agentSlug: string, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const version = requestedVersion(req);
    const call: JsonRpcCall = isMalformedJson(req.body)
      ? { body: undefined, version, ...(req.body.kind === 'invalid' ? { invalid: { reason: req.body.reason, path: req.body.path ?? '' } } : { malformed: req.body.reason }) }
      : { body: req.body, version };
    const fail = (status: number, e: unknown, headers: Record<string, string> = {}) =>
      sendJson(reply, status, jsonRpcErrorResponse(requestIdOf(call.body), toA2AError(e), errorShapeVersion(version)), headers);

    let agent: ResolvedA2AAgent;
    try {
      agent = await this.admission.admit(org, agentSlug, 'JSONRPC', req);
    } catch (e) {
      const err = toA2AError(e);
      // the endpoint does not exist (404), or the caller may not use it (401 / 403)
      if (err.type === 'Unauthenticated') return fail(401, err, { 'www-authenticate': challengeOf(err) });
      if (err.type === 'Unauthorized') return fail(403, err, err.metadata?.challenge ? { 'www-authenticate': err.metadata.challenge } : {});
      if (err.unavailable) return fail(503, err, { 'retry-after': String(RETRY_AFTER_SECONDS) });
      return fail(err.type === 'InternalError' ? 500 : 404, err);
    }
    const mediaType = mediaTypeOf(req);
    if (mediaType !== undefined && !JSON_RPC_CONTENT_TYPES.includes(mediaType)) {
      // ContentTypeNotSupported (-32005) with 415, as for a Content-Type Fastify has no parser for (edge-errors.ts)
      const shown = mediaType.slice(0, 100);
      return fail(415, new A2AError('ContentTypeNotSupported', `Content-Type ${shown} is not accepted; send application/json or application/a2a+json`, { metadata: { contentType: shown } }));
    }
    let negotiated;
    try {
      negotiated = this.admission.negotiate(agent, req, reply, errorShapeVersion(version));
    } catch (e) {
      return fail(200, e);
    }
    // the signal ends a stream when its client goes away; a plain answer never needs it (nor the
    // listener on the socket, nor aborting, which builds a DOMException), so only a streaming
    // method gets one
    const method = (call.body as { method?: unknown } | undefined)?.method;
    const ac = typeof method === 'string' && STREAMING_METHODS.has(method) ? new AbortController() : undefined;
    // a stream's slot is taken before its command runs (as the HTTP+JSON and gRPC bindings do): a
    // refused SendStreamingMessage creates no task the client would never learn the id of
    const release = ac ? this.sse.reserve(callerKey(req)) : undefined;
    if (release === null) return fail(429, new A2AError('InvalidRequest', 'too many open streams for this caller; close one and resume with Last-Event-ID'));
    const onClose = () => ac!.abort();
    if (ac) reply.raw.once('close', onClose);
    let result;
    try {
      result = await this.handler.handle(agent, {
        ...call,
        resume: { lastEventId: header(req, 'last-event-id'), token: header(req, 'a2a-cursor') },
        ...(ac && { signal: ac.signal }),
        caller: callerOf(req),
        extensions: negotiated,
        extendedCard: (version) => this.admission.extendedCard(agent, req, version),
      });
    } catch (e) {
      release?.();
      throw e;
    }
    if (!isJsonRpcStream(result)) {
      release?.();
      if (ac) reply.raw.off('close', onClose);
      // a dependency cannot serve the request now: 503 with Retry-After (the body is the JSON-RPC error)
      if (isUnavailableResponse(result)) return sendJson(reply, 503, result, { 'retry-after': String(RETRY_AFTER_SECONDS) });
      return sendJson(reply, 200, result);
    }
    // a stream comes only from a streaming method, which has its signal and its slot
    const streamAc = ac ?? new AbortController();
    try {
      await this.pipe(reply, result, streamAc);
    } finally {
      release?.();
    }
  }

  /**
   * Send a started stream as SSE (SseHeartbeat.pump): data = a JSON-RPC response with the item as
   * `result`; an error after the first event is an `event: error` whose data is a JSON-RPC error response.
   */
  private pipe(reply: FastifyReply, started: JsonRpcStream, ac: AbortController): Promise<void> {
    // the same bytes as JSON.stringify({ jsonrpc, id, result }); the result's JSON is shared by the
    // streams of its run (stringifyStreamResult)
    const head = started.id === undefined ? '{"jsonrpc":"2.0","result":' : `{"jsonrpc":"2.0","id":${JSON.stringify(started.id)},"result":`;
    return this.sse.pump(reply, started.stream[Symbol.asyncIterator](), ac, {
      data: (item) => `${head}${stringifyStreamResult(item.result)}}`,
      error: (e) => JSON.stringify(jsonRpcErrorResponse(started.id, toA2AError(e), started.version)),
    });
  }
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
