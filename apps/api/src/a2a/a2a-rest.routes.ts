import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  annotateResult,
  annotateStream,
  A2A_REST_ROUTES,
  A2AError,
  A2ARestHandler,
  describeCause,
  negotiateVersion,
  routerPath,
  toA2AError,
  toRestError,
  type A2ARestRoute,
  type RestQuery,
  type RestRouteInput,
  type StreamItem,
  stringifyStreamResult,
} from '#libs/a2a';
import { RETRY_AFTER_SECONDS } from '#libs/common';
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AAdmission, callerOf, negotiatedOf } from './a2a-admission.js';
import { isMalformedJson } from '../common/malformed-json.js';
import { callerKey } from '../common/rate-limit.js';
import { SseHeartbeat } from '../common/sse.js';
import { challengeOf, requestedVersion, sendJson } from './a2a-http.js';
import { A2A_REST_BODY, hasBody } from './a2a-rest-content-type.js';
import { ATTR, isTracing, setActiveSpanAttributes } from '#libs/telemetry';

/** The binding path every HTTP+JSON route is under (the agent's JSON-RPC endpoint is the path itself). */
export const A2A_REST_BASE = '/a2a/:org/:agent';

/** Path parameters of the routes: the agent's binding path, the optional `{tenant}`, and the route's own. */
interface RestParams {
  org: string;
  agent: string;
  tenant?: string;
  id?: string;
  configId?: string;
  method?: string;
  '*'?: string;
}

/** One registered Fastify route of the binding: method and URL as the router knows them. */
export interface RegisteredRestRoute {
  method: A2ARestRoute['method'];
  url: string;
  route: A2ARestRoute;
}

/**
 * The Fastify routes of the table `A2A_REST_ROUTES`: each route at the binding path and again
 * under `/{tenant}` (`/a2a/:org/:agent/:tenant/...`).
 */
export function registeredRestRoutes(): RegisteredRestRoute[] {
  return A2A_REST_ROUTES.flatMap((route) => [
    { method: route.method, url: `${A2A_REST_BASE}${routerPath(route.path)}`, route },
    { method: route.method, url: `${A2A_REST_BASE}/:tenant${routerPath(route.path)}`, route },
  ]);
}

/**
 * A2A HTTP+JSON binding (A2A v1.0 §11; routes from the `google.api.http` options of a2a.proto)
 * at the agent's binding path `/a2a/:org/:agent` — the same base URL as its JSON-RPC endpoint
 * (`POST /a2a/:org/:agent` exactly), listed on the card as a second interface when the binding
 * enables `HTTP+JSON`. Every route also exists under `/{tenant}/`, where the tenant is the
 * organization's slug; any other tenant reads as TaskNotFound (404).
 *
 * The routes, their operations, schemas and whether they stream are the table `A2A_REST_ROUTES`
 * (libs/a2a rest/rest-routes.ts), which the OpenAPI document is generated from too.
 *
 * Checks, in order: a request body's Content-Type (415 unless JSON; an `onRequest` hook, see
 * A2ARestContentTypeGuard) → agent exists and serves HTTP+JSON (404) → access (401 +
 * `WWW-Authenticate`, 403) → `A2A-Version` must negotiate to 1.0: this binding exists for 1.0
 * only, and an absent header means 0.3 (§3.6.2), so it is refused with VersionNotSupported
 * (400), as the SDK's REST server does when no 0.3 HTTP+JSON interface is declared → tenant →
 * JSON syntax of a body (400) → the operation. Responses are `application/json`, the bare proto
 * message; errors are `google.rpc.Status` JSON (see `toRestError`). Any other path under the
 * agent is answered by `unmatched` (404, or the capability error of a route not offered).
 *
 * Plain Fastify routes registered from the route table `A2A_REST_ROUTES` (libs/a2a) when the Nest
 * module initialises, as the JSON-RPC route is (see A2AJsonRpcRoute): the global hooks (edge
 * guards, rate limits, security headers, tracing's span name, metrics, request id), the body
 * parser and the error handler Nest installs apply to them as to any route.
 */
