import { Injectable } from '@nestjs/common';
import type { ZodType } from 'zod';
import type { ResolvedA2AAgent } from '#libs/registry';
import type { Negotiated } from '#libs/extensions';
import { A2AError, invalidParams } from '../a2a.errors.js';
import { A2AOperations } from '../a2a-operations.service.js';
import { A2AStreams, parseResumeCursor, type StreamItem } from '../a2a-streams.service.js';
import { isPlainObject } from '../proto-json.helpers.js';
import { fromV1ListTasksRequest, toV1ListTasksResponse, V1ListTasksRequestSchema, type V1ListTasksResponse } from '../v1/v1-list-tasks.js';
import { fromV1SendMessageRequest, toV1SendMessageResponse, toV1Task, type V1SendMessageResponse, type V1Task } from '../v1/v1.mapper.js';
import { fastV1SendMessageRequest, V1CancelTaskRequestSchema, V1GetTaskRequestSchema, V1SendMessageRequestSchema, type V1SendMessageRequest } from '../v1/v1.schemas.js';
import { A2APushService } from '../push/a2a-push.service.js';
import { extensionMethod, extensionServices } from '../extension-output.js';
import { ANONYMOUS_CALLER, type A2ACaller } from '../a2a.types.js';
import { fromV1PushConfig, toV1PushConfig, V1ListPushConfigsSchema, V1PushConfigRefSchema, V1PushConfigSchema } from '../push/push-schemas.js';

/** A parsed query string as Fastify hands it over: one string per name, or an array when repeated. */
export type RestQuery = Record<string, unknown>;

/** Resume inputs of `:subscribe` (see parseResumeCursor): `Last-Event-ID`, `A2A-Cursor` or `?cursor=`. */
export interface RestResume {
  lastEventId?: string;
  token?: string;
}

/** Query parameters read as ProtoJSON booleans ("true" / "false"). */
const BOOLEAN_QUERY_FIELDS = new Set(['includeArtifacts', 'include_artifacts']);

/**
 * The query string of a GET as the ProtoJSON object of its request message (google.api.http:
 * every non-path field is a query parameter). A parameter given twice → InvalidParams; an empty
 * value means "not set", as a ProtoJSON default; boolean fields accept `true` / `false`.
 * Other values stay strings: the request schemas read ProtoJSON ints and enums from strings.
 */
export function queryToProtoJson(query: RestQuery | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query ?? {})) {
    if (Array.isArray(value)) throw new A2AError('InvalidParams', `query parameter ${name.slice(0, 40)} must be given once`, { metadata: { field: name.slice(0, 40) } });
    if (typeof value !== 'string' || value === '') continue;
    if (BOOLEAN_QUERY_FIELDS.has(name)) {
      if (value !== 'true' && value !== 'false') throw new A2AError('InvalidParams', `${name} must be true or false`, { metadata: { field: name } });
      out[name] = value === 'true';
    } else {
      out[name] = value;
    }
  }
  return out;
}

/** A POST body that must be a request message: a JSON object (absent = `{}` when `optional`). */
function objectBody(body: unknown, what: string, optional = false): Record<string, unknown> {
  if (body === undefined && optional) return {};
  if (!isPlainObject(body)) throw new A2AError('InvalidParams', `the request body must be a JSON object (${what})`);
  return body;
}

/** The routes of a2a.proto this binding knows but does not offer, with the error §3.3.4 prescribes. */
const NOT_OFFERED: Array<{ methods: readonly string[]; path: RegExp; error: () => A2AError }> = [];

function parse<T>(schema: ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw invalidParams(r.error);
  return r.data;
}

/**
 * The HTTP+JSON binding of A2A v1.0 (§11; routes from the `google.api.http` options of
 * a2a.proto), framework-free: the HTTP edge resolves the agent, authenticates, negotiates the
 * version, checks the tenant and Content-Type, and hands over the path id, the query and the
 * parsed body. Results are the bare ProtoJSON response messages (no envelope). Errors are
 * thrown as A2AError; `toRestError` shapes them.
 */
