import { Injectable } from '@nestjs/common';
import {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetExtendedAgentCardRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AError } from '../a2a.errors.js';
import { A2AJsonRpcHandler, type JsonRpcCall } from '../a2a-jsonrpc.handler.js';
import type { StreamItem } from '../a2a-streams.service.js';
import { isPlainObject } from '../proto-json.helpers.js';

/** ProtoJSON ↔ the SDK's generated message objects (what its gRPC codecs read and write). */
interface JsonCodec {
  fromJSON(object: any): unknown;
  toJSON(message: any): unknown;
}

const EMPTY: JsonCodec = { fromJSON: () => ({}), toJSON: () => ({}) };

/** One RPC of `lf.a2a.v1.A2AService`: its a2a.proto name (= the v1.0 JSON-RPC method) and message types. */
export interface A2AGrpcMethod {
  rpc: string;
  request: JsonCodec;
  response: JsonCodec;
  streaming: boolean;
}

/**
 * Every RPC of a2a.proto's A2AService, keyed as the SDK's service definition keys them
 * (`@a2a-js/sdk/server/grpc` `A2AService`, whose codecs read and write the binary messages).
 */
export const A2A_GRPC_METHODS = {
  sendMessage: { rpc: 'SendMessage', request: SendMessageRequest, response: SendMessageResponse, streaming: false },
  sendStreamingMessage: { rpc: 'SendStreamingMessage', request: SendMessageRequest, response: StreamResponse, streaming: true },
  getTask: { rpc: 'GetTask', request: GetTaskRequest, response: Task, streaming: false },
  listTasks: { rpc: 'ListTasks', request: ListTasksRequest, response: ListTasksResponse, streaming: false },
  cancelTask: { rpc: 'CancelTask', request: CancelTaskRequest, response: Task, streaming: false },
  subscribeToTask: { rpc: 'SubscribeToTask', request: SubscribeToTaskRequest, response: StreamResponse, streaming: true },
  createTaskPushNotificationConfig: { rpc: 'CreateTaskPushNotificationConfig', request: TaskPushNotificationConfig, response: TaskPushNotificationConfig, streaming: false },
  getTaskPushNotificationConfig: { rpc: 'GetTaskPushNotificationConfig', request: GetTaskPushNotificationConfigRequest, response: TaskPushNotificationConfig, streaming: false },
  listTaskPushNotificationConfigs: { rpc: 'ListTaskPushNotificationConfigs', request: ListTaskPushNotificationConfigsRequest, response: ListTaskPushNotificationConfigsResponse, streaming: false },
  getExtendedAgentCard: { rpc: 'GetExtendedAgentCard', request: GetExtendedAgentCardRequest, response: AgentCard, streaming: false },
  deleteTaskPushNotificationConfig: { rpc: 'DeleteTaskPushNotificationConfig', request: DeleteTaskPushNotificationConfigRequest, response: EMPTY, streaming: false },
} as const satisfies Record<string, A2AGrpcMethod>;

export type A2AGrpcMethodKey = keyof typeof A2A_GRPC_METHODS;

/**
 * Our extension of the gRPC binding (resume): each streamed StreamResponse that reflects a log
 * entry carries that entry's sequence — the SSE `id:` of the other bindings — as a string in its
 * payload's `metadata` under this key. SubscribeToTask with request metadata
 * `last-event-id: <sequence>` resumes after it (exactly the later events, no snapshot).
 */
export const GRPC_EVENT_ID_KEY = 'eventId';

/** What the gRPC edge established about a call before dispatching it. */
export type A2AGrpcCall = Omit<JsonRpcCall, 'body' | 'malformed' | 'invalid' | 'version'>;

/**
 * The `tenant` of a request (a2a.proto) as the agent it addresses: `<org slug>/<agent slug>`
 * (see `grpcTenantOf`, written on the card's GRPC interface). InvalidParams otherwise.
 */
export function parseGrpcTenant(tenant: unknown): { org: string; agent: string } {
  const m = typeof tenant === 'string' ? /^([^/\s]{1,200})\/([^/\s]{1,200})$/.exec(tenant) : null;
  if (!m) {
    throw new A2AError('InvalidParams', "tenant must name the agent as '<organization slug>/<agent slug>' (the tenant of the card's GRPC interface)", {
      metadata: { field: 'tenant' },
    });
  }
  return { org: m[1]!, agent: m[2]! };
}

/**
 * The gRPC binding of A2A v1.0 (§10), framework-free: a decoded request message (the SDK's
 * generated shape) becomes its ProtoJSON, which is dispatched through the same v1.0 method
 * table as JSON-RPC (A2AJsonRpcHandler.invoke: same schemas, operations, extensions, errors);
 * the ProtoJSON result becomes the response message. The edge resolves the tenant, admits the
 * caller and negotiates extensions first. Errors are thrown as A2AError (see `toGrpcError`).
 */
@Injectable()
export class A2AGrpcBinding {
  constructor(private readonly methods: A2AJsonRpcHandler) {}

  /** A unary RPC: the response message. */
  async unary(agent: ResolvedA2AAgent, key: A2AGrpcMethodKey, request: unknown, call: A2AGrpcCall): Promise<unknown> {
    const method = A2A_GRPC_METHODS[key];
    const outcome = await this.methods.invoke(agent, '1.0', method.rpc, paramsOf(method, request), call);
    if (!('result' in outcome)) throw new A2AError('InternalError', `${method.rpc} started a stream`);
    return method.response.fromJSON(outcome.result ?? {});
  }

  /** A server-streaming RPC: its StreamResponse messages (errors before the first are thrown). */
  async stream(agent: ResolvedA2AAgent, key: A2AGrpcMethodKey, request: unknown, call: A2AGrpcCall): Promise<AsyncIterable<unknown>> {
    const method = A2A_GRPC_METHODS[key];
    const outcome = await this.methods.invoke(agent, '1.0', method.rpc, paramsOf(method, request), call);
    if (!('stream' in outcome)) throw new A2AError('InternalError', `${method.rpc} answered without a stream`);
    const items = outcome.stream;
    return (async function* () {
      for await (const item of items) yield StreamResponse.fromJSON(withEventId(item));
    })();
  }
}

/** The ProtoJSON params of a decoded request, without `tenant` (the edge routed by it). */
function paramsOf(method: A2AGrpcMethod, request: unknown): Record<string, unknown> {
  const json = method.request.toJSON(request ?? {});
  const params = isPlainObject(json) ? { ...json } : {};
  delete params.tenant;
  return params;
}

/** The StreamResponse of `item`, its payload's metadata carrying the event id (GRPC_EVENT_ID_KEY). */
function withEventId(item: StreamItem): unknown {
  const result = item.result as Record<string, unknown>;
  if (!isPlainObject(result)) return result;
  const [kind] = Object.keys(result);
  const payload = kind !== undefined ? result[kind] : undefined;
  if (!isPlainObject(payload)) return result;
  const metadata = isPlainObject(payload.metadata) ? payload.metadata : {};
  return { [kind!]: { ...payload, metadata: { ...metadata, [GRPC_EVENT_ID_KEY]: String(item.sequence) } } };
}
