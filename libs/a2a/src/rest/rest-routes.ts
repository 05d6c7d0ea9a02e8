import type { ZodType } from 'zod';
import type { ResolvedA2AAgent } from '#libs/registry';
import type { Negotiated } from '#libs/extensions';
import type { A2ACaller } from '../a2a.types.js';
import type { StreamItem } from '../a2a-streams.service.js';
import { V1ListTasksRequestSchema } from '../v1/v1-list-tasks.js';
import { V1CancelTaskRequestSchema, V1GetTaskRequestSchema, V1SendMessageRequestSchema } from '../v1/v1.schemas.js';
import { V1ListPushConfigsSchema, V1PushConfigSchema } from '../push/push-schemas.js';
import type { A2ARestHandler, RestQuery, RestResume } from './a2a-rest.handler.js';

/** What the HTTP edge hands a route's operation, read from the request it admitted. */
export interface RestRouteInput {
  /** Path parameters besides the binding path's: `id`, `configId`, `method` ('' when absent). */
  params: { id: string; configId: string; method: string };
  /** The parsed query string (Fastify's: one string per name, an array when repeated). */
  query: RestQuery;
  /** The parsed body; undefined when the request carries none. */
  body: unknown;
  /** Resume inputs of `:subscribe`: `Last-Event-ID`, the `A2A-Cursor` header or `?cursor=`. */
  resume: RestResume;
  /** Aborted when the client goes away (streams only). */
  signal: AbortSignal;
  caller: A2ACaller;
  extensions?: Negotiated;
  /** The authenticated extended card (v1.0), signed: the edge authenticates the caller for it. */
  extendedCard: () => Promise<Record<string, unknown>>;
}

/** The component schema (OpenAPI `#/components/schemas/<name>`) a route's body is. */
export type RestSchemaName =
  | 'A2ASendMessageRequest'
  | 'A2ASendMessageResponse'
  | 'A2ATask'
  | 'A2AListTasksResponse'
  | 'A2ACancelTaskRequest'
  | 'A2ATaskPushNotificationConfig'
  | 'A2AListTaskPushNotificationConfigsResponse'
  | 'A2AAgentCard'
  | 'A2AEmpty'
  | 'A2AStruct'
  | 'A2AStreamResponse';

/**
 * One A2A HTTP+JSON operation (A2A v1.0 §11; the `google.api.http` options of a2a.proto): the
 * single description both the HTTP edge (which registers it, plain and under `/{tenant}`) and the
 * OpenAPI document (which describes it) read.
 */
export interface A2ARestRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** Path under the binding path `/a2a/{org}/{agent}`, in OpenAPI template form (`/tasks/{id}:cancel`). */
  path: string;
  /** The A2A v1.0 operation (a2a.proto RPC name; the trace attribute `a2a.operation`). */
  operation: string;
  /** OpenAPI operationId. */
  operationId: string;
  summary: string;
  /** Section of the A2A specification the operation is described in (a link in the document). */
  section: string;
  /**
   * The request body: `required` / `optional` (validated as JSON before parsing; its schema is
   * `request`), `ignored` (accepted as JSON, not read), or absent (a GET / DELETE).
   */
  body?: 'required' | 'optional' | 'ignored';
  /** The zod schema the operation parses its request message with (query + path + body). */
  request?: ZodType;
  /** Component schema of the request body, when it has one. */
  requestBody?: RestSchemaName;
  /** Component schema of the 200 answer (the data of each SSE event when `streaming`). */
  response: RestSchemaName;
  /** Answered as `text/event-stream` (one StreamResponse per event). */
  streaming: boolean;
  /** Query parameters beside the request message's fields (as `cursor` of `:subscribe`). */
  extraQuery?: readonly string[];
  /** Path fields of `request` (not query parameters). */
  pathFields?: readonly string[];
  /** Run the operation: a result (unary) or a started stream (`streaming`). Throws A2AError. */
  call(handler: A2ARestHandler, agent: ResolvedA2AAgent, input: RestRouteInput): Promise<unknown>;
}

