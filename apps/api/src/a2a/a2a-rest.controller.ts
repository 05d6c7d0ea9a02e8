import { All, Controller, Delete, Get, Logger, Param, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  annotateResult,
  annotateStream,
  A2AError,
  A2ARestHandler,
  describeCause,
  negotiateVersion,
  toA2AError,
  toRestError,
  type RestQuery,
  type StreamItem,
} from '#libs/a2a';
import { RETRY_AFTER_SECONDS } from '#libs/common';
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AAdmission, callerOf, negotiatedOf } from './a2a-admission.js';
import { isMalformedJson } from '../common/malformed-json.js';
import { callerKey } from '../common/rate-limit.js';
import { SseHeartbeat } from '../common/sse.js';
import { challengeOf, requestedVersion, sendJson } from './a2a-http.js';
import { A2ARestBodyRoute, hasBody } from './a2a-rest-content-type.js';
import { ATTR, isTracing, setActiveSpanAttributes } from '#libs/telemetry';


/** Path parameters of the routes: the agent's binding path, the optional `{tenant}` and task `{id}`. */
interface RestParams {
  org: string;
  agent: string;
  tenant?: string;
  id?: string;
  '*'?: string;
}

/** What a route needs checked before its operation runs. */
interface RouteOptions {
  /**
   * The route takes a request body (POST): check that it parsed. (Its Content-Type was checked
   * before parsing, by A2ARestContentTypeGuard on routes marked `@A2ARestBodyRoute()`.)
   */
  body?: boolean;
}

/**
 * A2A HTTP+JSON binding (A2A v1.0 §11; routes from the `google.api.http` options of a2a.proto)
 * at the agent's binding path `/a2a/:org/:agent` — the same base URL as its JSON-RPC endpoint
 * (`POST /a2a/:org/:agent` exactly), listed on the card as a second interface when the binding
 * enables `HTTP+JSON`. Every route also exists under `/{tenant}/`, where the tenant is the
 * organization's slug; any other tenant reads as TaskNotFound (404).
 *
 * | route | operation | success |
 * |---|---|---|
 * | `POST /message:send` | SendMessage | 200 SendMessageResponse |
 * | `POST /message:stream` | SendStreamingMessage | 200 `text/event-stream` of StreamResponse |
 * | `GET /tasks/{id}` | GetTask (`?historyLength=`) | 200 Task |
 * | `GET /tasks` | ListTasks (query = ListTasksRequest fields) | 200 ListTasksResponse |
 * | `POST /tasks/{id}:cancel` | CancelTask | 200 Task |
 * | `GET` or `POST /tasks/{id}:subscribe` | SubscribeToTask (the SDK client POSTs) | 200 `text/event-stream` |
 *
 * Checks, in order: a request body's Content-Type (415 unless JSON; an `onRequest` hook, see
 * A2ARestContentTypeGuard) → agent exists and serves HTTP+JSON (404) → access (401 +
 * `WWW-Authenticate`, 403) → `A2A-Version` must negotiate to 1.0: this binding exists for 1.0
 * only, and an absent header means 0.3 (§3.6.2), so it is refused with VersionNotSupported
 * (400), as the SDK's REST server does when no 0.3 HTTP+JSON interface is declared → tenant →
 * JSON syntax of a body (400) → the operation. Responses are `application/json`, the bare proto
 * message; errors are `google.rpc.Status` JSON (see `toRestError`). Any other path under the
 * agent is answered by `unmatched` (404, or the capability error of a route not offered).
 */
@ApiExcludeController()
@Controller('a2a')
export class A2ARestController {
  constructor(
    private readonly admission: A2AAdmission,
    private readonly handler: A2ARestHandler,
    private readonly sse: SseHeartbeat,
  ) {}