@Injectable()
export class A2ARestHandler {
  constructor(
    private readonly ops: A2AOperations,
    private readonly streams: A2AStreams,
    private readonly push: A2APushService,
  ) {}

  /** `POST /message:send`, body SendMessageRequest → SendMessageResponse (`{task}` | `{message}`). */
  async sendMessage(agent: ResolvedA2AAgent, body: unknown, caller: A2ACaller = ANONYMOUS_CALLER, extensions?: Negotiated): Promise<V1SendMessageResponse> {
    const { inbound, options } = fromV1SendMessageRequest(parseSendMessageRequest(objectBody(body, 'SendMessageRequest')));
    return toV1SendMessageResponse(await this.ops.sendMessage(agent, inbound, { ...options, caller, ...(extensions ? { extensions } : {}) }));
  }

  /**
   * `POST /extensions/{method}`, body = the method's params: a method of an extension the request
   * activated (method extensions), the same method as over JSON-RPC v1.0. MethodNotFound (404)
   * when no activated extension has it.
   */
  async extensionMethod(agent: ResolvedA2AAgent, method: string, body: unknown, caller: A2ACaller, extensions?: Negotiated): Promise<unknown> {
    const m = extensionMethod(extensions, method);
    if (!m) throw new A2AError('MethodNotFound', `no activated extension offers method '${method.slice(0, 100)}' (activate it with A2A-Extensions)`);
    return m({ orgId: agent.org.id, agentId: agent.agent.id, caller, version: '1.0', params: objectBody(body, method, true), services: extensionServices(this.ops, agent, caller, '1.0') });
  }

  /** `POST /tasks/{taskId}/pushNotificationConfigs`, body TaskPushNotificationConfig → the config (with `webhookSecret` once). */
  async createPushConfig(agent: ResolvedA2AAgent, taskId: string, body: unknown, caller: A2ACaller): Promise<Record<string, unknown>> {
    this.push.require(agent);
    const p = parse(V1PushConfigSchema, { ...objectBody(body, 'TaskPushNotificationConfig'), taskId });
    return toV1PushConfig(await this.push.create(agent, caller, taskId, fromV1PushConfig(p), '1.0'));
  }

  /** `GET /tasks/{taskId}/pushNotificationConfigs/{id}` → the config. */
  async getPushConfig(agent: ResolvedA2AAgent, taskId: string, id: string, caller: A2ACaller): Promise<Record<string, unknown>> {
    this.push.require(agent);
    const p = parse(V1PushConfigRefSchema, { taskId, id });
    return toV1PushConfig(await this.push.get(agent, caller, p.taskId, p.id));
  }

  /** `GET /tasks/{taskId}/pushNotificationConfigs` → ListTaskPushNotificationConfigsResponse (one page: every config). */
  async listPushConfigs(agent: ResolvedA2AAgent, taskId: string, query: RestQuery | undefined, caller: A2ACaller): Promise<{ configs: Array<Record<string, unknown>>; nextPageToken: string }> {
    this.push.require(agent);
    const p = parse(V1ListPushConfigsSchema, { ...queryToProtoJson(query), taskId });
    return { configs: (await this.push.list(agent, caller, p.taskId)).map(toV1PushConfig), nextPageToken: '' };
  }

  /** `DELETE /tasks/{taskId}/pushNotificationConfigs/{id}` → `{}` (idempotent). */
  async deletePushConfig(agent: ResolvedA2AAgent, taskId: string, id: string, caller: A2ACaller): Promise<Record<string, never>> {
    this.push.require(agent);
    const p = parse(V1PushConfigRefSchema, { taskId, id });
    await this.push.delete(agent, caller, p.taskId, p.id);
    return {};
  }