const stream = (r: Promise<AsyncIterable<StreamItem>>) => r;

/**
 * THE table of the A2A HTTP+JSON binding. Order is the document's order. Every route is also
 * served under `/{tenant}/` (the organization's slug).
 */
export const A2A_REST_ROUTES: readonly A2ARestRoute[] = [
  {
    method: 'POST',
    path: '/message:send',
    operation: 'SendMessage',
    operationId: 'A2ARestSendMessage',
    summary: 'SendMessage (HTTP+JSON)',
    section: 'SendMessage',
    body: 'required',
    request: V1SendMessageRequestSchema,
    requestBody: 'A2ASendMessageRequest',
    response: 'A2ASendMessageResponse',
    streaming: false,
    call: (h, agent, i) => h.sendMessage(agent, i.body, i.caller, i.extensions),
  },
  {
    method: 'POST',
    path: '/message:stream',
    operation: 'SendStreamingMessage',
    operationId: 'A2ARestSendStreamingMessage',
    summary: 'SendStreamingMessage (HTTP+JSON): an SSE stream of StreamResponse',
    section: 'SendStreamingMessage',
    body: 'required',
    request: V1SendMessageRequestSchema,
    requestBody: 'A2ASendMessageRequest',
    response: 'A2AStreamResponse',
    streaming: true,
    call: (h, agent, i) => stream(h.sendStreamingMessage(agent, i.body, i.signal, i.caller, i.extensions)),
  },
  {
    method: 'GET',
    path: '/tasks',
    operation: 'ListTasks',
    operationId: 'A2ARestListTasks',
    summary: "ListTasks: the caller's tasks of this agent, newest first",
    section: 'ListTasks',
    request: V1ListTasksRequestSchema,
    response: 'A2AListTasksResponse',
    streaming: false,
    call: (h, agent, i) => h.listTasks(agent, i.query, i.caller),
  },
  {
    method: 'GET',
    path: '/tasks/{id}',
    operation: 'GetTask',
    operationId: 'A2ARestGetTask',
    summary: 'GetTask',
    section: 'GetTask',
    request: V1GetTaskRequestSchema,
    pathFields: ['id'],
    response: 'A2ATask',
    streaming: false,
    call: (h, agent, i) => h.getTask(agent, i.params.id, i.query, i.caller),
  },
  {
    method: 'POST',
    path: '/tasks/{id}:cancel',
    operation: 'CancelTask',
    operationId: 'A2ARestCancelTask',
    summary: 'CancelTask',
    section: 'CancelTask',
    body: 'optional',
    request: V1CancelTaskRequestSchema,
    pathFields: ['id'],
    requestBody: 'A2ACancelTaskRequest',
    response: 'A2ATask',
    streaming: false,
    call: (h, agent, i) => h.cancelTask(agent, i.params.id, i.body, i.caller),
  },
  {
    method: 'GET',
    path: '/tasks/{id}:subscribe',
    operation: 'SubscribeToTask',
    operationId: 'A2ARestSubscribeToTask',
    summary: 'SubscribeToTask: an SSE stream of the task (resumable)',
    section: 'SubscribeToTask',
    response: 'A2AStreamResponse',
    streaming: true,
    extraQuery: ['cursor'],
    call: (h, agent, i) => stream(h.subscribe(agent, i.params.id, i.resume, i.signal, i.caller)),
  },
  {
    // the SDK client subscribes with POST (a2a.proto binds GET); both are served, a body is ignored
    method: 'POST',
    path: '/tasks/{id}:subscribe',
    operation: 'SubscribeToTask',
    operationId: 'A2ARestSubscribeToTaskByPost',
    summary: 'SubscribeToTask by POST (as the @a2a-js/sdk client sends it; a body is ignored)',
    section: 'SubscribeToTask',
    body: 'ignored',
    response: 'A2AStreamResponse',
    streaming: true,
    extraQuery: ['cursor'],
    call: (h, agent, i) => stream(h.subscribe(agent, i.params.id, i.resume, i.signal, i.caller)),
  },
  {
    method: 'POST',
    path: '/tasks/{id}/pushNotificationConfigs',
    operation: 'CreateTaskPushNotificationConfig',
    operationId: 'A2ARestCreatePushConfig',
    summary: 'CreateTaskPushNotificationConfig',
    section: 'Push notifications',
    body: 'required',
    request: V1PushConfigSchema,
    requestBody: 'A2ATaskPushNotificationConfig',
    response: 'A2ATaskPushNotificationConfig',
    streaming: false,
    call: (h, agent, i) => h.createPushConfig(agent, i.params.id, i.body, i.caller),
  },
  {
    method: 'GET',
    path: '/tasks/{id}/pushNotificationConfigs',
    operation: 'ListTaskPushNotificationConfigs',
    operationId: 'A2ARestListPushConfigs',
    summary: 'ListTaskPushNotificationConfigs',
    section: 'Push notifications',
    request: V1ListPushConfigsSchema,
    pathFields: ['taskId'],
    response: 'A2AListTaskPushNotificationConfigsResponse',
    streaming: false,
    call: (h, agent, i) => h.listPushConfigs(agent, i.params.id, i.query, i.caller),
  },
  {
    method: 'GET',
    path: '/tasks/{id}/pushNotificationConfigs/{configId}',
    operation: 'GetTaskPushNotificationConfig',
    operationId: 'A2ARestGetPushConfig',
    summary: 'GetTaskPushNotificationConfig',
    section: 'Push notifications',
    response: 'A2ATaskPushNotificationConfig',
    streaming: false,
    call: (h, agent, i) => h.getPushConfig(agent, i.params.id, i.params.configId, i.caller),
  },
  {
    method: 'DELETE',
    path: '/tasks/{id}/pushNotificationConfigs/{configId}',
    operation: 'DeleteTaskPushNotificationConfig',
    operationId: 'A2ARestDeletePushConfig',
    summary: 'DeleteTaskPushNotificationConfig',
    section: 'Push notifications',
    response: 'A2AEmpty',
    streaming: false,
    call: (h, agent, i) => h.deletePushConfig(agent, i.params.id, i.params.configId, i.caller),
  },
  {
    method: 'GET',
    path: '/extendedAgentCard',
    operation: 'GetExtendedAgentCard',
    operationId: 'A2ARestGetExtendedAgentCard',
    summary: 'GetExtendedAgentCard: the richer card, for an API key of the organization (a2a:invoke or admin)',
    section: 'Extended Agent Card',
    response: 'A2AAgentCard',
    streaming: false,
    call: (_h, _agent, i) => i.extendedCard(),
  },
  {
    // methods of activated extensions (method extensions)
    method: 'POST',
    path: '/extensions/{method}',
    operation: 'ExtensionMethod',
    operationId: 'A2ARestExtensionMethod',
    summary: 'A method of an activated extension (e.g. SearchTasks), over HTTP+JSON',
    section: 'Extensions',
    body: 'required',
    requestBody: 'A2AStruct',
    response: 'A2AStruct',
    streaming: false,
    call: (h, agent, i) => h.extensionMethod(agent, i.params.method, i.body, i.caller, i.extensions),
  },
];

/** The path parameter names of a route's path (`/tasks/{id}:cancel` → `['id']`). */
export function restPathParams(path: string): string[] {
  return [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
}

/**
 * A route's path in find-my-way's syntax (Fastify's router): `{name}` → `:name`, a literal `:`
 * doubled. find-my-way ends a parameter name only at "(", "-", "." or "/": a parameter followed by
 * a `:` gets the regexp `([^/:]+)`, which ends it before the escaped ":".
 */
export function routerPath(path: string): string {
  return path.replace(/\{(\w+)\}(:?)|(:)/g, (_m, name: string | undefined, colon: string, literal: string | undefined) => {
    if (literal) return '::';
    return colon ? `:${name}([^/:]+)::` : `:${name}`;
  });
}
