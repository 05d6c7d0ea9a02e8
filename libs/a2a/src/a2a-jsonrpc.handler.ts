import { Injectable, Logger } from '@nestjs/common';
import type { ResolvedA2AAgent } from '#libs/registry';
import { ATTR, isTracing, setActiveSpanAttributes } from '#libs/telemetry';
import type { ZodType } from 'zod';
import type { Negotiated } from '#libs/extensions';
import { A2AError, invalidParams, toA2AError } from './a2a.errors.js';
import { A2AOperations } from './a2a-operations.service.js';
import { A2AStreams, parseResumeCursor, requireStreaming, type StreamItem } from './a2a-streams.service.js';
import { ANONYMOUS_CALLER, type A2ACaller, type A2AProtocolVersion, type SendOptions } from './a2a.types.js';
import { A2APushService } from './push/a2a-push.service.js';
import {
  fromV03PushConfig,
  fromV1PushConfig,
  toV03PushConfig,
  toV1PushConfig,
  V03DeletePushConfigSchema,
  V03GetPushConfigSchema,
  V03ListPushConfigSchema,
  V03TaskPushConfigSchema,
  V1ListPushConfigsSchema,
  V1PushConfigRefSchema,
  V1PushConfigSchema,
} from './push/push-schemas.js';
import { isPlainObject } from './proto-json.helpers.js';
import { annotateResult, annotateStream, extensionMethod, extensionServices } from './extension-output.js';
import { fastV1SendMessageRequest, V1CancelTaskRequestSchema, V1GetTaskRequestSchema, V1SendMessageRequestSchema, V1SubscribeToTaskRequestSchema } from './v1/v1.schemas.js';
import { fromV1SendMessageRequest, toV1SendMessageResponse, toV1Task } from './v1/v1.mapper.js';
import { fromV1ListTasksRequest, toV1ListTasksResponse, V1ListTasksRequestSchema } from './v1/v1-list-tasks.js';
import { V03MessageSendParamsSchema, V03TaskIdParamsSchema, V03TaskQueryParamsSchema } from './v03/v03.schemas.js';
import { fromV03MessageSendParams, toV03SendResult, toV03Task } from './v03/v03.mapper.js';

/** JSON-RPC 2.0 request id: a string, an integer, or null (absent = notification, answered as null). */
export type JsonRpcId = string | number | null;

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  /** v1.0: `[google.rpc.ErrorInfo]` (§9.5); v0.3: omitted. */
  data?: unknown;
}

export type JsonRpcResponse =
  | { jsonrpc: '2.0'; id: JsonRpcId; result: unknown }
  | { jsonrpc: '2.0'; id: JsonRpcId; error: JsonRpcErrorObject };

/** What the HTTP edge hands over: the parsed body, or the reason it did not parse. */
export interface JsonRpcCall {
  /** Parsed JSON body; `undefined` for an empty body. */
  body: unknown;
  /** Set when the body was not valid JSON (the parser never rejects; see apps/api). */
  malformed?: string;
  /** The body is JSON but refused before any work (too deep, NUL, unpaired surrogate): -32602 naming `path`. */
  invalid?: { reason: string; path: string };
  /** Raw `A2A-Version` value (header, or the `A2A-Version` query parameter); absent = 0.3. */
  version?: string;
  /** Resume inputs of a streaming call: `Last-Event-ID` and the `A2A-Cursor` token. */
  resume?: { lastEventId?: string; token?: string };
  /** Aborted when the caller goes away (ends a stream). */
  signal?: AbortSignal;
  /** Who calls (the edge authenticated it): tasks and push configs are scoped to it. Absent: anonymous. */
  caller?: A2ACaller;
  /** The extensions the request activated (the edge negotiated them). */
  extensions?: Negotiated;
  /**
   * The authenticated extended card (v1.0 shape) for this caller: the edge authenticates the caller
   * (Unauthenticated otherwise) and projects it (UnsupportedOperation / ExtendedAgentCardNotConfigured).
   */
  /** The authenticated extended card in the shape of `version`, signed (throws A2AError). */
  extendedCard?: (version: A2AProtocolVersion) => Promise<Record<string, unknown>>;
}

/**
 * A streaming method's successful start: the HTTP edge sends each item as one SSE event whose
 * data is `{"jsonrpc":"2.0","id":<id>,"result":<item.result>}` and whose `id:` is the sequence.
 */
export interface JsonRpcStream {
  jsonrpc: '2.0';
  id: JsonRpcId;
  version: A2AProtocolVersion;
  stream: AsyncIterable<StreamItem>;
}