  /** `GET /tasks/{id}?historyLength=` → Task. */
  async getTask(agent: ResolvedA2AAgent, id: string, query: RestQuery | undefined, caller: A2ACaller = ANONYMOUS_CALLER): Promise<V1Task> {
    const p = parse(V1GetTaskRequestSchema, { ...queryToProtoJson(query), id });
    return toV1Task(await this.ops.getTask(agent, p.id, p.historyLength, caller));
  }

  /**
   * `POST /tasks/{id}:cancel`, body CancelTaskRequest (optional: the SDK client sends none) → Task.
   * The path id wins over an `id` in the body.
   */
  async cancelTask(agent: ResolvedA2AAgent, id: string, body: unknown, caller: A2ACaller = ANONYMOUS_CALLER): Promise<V1Task> {
    const p = parse(V1CancelTaskRequestSchema, { ...objectBody(body, 'CancelTaskRequest', true), id });
    return toV1Task(await this.ops.cancelTask(agent, p.id, undefined, caller));
  }

  /** `GET /tasks?contextId=&status=&pageSize=&pageToken=&historyLength=&statusTimestampAfter=&includeArtifacts=` → ListTasksResponse. */
  async listTasks(agent: ResolvedA2AAgent, query: RestQuery | undefined, caller: A2ACaller = ANONYMOUS_CALLER): Promise<V1ListTasksResponse> {
    const p = parse(V1ListTasksRequestSchema, queryToProtoJson(query));
    return toV1ListTasksResponse(await this.ops.listTasks(agent, fromV1ListTasksRequest(p), caller));
  }

  /**
   * `POST /message:stream`, body SendMessageRequest → a stream of StreamResponse items.
   * Errors before the stream starts are thrown.
   */
  async sendStreamingMessage(agent: ResolvedA2AAgent, body: unknown, signal: AbortSignal, caller: A2ACaller = ANONYMOUS_CALLER, extensions?: Negotiated): Promise<AsyncIterable<StreamItem>> {
    const { inbound, options } = fromV1SendMessageRequest(parseSendMessageRequest(objectBody(body, 'SendMessageRequest')));
    return this.streams.sendStreaming(agent, inbound, { ...options, caller, ...(extensions ? { extensions } : {}) }, '1.0', signal);
  }

  /** `GET|POST /tasks/{id}:subscribe` → a stream of StreamResponse items (resumable, see A2AStreams.subscribe). */
  async subscribe(agent: ResolvedA2AAgent, id: string, resume: RestResume, signal: AbortSignal, caller: A2ACaller = ANONYMOUS_CALLER): Promise<AsyncIterable<StreamItem>> {
    if (id === '') throw new A2AError('InvalidParams', 'id must not be empty');
    return this.streams.subscribe(agent, id, parseResumeCursor(resume), '1.0', signal, caller);
  }

  /**
   * The answer to a request no route of this binding serves: the capability error for a route
   * of a2a.proto that this agent does not offer (push notification configs, extended card;
   * also under `/{tenant}/`, the tenant then returned for the edge to check), else
   * MethodNotFound (HTTP 404). `path` is relative to the agent's base URL, without a leading `/`.
   */
  unmatched(method: string, path: string): { error: A2AError; tenant?: string } {
    const slash = path.indexOf('/');
    const candidates: Array<{ rest: string; tenant?: string }> = [{ rest: path }];
    if (slash > 0) candidates.push({ rest: path.slice(slash + 1), tenant: path.slice(0, slash) });
    for (const { rest, tenant } of candidates) {
      const known = NOT_OFFERED.find((r) => r.path.test(rest) && r.methods.includes(method));
      if (known) return { error: known.error(), ...(tenant !== undefined ? { tenant } : {}) };
    }
    return { error: new A2AError('MethodNotFound', `no A2A HTTP+JSON route ${method.slice(0, 10)} /${path.slice(0, 200)}`) };
  }
}

/** SendMessageRequest: the common shape by the fast check, anything else by the schema (which words the errors). */
function parseSendMessageRequest(body: unknown): V1SendMessageRequest {
  return fastV1SendMessageRequest(body) ?? parse(V1SendMessageRequestSchema, body);
}