  @Post(':org/:agent/message::send')
  @A2ARestBodyRoute()
  sendMessage(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, { body: true }, (agent) => this.handler.sendMessage(agent, bodyOf(req), callerOf(req), negotiatedOf(req)));
  }

  @Post(':org/:agent/:tenant/message::send')
  @A2ARestBodyRoute()
  sendMessageInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.sendMessage(p, req, reply);
  }

  @Post(':org/:agent/message::stream')
  @A2ARestBodyRoute()
  sendStreamingMessage(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.streaming(p, req, reply, { body: true }, (agent, signal) => this.handler.sendStreamingMessage(agent, bodyOf(req), signal, callerOf(req), negotiatedOf(req)));
  }

  @Post(':org/:agent/:tenant/message::stream')
  @A2ARestBodyRoute()
  sendStreamingMessageInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.sendStreamingMessage(p, req, reply);
  }

  // methods of activated extensions (method extensions)
  @Post(':org/:agent/extensions/:method')
  @A2ARestBodyRoute()
  extensionMethod(@Param() p: RestParams & { method?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, { body: true }, (agent) => this.handler.extensionMethod(agent, p.method ?? '', bodyOf(req), callerOf(req), negotiatedOf(req)));
  }

  @Post(':org/:agent/:tenant/extensions/:method')
  @A2ARestBodyRoute()
  extensionMethodInTenant(@Param() p: RestParams & { method?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.extensionMethod(p, req, reply);
  }

  // push notification configs (§3.1.7–3.1.10)
  @Post(':org/:agent/tasks/:id/pushNotificationConfigs')
  @A2ARestBodyRoute()
  createPushConfig(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, { body: true }, (agent) => this.handler.createPushConfig(agent, p.id ?? '', bodyOf(req), callerOf(req)));
  }

  @Post(':org/:agent/:tenant/tasks/:id/pushNotificationConfigs')
  @A2ARestBodyRoute()
  createPushConfigInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.createPushConfig(p, req, reply);
  }

  @Get(':org/:agent/tasks/:id/pushNotificationConfigs')
  listPushConfigs(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.handler.listPushConfigs(agent, p.id ?? '', req.query as RestQuery, callerOf(req)));
  }

  @Get(':org/:agent/:tenant/tasks/:id/pushNotificationConfigs')
  listPushConfigsInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.listPushConfigs(p, req, reply);
  }

  @Get(':org/:agent/tasks/:id/pushNotificationConfigs/:configId')
  getPushConfig(@Param() p: RestParams & { configId?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.handler.getPushConfig(agent, p.id ?? '', p.configId ?? '', callerOf(req)));
  }

  @Get(':org/:agent/:tenant/tasks/:id/pushNotificationConfigs/:configId')
  getPushConfigInTenant(@Param() p: RestParams & { configId?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.getPushConfig(p, req, reply);
  }

  @Delete(':org/:agent/tasks/:id/pushNotificationConfigs/:configId')
  deletePushConfig(@Param() p: RestParams & { configId?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.handler.deletePushConfig(agent, p.id ?? '', p.configId ?? '', callerOf(req)));
  }

  @Delete(':org/:agent/:tenant/tasks/:id/pushNotificationConfigs/:configId')
  deletePushConfigInTenant(@Param() p: RestParams & { configId?: string }, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.deletePushConfig(p, req, reply);
  }

  /** GET /extendedAgentCard (§3.1.11): the authenticated extended card, to a caller with a key of the org. */
  @Get(':org/:agent/extendedAgentCard')
  extendedAgentCard(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.admission.extendedCard(agent, req));
  }

  @Get(':org/:agent/:tenant/extendedAgentCard')
  extendedAgentCardInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.extendedAgentCard(p, req, reply);
  }

  @Get(':org/:agent/tasks')
  listTasks(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.handler.listTasks(agent, req.query as RestQuery, callerOf(req)));
  }

  @Get(':org/:agent/:tenant/tasks')
  listTasksInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.listTasks(p, req, reply);
  }

  @Get(':org/:agent/tasks/:id')
  getTask(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, {}, (agent) => this.handler.getTask(agent, p.id ?? '', req.query as RestQuery, callerOf(req)));
  }

  @Get(':org/:agent/:tenant/tasks/:id')
  getTaskInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.getTask(p, req, reply);
  }

  // find-my-way ends a parameter name only at "(", "-", "." or "/": the regexp ends `id` before the escaped ":".
  @Post(':org/:agent/tasks/:id([^/:]+)::cancel')
  @A2ARestBodyRoute()
  cancelTask(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.unary(p, req, reply, { body: true }, (agent) => this.handler.cancelTask(agent, p.id ?? '', bodyOf(req), callerOf(req)));
  }

  @Post(':org/:agent/:tenant/tasks/:id([^/:]+)::cancel')
  @A2ARestBodyRoute()
  cancelTaskInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.cancelTask(p, req, reply);
  }

  @Get(':org/:agent/tasks/:id([^/:]+)::subscribe')
  subscribe(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.streaming(p, req, reply, {}, (agent, signal) => this.handler.subscribe(agent, p.id ?? '', resumeOf(req), signal, callerOf(req)));
  }

  @Get(':org/:agent/:tenant/tasks/:id([^/:]+)::subscribe')
  subscribeInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.subscribe(p, req, reply);
  }

  /** The SDK client subscribes with POST (a2a.proto binds GET); both are served, a body is ignored. */
  @Post(':org/:agent/tasks/:id([^/:]+)::subscribe')
  @A2ARestBodyRoute()
  subscribeByPost(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.streaming(p, req, reply, { body: true }, (agent, signal) => this.handler.subscribe(agent, p.id ?? '', resumeOf(req), signal, callerOf(req)));
  }

  @Post(':org/:agent/:tenant/tasks/:id([^/:]+)::subscribe')
  @A2ARestBodyRoute()
  subscribeByPostInTenant(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.subscribeByPost(p, req, reply);
  }

  /**
   * Anything else under an agent's path: the capability error for a2a.proto routes not offered
   * (push notification configs, extended card), else 404 MethodNotFound — in the binding's
   * error shape. Static routes (the agent's card) and the JSON-RPC endpoint take precedence.
   */
  @All(':org/:agent/*')
  @A2ARestBodyRoute()
  unmatched(@Param() p: RestParams, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const { error, tenant } = this.handler.unmatched(req.method, p['*'] ?? '');
    return this.unary({ ...p, tenant }, req, reply, {}, async () => {
      throw error;
    });
  }

  /** Run the checks, then `op`; answer its result as JSON (200), or the error. */
  private async unary(p: RestParams, req: FastifyRequest, reply: FastifyReply, opts: RouteOptions, op: (agent: ResolvedA2AAgent) => Promise<unknown>): Promise<void> {
    const agent = await this.admit(p, req, reply, opts);
    if (!agent) return;
    let result: unknown;
    try {
      result = await op(agent);
    } catch (e) {
      return fail(reply, e);
    }
    sendJson(reply, 200, annotateResult(result, negotiatedOf(req), '1.0'));
  }

  /**
   * Run the checks, start the stream, and wait for its first event before answering: an error
   * until then is an ordinary error response (as the SDK's REST server answers). Then SSE: one
   * event per item, `id:` = the run's sequence, `data:` = the bare StreamResponse; an error after
   * that is an `event: error` whose data is the google.rpc.Status body.
   */
  private async streaming(
    p: RestParams,
    req: FastifyRequest,
    reply: FastifyReply,
    opts: RouteOptions,
    start: (agent: ResolvedA2AAgent, signal: AbortSignal) => Promise<AsyncIterable<StreamItem>>,
  ): Promise<void> {
    const agent = await this.admit(p, req, reply, opts);
    if (!agent) return;
    const release = this.sse.reserve(callerKey(req));
    if (!release) return fail(reply, new A2AError('InvalidRequest', 'too many open streams for this caller; close one and resume with Last-Event-ID'), {}, 429);
    reply.raw.once('close', release);
    const ac = new AbortController();
    reply.raw.once('close', () => ac.abort());
    let iterator: AsyncIterator<StreamItem>;
    let next: IteratorResult<StreamItem>;
    try {
      const started = await start(agent, ac.signal);
      const negotiated = negotiatedOf(req);
      iterator = (negotiated?.plugins.some((p) => p.plugin.annotate) ? annotateStream(started, negotiated, '1.0') : started)[Symbol.asyncIterator]();
      next = await iterator.next();
    } catch (e) {
      ac.abort();
      return fail(reply, e);
    }
    const sse = this.sse.open(reply);
    sse.link(ac);
    try {
      while (!next.done && sse.open) {
        const item = next.value;
        await sse.send({ id: item.sequence, data: JSON.stringify(item.result) });
        if (!sse.open) break;
        next = await iterator.next();
      }
    } catch (e) {
      await sse.send({ event: 'error', data: JSON.stringify(toRestError(toA2AError(e)).body) });
    } finally {
      ac.abort();
      await iterator.return?.().catch(() => undefined);
      sse.end();
    }
  }

  /**
   * The checks every route shares (see the class comment). Returns the agent, or null after
   * answering the error.
   */
  private async admit(p: RestParams, req: FastifyRequest, reply: FastifyReply, opts: RouteOptions): Promise<ResolvedA2AAgent | null> {
    let agent: ResolvedA2AAgent;
    try {
      agent = await this.admission.admit(p.org, p.agent, 'HTTP+JSON', req);
    } catch (e) {
      const err = toA2AError(e);
      fail(reply, err, err.type === 'Unauthenticated' ? { 'www-authenticate': challengeOf(err) } : err.metadata?.challenge ? { 'www-authenticate': err.metadata.challenge } : {});
      return null;
    }
    if (isTracing()) setActiveSpanAttributes({ [ATTR.A2A_OPERATION]: restOperation(req), [ATTR.ORG_ID]: agent.org.id, [ATTR.AGENT_ID]: agent.agent.id });
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
    if (opts.body) {
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

/** The A2A operation (v1.0 method name) an HTTP+JSON route serves, for traces (A2A v1.0 §11.3). */
export function restOperation(req: Pick<FastifyRequest, 'method' | 'routeOptions'>): string {
  const route = req.routeOptions.url ?? '';
  const m = req.method;
  if (/message::?send$/.test(route)) return 'SendMessage';
  if (/message::?stream$/.test(route)) return 'SendStreamingMessage';
  if (/::?cancel$/.test(route)) return 'CancelTask';
  if (/::?subscribe$/.test(route)) return 'SubscribeToTask';
  if (/\/extensions\/:method$/.test(route)) return 'ExtensionMethod';
  if (/\/extendedAgentCard$/.test(route)) return 'GetExtendedAgentCard';
  if (/\/pushNotificationConfigs\/:configId$/.test(route)) return m === 'DELETE' ? 'DeleteTaskPushNotificationConfig' : 'GetTaskPushNotificationConfig';
  if (/\/pushNotificationConfigs$/.test(route)) return m === 'POST' ? 'CreateTaskPushNotificationConfig' : 'ListTaskPushNotificationConfigs';
  if (/\/tasks\/:id$/.test(route)) return 'GetTask';
  if (/\/tasks$/.test(route)) return 'ListTasks';
  return 'unknown';
}