export function isJsonRpcStream(r: JsonRpcResponse | JsonRpcStream): r is JsonRpcStream {
  return 'stream' in r;
}

/** Marker a method implementation returns to start a stream instead of a single result. */
class StreamStart {
  constructor(readonly stream: AsyncIterable<StreamItem>) {}
}

/**
 * The version a request speaks (A2A v1.0 §3.6): Major.Minor of the `A2A-Version` value, the patch
 * ignored ("MUST not be considered when clients and servers negotiate"); an absent or empty value
 * is 0.3 (§3.6.2 "Agents MUST interpret empty value as 0.3 version"). Anything else →
 * VersionNotSupported (-32009).
 */
export function negotiateVersion(raw: string | undefined): A2AProtocolVersion {
  const v = (raw ?? '').trim();
  if (v === '') return '0.3';
  const m = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(v);
  const majorMinor = m ? `${Number(m[1])}.${Number(m[2])}` : null;
  if (majorMinor === '1.0' || majorMinor === '0.3') return majorMinor;
  throw new A2AError('VersionNotSupported', `A2A-Version '${v.slice(0, 32)}' is not supported; supported versions: 1.0, 0.3`, {
    metadata: { requested: v.slice(0, 32), supported: '1.0,0.3' },
  });
}

/** The request id to echo, when the body is a request object with a valid id; else null. */
export function requestIdOf(body: unknown): JsonRpcId {
  if (!isPlainObject(body) || !('id' in body)) return null;
  const id = body.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/**
 * A JSON-RPC error response in the shape of `version`: v1.0 carries `data: [ErrorInfo]` (§9.5),
 * v0.3 the plain `{ code, message }` (spec 0.3 §8). Internal errors keep a generic message.
 */
export function jsonRpcErrorResponse(id: JsonRpcId, error: A2AError, version: A2AProtocolVersion): JsonRpcResponse {
  const err: JsonRpcErrorObject = { code: error.code, message: error.message };
  if (version === '1.0') err.data = [error.toErrorInfo()];
  const response: JsonRpcResponse = { jsonrpc: '2.0', id, error: err };
  if (error.unavailable) UNAVAILABLE_RESPONSES.add(response);
  return response;
}

const UNAVAILABLE_RESPONSES = new WeakSet<object>();

/** True for the error response to an `unavailable` A2AError: the edge sends it with 503 and Retry-After. */
export function isUnavailableResponse(response: object): boolean {
  return UNAVAILABLE_RESPONSES.has(response);
}

/** v1.0 methods of a2a.proto that exist but are not offered (yet), with the error §3.3.4 prescribes. */
const V1_NOT_OFFERED: Record<string, () => A2AError> = {};

/** v0.3 methods (spec/v0.3/a2a.json) that exist but are not offered (yet). */
const V03_NOT_OFFERED: Record<string, () => A2AError> = {};

/** The extended-card methods (§3.1.11; v0.3 `agent/getAuthenticatedExtendedCard`): params are optional. */
const EXTENDED_CARD_METHODS: Record<string, A2AProtocolVersion> = { GetExtendedAgentCard: '1.0', 'agent/getAuthenticatedExtendedCard': '0.3' };

type MethodImpl = (agent: ResolvedA2AAgent, params: unknown, call: JsonRpcCall) => Promise<unknown>;

/** What the method implementations call. */
interface MethodDeps {
  ops: A2AOperations;
  streams: A2AStreams;
  push: A2APushService;
}

const signalOf = (call: JsonRpcCall): AbortSignal => call.signal ?? new AbortController().signal;
const callerOf = (call: JsonRpcCall): A2ACaller => call.caller ?? ANONYMOUS_CALLER;

/** A parsed send request with the call's caller and negotiated extensions in its options. */
function withCall<T extends { options: SendOptions }>(m: T, call: JsonRpcCall): T {
  return { ...m, options: { ...m.options, caller: callerOf(call), ...(call.extensions ? { extensions: call.extensions } : {}) } };
}

function parseV1Send(params: unknown, call: JsonRpcCall) {
  return withCall(fromV1SendMessageRequest(fastV1SendMessageRequest(params) ?? parse(V1SendMessageRequestSchema, params)), call);
}

/** v1.0 SendMessage, SendStreamingMessage, SubscribeToTask (§3.1.1, §3.1.2, §3.1.6). */
function v1MessageMethods({ ops, streams }: MethodDeps): Record<string, MethodImpl> {
  return {
    SendStreamingMessage: async (agent, params, call) => {
      requireStreaming(agent);
      const { inbound, options } = parseV1Send(params, call);
      return new StreamStart(await streams.sendStreaming(agent, inbound, options, '1.0', signalOf(call)));
    },
    SubscribeToTask: async (agent, params, call) => {
      requireStreaming(agent);
      const p = parse(V1SubscribeToTaskRequestSchema, params);
      return new StreamStart(await streams.subscribe(agent, p.id, parseResumeCursor(call.resume ?? {}), '1.0', signalOf(call), callerOf(call)));
    },
    SendMessage: async (agent, params, call) => {
      const { inbound, options } = parseV1Send(params, call);
      return toV1SendMessageResponse(await ops.sendMessage(agent, inbound, options));
    },
  };
}

/** v1.0 GetTask, ListTasks, CancelTask (§3.1.3–3.1.5). */
function v1TaskMethods({ ops }: MethodDeps): Record<string, MethodImpl> {
  return {
    ListTasks: async (agent, params, call) => {
      const p = parse(V1ListTasksRequestSchema, params);
      return toV1ListTasksResponse(await ops.listTasks(agent, fromV1ListTasksRequest(p), callerOf(call)));
    },
    GetTask: async (agent, params, call) => {
      const p = parse(V1GetTaskRequestSchema, params);
      return toV1Task(await ops.getTask(agent, p.id, p.historyLength, callerOf(call)));
    },
    CancelTask: async (agent, params, call) => {
      const p = parse(V1CancelTaskRequestSchema, params);
      return toV1Task(await ops.cancelTask(agent, p.id, undefined, callerOf(call)));
    },
  };
}

/** v1.0 push notification configs (§3.1.7–3.1.10). */
function v1PushMethods({ push }: MethodDeps): Record<string, MethodImpl> {
  return {
    CreateTaskPushNotificationConfig: async (agent, params, call) => {
      push.require(agent);
      const p = parse(V1PushConfigSchema, params);
      if (!p.taskId) throw new A2AError('InvalidParams', 'taskId is required', { metadata: { field: 'taskId' } });
      return toV1PushConfig(await push.create(agent, callerOf(call), p.taskId, fromV1PushConfig(p), '1.0'));
    },
    GetTaskPushNotificationConfig: async (agent, params, call) => {
      push.require(agent);
      const p = parse(V1PushConfigRefSchema, params);
      return toV1PushConfig(await push.get(agent, callerOf(call), p.taskId, p.id));
    },
    ListTaskPushNotificationConfigs: async (agent, params, call) => {
      push.require(agent);
      const p = parse(V1ListPushConfigsSchema, params);
      return { configs: (await push.list(agent, callerOf(call), p.taskId)).map(toV1PushConfig), nextPageToken: '' };
    },
    DeleteTaskPushNotificationConfig: async (agent, params, call) => {
      push.require(agent);
      const p = parse(V1PushConfigRefSchema, params);
      await push.delete(agent, callerOf(call), p.taskId, p.id);
      return {};
    },
  };
}

/** v0.3 message/send, message/stream, tasks/resubscribe. */
function v03MessageMethods({ ops, streams }: MethodDeps): Record<string, MethodImpl> {
  return {
    'message/stream': async (agent, params, call) => {
      requireStreaming(agent);
      const { inbound, options } = withCall(fromV03MessageSendParams(parse(V03MessageSendParamsSchema, params)), call);
      return new StreamStart(await streams.sendStreaming(agent, inbound, options, '0.3', signalOf(call)));
    },
    'tasks/resubscribe': async (agent, params, call) => {
      requireStreaming(agent);
      const p = parse(V03TaskIdParamsSchema, params);
      return new StreamStart(await streams.subscribe(agent, p.id, parseResumeCursor(call.resume ?? {}), '0.3', signalOf(call), callerOf(call)));
    },
    'message/send': async (agent, params, call) => {
      const { inbound, options } = withCall(fromV03MessageSendParams(parse(V03MessageSendParamsSchema, params)), call);
      return toV03SendResult(await ops.sendMessage(agent, inbound, options));
    },
  };
}

/** v0.3 tasks/get, tasks/cancel. */
function v03TaskMethods({ ops }: MethodDeps): Record<string, MethodImpl> {
  return {
    'tasks/get': async (agent, params, call) => {
      const p = parse(V03TaskQueryParamsSchema, params);
      return toV03Task(await ops.getTask(agent, p.id, p.historyLength, callerOf(call)));
    },
    'tasks/cancel': async (agent, params, call) => {
      const p = parse(V03TaskIdParamsSchema, params);
      return toV03Task(await ops.cancelTask(agent, p.id, undefined, callerOf(call)));
    },
  };
}

/** v0.3 tasks/pushNotificationConfig/{set,get,list,delete}. */
function v03PushMethods({ push }: MethodDeps): Record<string, MethodImpl> {
  return {
    'tasks/pushNotificationConfig/set': async (agent, params, call) => {
      push.require(agent);
      const p = parse(V03TaskPushConfigSchema, params);
      return toV03PushConfig(await push.create(agent, callerOf(call), p.taskId, fromV03PushConfig(p.pushNotificationConfig), '0.3'));
    },
    'tasks/pushNotificationConfig/get': async (agent, params, call) => {
      push.require(agent);
      const p = parse(V03GetPushConfigSchema, params);
      return toV03PushConfig(await push.get(agent, callerOf(call), p.id, p.pushNotificationConfigId));
    },
    'tasks/pushNotificationConfig/list': async (agent, params, call) => {
      push.require(agent);
      const p = parse(V03ListPushConfigSchema, params);
      return (await push.list(agent, callerOf(call), p.id)).map(toV03PushConfig);
    },
    'tasks/pushNotificationConfig/delete': async (agent, params, call) => {
      push.require(agent);
      const p = parse(V03DeletePushConfigSchema, params);
      await push.delete(agent, callerOf(call), p.id, p.pushNotificationConfigId);
      return null;
    },
  };
}

/**
 * The JSON-RPC 2.0 binding of A2A (v1.0 §9, and v0.3 for header-less callers), framework-free:
 * the HTTP edge resolves the agent, authenticates, and hands the body here; every outcome,
 * success or error, is a JSON-RPC response object (the edge sends it with HTTP 200).
 *
 * Order of checks: body JSON (-32700) → request object (-32600; a batch array is refused, A2A
 * defines single requests only) → A2A-Version (-32009) → method for that version (-32601, or the
 * capability error for a known method not offered) → params (-32602) → the operation.
 */
@Injectable()
export class A2AJsonRpcHandler {
  private readonly log = new Logger('A2AJsonRpc');
  private readonly v1: Record<string, MethodImpl>;
  private readonly v03: Record<string, MethodImpl>;

  constructor(
    private readonly ops: A2AOperations,
    streams: A2AStreams,
    push: A2APushService,
  ) {
    // the method tables, built by one small function per group of operations
    const deps: MethodDeps = { ops, streams, push };
    this.v1 = { ...v1MessageMethods(deps), ...v1TaskMethods(deps), ...v1PushMethods(deps) };
    this.v03 = { ...v03MessageMethods(deps), ...v03TaskMethods(deps), ...v03PushMethods(deps) };
  }

  /**
   * Answer one JSON-RPC call to `agent`. Never throws: an error (including one raised before a
   * stream's first event) is a JSON-RPC error response; a started stream is a JsonRpcStream.
   */
  async handle(agent: ResolvedA2AAgent, call: JsonRpcCall): Promise<JsonRpcResponse | JsonRpcStream> {
    // Errors are shaped for the requested version; an unsupported one gets the v1.0 shape.
    let version: A2AProtocolVersion = errorShapeVersion(call.version);
    let id: JsonRpcId = null;
    try {
      const body = call.body;
      if (call.malformed !== undefined) throw new A2AError('ParseError', `invalid JSON: ${call.malformed.slice(0, 200)}`);
      if (call.invalid !== undefined) {
        const where = call.invalid.path.slice(0, 200);
        throw new A2AError('InvalidParams', `${where ? `${where}: ` : ''}${call.invalid.reason}`, { metadata: { field: where } });
      }
      if (body === undefined) throw new A2AError('ParseError', 'invalid JSON: the request body is empty');
      if (Array.isArray(body)) throw new A2AError('InvalidRequest', 'batch requests are not supported: send one JSON-RPC request object');
      if (!isPlainObject(body)) throw new A2AError('InvalidRequest', 'the request must be a JSON-RPC 2.0 request object');
      id = requestIdOf(body);
      checkEnvelope(body);
      version = negotiateVersion(call.version);

      const outcome = await this.invoke(agent, version, body.method as string, body.params, call);
      return 'stream' in outcome ? { jsonrpc: '2.0', id, version, stream: outcome.stream } : { jsonrpc: '2.0', id, result: outcome.result };
    } catch (e) {
      const err = toA2AError(e);
      if (err.unavailable) this.log.warn(`unavailable: ${err.message} (${describeCause(err.cause)})`);
      else if (err.type === 'InternalError') this.log.error(describe(err.cause ?? err));
      return jsonRpcErrorResponse(id, err, version);
    }
  }

  /**
   * One method of `version` by name with its params (v1.0: the ProtoJSON of a2a.proto's request
   * message; the method names are the proto's RPC names, so the gRPC binding dispatches here
   * too): the extended card, a method of an activated extension, or the method table; then
   * extension annotations on the result or stream. Throws A2AError (MethodNotFound, the
   * capability error of a method not offered, InvalidParams, the operation's errors).
   */
  async invoke(agent: ResolvedA2AAgent, version: A2AProtocolVersion, method: string, params: unknown, call: Omit<JsonRpcCall, 'body'>): Promise<A2AMethodOutcome> {
    if (isTracing()) setActiveSpanAttributes({ [ATTR.A2A_OPERATION]: method.slice(0, 100), [ATTR.ORG_ID]: agent.org.id, [ATTR.AGENT_ID]: agent.agent.id });
    if (EXTENDED_CARD_METHODS[method] === version) {
      if (!call.extendedCard) throw new A2AError('UnsupportedOperation', 'this binding serves no extended agent card');
      return { result: await call.extendedCard(version) };
    }
    const ext = own(version === '1.0' ? this.v1 : this.v03, method) ? undefined : extensionMethod(call.extensions, method);
    if (ext) {
      const caller = call.caller ?? ANONYMOUS_CALLER;
      return { result: await ext({ orgId: agent.org.id, agentId: agent.agent.id, caller, version, params, services: extensionServices(this.ops, agent, caller, version) }) };
    }
    const impl = own(version === '1.0' ? this.v1 : this.v03, method);
    if (!impl) {
      const notOffered = own(version === '1.0' ? V1_NOT_OFFERED : V03_NOT_OFFERED, method);
      if (notOffered) throw notOffered();
      throw new A2AError('MethodNotFound', `method '${method.slice(0, 100)}' does not exist in A2A ${version}`);
    }
    if (!isPlainObject(params)) throw new A2AError('InvalidParams', 'params must be an object');
    const result = await impl(agent, params, { body: undefined, ...call });
    const negotiated = call.extensions;
    if (result instanceof StreamStart) {
      return { stream: negotiated?.plugins.some((p) => p.plugin.annotate) ? annotateStream(result.stream, negotiated, version) : result.stream };
    }
    return { result: annotateResult(result, negotiated, version) };
  }
}

/** What `invoke` produced: a result (ProtoJSON of the method's response) or a started stream. */
export type A2AMethodOutcome = { result: unknown } | { stream: AsyncIterable<StreamItem> };

/** The version whose error shape answers a request: the negotiated one, else v1.0 (-32009 is a v1.0 error). */
export function errorShapeVersion(raw: string | undefined): A2AProtocolVersion {
  try {
    return negotiateVersion(raw);
  } catch {
    return '1.0';
  }
}

/** JSON-RPC 2.0 §4: `jsonrpc` exactly "2.0", `method` a string, `id` a string, integer or null. */
function checkEnvelope(body: Record<string, unknown>): void {
  if (body.jsonrpc !== '2.0') throw new A2AError('InvalidRequest', 'jsonrpc must be exactly "2.0"');
  if ('id' in body && requestIdOf(body) === null && body.id !== null) {
    throw new A2AError('InvalidRequest', 'id must be a string, an integer or null');
  }
  if (typeof body.method !== 'string' || body.method.length === 0) throw new A2AError('InvalidRequest', 'method must be a non-empty string');
  if ('params' in body && body.params !== undefined && typeof body.params !== 'object') {
    throw new A2AError('InvalidRequest', 'params must be an object');
  }
}

/** `table[key]` for own keys only: a method named `constructor` or `__proto__` is just unknown. */
function own<V>(table: Record<string, V>, key: string): V | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

function parse<T>(schema: ZodType<T>, params: unknown): T {
  const r = schema.safeParse(params);
  if (!r.success) throw invalidParams(r.error);
  return r.data;
}

function describe(e: unknown): string {
  return e instanceof Error ? (e.stack ?? e.message) : String(e);
}

/** One line naming what the database did (no stack): "Connection terminated unexpectedly". */
export function describeCause(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