@Injectable()
export class A2ARestRoutes implements OnModuleInit {
  constructor(
    private readonly admission: A2AAdmission,
    private readonly handler: A2ARestHandler,
    private readonly sse: SseHeartbeat,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    // resolving with the reply tells Fastify the answer is on its way (see A2AJsonRpcRoute)
    for (const { method, url, route } of registeredRestRoutes()) {
      fastify.route<{ Params: RestParams }>({
        method,
        url,
        config: (route.body ? BODY_ROUTE : {}) as FastifyContextConfig,
        handler: async (req, reply) => {
          if (hasEmptyParam(req.params)) return reply.callNotFound();
          await (route.streaming ? this.streaming(route, req, reply) : this.unary(route, req, reply));
          return reply;
        },
      });
    }
    // Anything else under an agent's path: the capability error for a2a.proto routes not offered,
    // else 404 MethodNotFound — in the binding's error shape. Static routes (the agent's card) and
    // the JSON-RPC endpoint take precedence.
    for (const m of NON_DEFAULT_HTTP_METHODS) if (!fastify.supportedMethods.includes(m)) fastify.addHttpMethod(m, { hasBody: true });
    fastify.all<{ Params: RestParams }>(`${A2A_REST_BASE}/*`, { config: BODY_ROUTE as FastifyContextConfig }, async (req, reply) => {
      if (hasEmptyParam(req.params)) return reply.callNotFound();
      await this.unmatched(req, reply);
      return reply;
    });
  }

  private async unmatched(req: FastifyRequest<{ Params: RestParams }>, reply: FastifyReply): Promise<void> {
    const p = req.params;
    const { error, tenant } = this.handler.unmatched(req.method, p['*'] ?? '');
    const agent = await this.admit({ ...p, tenant }, req, reply, 'unknown', false);
    if (agent) fail(reply, error);
  }

  /** Run the checks, then the route's operation; answer its result as JSON (200), or the error. */
  private async unary(route: A2ARestRoute, req: FastifyRequest<{ Params: RestParams }>, reply: FastifyReply): Promise<void> {
    const agent = await this.admit(req.params, req, reply, route.operation, route.body !== undefined);
    if (!agent) return;
    let result: unknown;
    try {
      result = await route.call(this.handler, agent, this.inputOf(req, agent, NEVER_ABORTED));
    } catch (e) {
      return fail(reply, e);
    }
    sendJson(reply, 200, annotateResult(result, negotiatedOf(req), '1.0'));
  }

  /**
   * Run the checks, start the stream, and wait for its first event before answering: an error
   * until then is an ordinary error response (as the SDK's REST server answers). Then SSE
   * (SseHeartbeat.pump): `data:` = the bare StreamResponse; an error after that is an
   * `event: error` whose data is the google.rpc.Status body.
   */
  private async streaming(route: A2ARestRoute, req: FastifyRequest<{ Params: RestParams }>, reply: FastifyReply): Promise<void> {
    const agent = await this.admit(req.params, req, reply, route.operation, route.body !== undefined);
    if (!agent) return;
    const release = this.sse.reserve(callerKey(req));
    if (!release) return fail(reply, new A2AError('InvalidRequest', 'too many open streams for this caller; close one and resume with Last-Event-ID'), {}, 429);
    reply.raw.once('close', release);
    const ac = new AbortController();
    reply.raw.once('close', () => ac.abort());
    let iterator: AsyncIterator<StreamItem>;
    let first: IteratorResult<StreamItem>;
    try {
      const started = (await route.call(this.handler, agent, this.inputOf(req, agent, ac.signal))) as AsyncIterable<StreamItem>;
      const negotiated = negotiatedOf(req);
      iterator = (negotiated?.plugins.some((p) => p.plugin.annotate) ? annotateStream(started, negotiated, '1.0') : started)[Symbol.asyncIterator]();
      first = await iterator.next();
    } catch (e) {
      ac.abort();
      return fail(reply, e);
    }
    await this.sse.pump(reply, iterator, ac, { data: (item) => stringifyStreamResult(item.result), error: (e) => JSON.stringify(toRestError(toA2AError(e)).body) }, first);
  }

  /** What the route's operation reads of the request. */
  private inputOf(req: FastifyRequest<{ Params: RestParams }>, agent: ResolvedA2AAgent, signal: AbortSignal): RestRouteInput {
    const p = req.params;
    return {
      params: { id: p.id ?? '', configId: p.configId ?? '', method: p.method ?? '' },
      query: req.query as RestQuery,
      body: bodyOf(req),
      resume: resumeOf(req),
      signal,
      caller: callerOf(req),
      extensions: negotiatedOf(req),
      extendedCard: () => this.admission.extendedCard(agent, req),
    };
  }

  /**
   * The checks every route shares (see the class comment). Returns the agent, or null after
   * answering the error.
   */
  private async admit(p: RestParams, req: FastifyRequest, reply: FastifyReply, operation: string, body: boolean): Promise<ResolvedA2AAgent | null> {
    let agent: ResolvedA2AAgent;
    try {
      agent = await this.admission.admit(p.org, p.agent, 'HTTP+JSON', req);
    } catch (e) {
      const err = toA2AError(e);
      fail(reply, err, err.type === 'Unauthenticated' ? { 'www-authenticate': challengeOf(err) } : err.metadata?.challenge ? { 'www-authenticate': err.metadata.challenge } : {});
      return null;
    }
    if (isTracing()) setActiveSpanAttributes({ [ATTR.A2A_OPERATION]: operation, [ATTR.ORG_ID]: agent.org.id, [ATTR.AGENT_ID]: agent.agent.id });
    const version = versionError(requestedVersion(req));
    if (version) {
      fail(reply, version);
      return null;
    }
    if (p.tenant !== undefined && p.tenant !== agent.org.slug) {
      fail(reply, new A2AError('TaskNotFound', `tenant '${p.tenant.slice(0, 64)}' is not served at this URL`, { metadata: { tenant: p.tenant.slice(0, 64) } }));
      return null;
    }
    try {
      this.admission.negotiate(agent, req, reply, '1.0');
    } catch (e) {
      fail(reply, e);
      return null;
    }
    if (body) {
      if (isMalformedJson(req.body)) {
        const b = req.body;
        fail(reply, b.kind === 'invalid' ? new A2AError('InvalidParams', `${b.path ? `${b.path.slice(0, 200)}: ` : ''}${b.reason}`, { metadata: { field: (b.path ?? '').slice(0, 200) } }) : new A2AError('ParseError', `invalid JSON: ${b.reason.slice(0, 200)}`));
        return null;
      }
    }
    return agent;
  }
}

const log = new Logger('A2ARest');

/** Route config of the routes that take a JSON body (see A2ARestContentTypeGuard). */
const BODY_ROUTE = { [A2A_REST_BODY]: true };

/** The signal of a unary operation: nothing to stop. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * The methods Fastify lacks by default, which a catch-all route serves once they are added (as
 * Nest's `@All` adds them): the unmatched route answers them too.
 */
const NON_DEFAULT_HTTP_METHODS = ['SEARCH', 'PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK'];

/**
 * find-my-way matches an empty segment for a parameter (`/tasks//pushNotificationConfigs`): such a
 * request is not found (the app's 404), as Nest answers it for its own routes.
 */
function hasEmptyParam(params: RestParams): boolean {
  for (const [name, value] of Object.entries(params)) if (value === '' && name !== '*') return true;
  return false;
}

/** Answer `e` in the binding's error shape (`google.rpc.Status` JSON) with its HTTP status. Internal errors are logged. */
function fail(reply: FastifyReply, e: unknown, headers: Record<string, string> = {}, httpStatus?: number): void {
  const err = toA2AError(e);
  if (err.unavailable) log.warn(`unavailable: ${err.message} (${describeCause(err.cause)})`);
  else if (err.type === 'InternalError') {
    const cause = err.cause ?? err;
    log.error(cause instanceof Error ? (cause.stack ?? cause.message) : String(cause));
  }
  const { httpStatus: status, body } = toRestError(err, httpStatus);
  sendJson(reply, status, body, status === 503 ? { 'retry-after': String(RETRY_AFTER_SECONDS), ...headers } : headers);
}

/** The parsed request body; undefined when the request has none (whatever its Content-Type). */
function bodyOf(req: FastifyRequest): unknown {
  return hasBody(req) ? req.body : undefined;
}

/**
 * VersionNotSupported unless `raw` (the A2A-Version header or query parameter) negotiates to 1.0:
 * this binding is not offered in 0.3, which an absent or empty header means (§3.6.2).
 */
function versionError(raw: string | undefined): A2AError | null {
  let version: string | undefined;
  try {
    version = negotiateVersion(raw);
  } catch {
    version = undefined;
  }
  if (version === '1.0') return null;
  const requested = (raw ?? '').trim().slice(0, 32) || '0.3';
  return new A2AError('VersionNotSupported', `A2A-Version ${requested} is not supported by the HTTP+JSON binding, which serves A2A 1.0 only: send A2A-Version: 1.0 (0.3 is served over JSON-RPC)`, {
    metadata: { requested, supported: '1.0' },
  });
}

/** Resume inputs of `:subscribe`: `Last-Event-ID`, or the `A2A-Cursor` header / `?cursor=` token. */
function resumeOf(req: FastifyRequest): { lastEventId?: string; token?: string } {
  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const query = req.query as Record<string, unknown> | undefined;
  const cursor = typeof query?.cursor === 'string' ? query.cursor : undefined;
  return { lastEventId: header('last-event-id'), token: header('a2a-cursor') ?? cursor };
}
