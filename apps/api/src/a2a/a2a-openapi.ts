import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { OpenAPIObject } from '@nestjs/swagger';
import { z } from 'zod';
import { A2A_REST_ROUTES, restPathParams, V1SendMessageRequestSchema, type A2ARestRoute } from '#libs/a2a';
import { OPENAPI_SCHEMA_PREFIX, type OpenApiSchema } from '#libs/contracts';
import { API_KEY_SCHEME, BEARER_SCHEME } from '../admin/admin-openapi.js';

/**
 * OpenAPI description of the A2A endpoints, which are plain Fastify routes (not in Swagger's scan).
 * The HTTP+JSON paths are generated from the route table the edge registers (`A2A_REST_ROUTES`,
 * libs/a2a: method, path, operation, summary, spec section, request / response schema, streaming),
 * their query parameters and request bodies from the zod schemas that parse them (SendMessage,
 * ListTasks, GetTask, CancelTask, push configs); examples are keyed by operationId. A2A response
 * shapes (Task, Message, ...) are the ProtoJSON of a2a.proto, summarized with a link to the spec.
 * test/openapi.test.ts checks that every registered A2A route is documented and vice versa.
 */

/** The A2A specification (the latest published version). */
export const A2A_SPEC_URL = 'https://a2a-protocol.org/latest/specification/';

/** Scheme name of JWT bearer tokens, for A2A bindings with `security.scheme: jwt`. */
export const BINDING_JWT_SCHEME = 'bindingJwt';

const spec = (section: string) => ({ description: `A2A specification — ${section}`, url: A2A_SPEC_URL });
const ref = (name: string) => ({ $ref: `${OPENAPI_SCHEMA_PREFIX}${name}` });
const json = (schema: unknown, examples?: Record<string, { summary: string; value: unknown }>) => ({
  'application/json': { schema, ...(examples && { examples }) },
});
const sse = (description: string, example: string) => ({ 'text/event-stream': { schema: { type: 'string', description }, example } });

export const A2A_TAGS = { jsonRpc: 'a2a-jsonrpc', httpJson: 'a2a-http-json', cards: 'agent-cards' } as const;

// ------------------------------------------------------------------ parameters

const PATH_PARAMS = [
  { name: 'org', in: 'path', required: true, description: "The organization's slug", schema: { type: 'string' }, example: 'acme' },
  { name: 'agent', in: 'path', required: true, description: "The agent's slug (its binding path is /a2a/{org}/{agent})", schema: { type: 'string' }, example: 'helper' },
];
const TASK_ID = { name: 'id', in: 'path', required: true, description: 'The task id', schema: { type: 'string' }, example: 'd3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a' };
const CONFIG_ID = { name: 'configId', in: 'path', required: true, description: 'The push notification config id', schema: { type: 'string' }, example: 'cfg-1' };
const VERSION_HEADER = {
  name: 'A2A-Version',
  in: 'header',
  required: false,
  description: 'The A2A version of the request (§3.6.2). `1.0`; absent means 0.3 (JSON-RPC only: the HTTP+JSON binding answers VersionNotSupported).',
  schema: { type: 'string', enum: ['1.0', '0.3'] },
  example: '1.0',
};
const EXTENSIONS_HEADER = {
  name: 'A2A-Extensions',
  in: 'header',
  required: false,
  description: 'Comma-separated URIs of the extensions the request activates (v0.3: X-A2A-Extensions); the activated ones are echoed in the response header.',
  schema: { type: 'string' },
};
const RESUME_HEADERS = [
  { name: 'Last-Event-ID', in: 'header', required: false, description: 'Resume a stream after this event id (the run sequence of the last SSE event received).', schema: { type: 'string' } },
  { name: 'A2A-Cursor', in: 'header', required: false, description: 'Resume a stream from an opaque cursor token.', schema: { type: 'string' } },
];

/** A2A endpoints may be open, or want an API key, or a JWT: it is the binding's choice (`security`). */
const A2A_SECURITY = [{}, { [API_KEY_SCHEME]: [] }, { [BEARER_SCHEME]: [] }, { [BINDING_JWT_SCHEME]: [] }];

// ------------------------------------------------------------------ schemas

export const JSON_RPC_METHODS = {
  '1.0': [
    'SendMessage',
    'SendStreamingMessage',
    'GetTask',
    'ListTasks',
    'CancelTask',
    'SubscribeToTask',
    'CreateTaskPushNotificationConfig',
    'GetTaskPushNotificationConfig',
    'ListTaskPushNotificationConfigs',
    'DeleteTaskPushNotificationConfig',
    'GetExtendedAgentCard',
  ],
  '0.3': [
    'message/send',
    'message/stream',
    'tasks/get',
    'tasks/cancel',
    'tasks/resubscribe',
    'tasks/pushNotificationConfig/set',
    'tasks/pushNotificationConfig/get',
    'tasks/pushNotificationConfig/list',
    'tasks/pushNotificationConfig/delete',
    'agent/getAuthenticatedExtendedCard',
  ],
} as const;

const STRUCT = { type: 'object', additionalProperties: true };

function a2aSchemas(): Record<string, OpenApiSchema> {
  // the output side of the parser's preprocessing: the fields as it reads them
  const sendMessage = z.toJSONSchema(V1SendMessageRequestSchema, { target: 'openapi-3.0', io: 'output', unrepresentable: 'any' }) as OpenApiSchema;
  const { $schema: _s, ...sendMessageRequest } = relaxTransformed(sendMessage);
  const generated = specSchemas();
  return {
    ...generated,
    A2ATask: {
      ...generated.A2ATask,
      description: `${generated.A2ATask!.description as string}\n\nHere an A2A task is a run of this control plane (\`id\` = runId, \`contextId\` = threadId).`,
      externalDocs: spec('Task'),
    },
    A2ATaskPushNotificationConfig: {
      ...generated.A2ATaskPushNotificationConfig,
      description: `${generated.A2ATaskPushNotificationConfig!.description as string} Only public http(s) URLs are accepted.`,
      properties: {
        ...(generated.A2ATaskPushNotificationConfig!.properties as Record<string, OpenApiSchema>),
        webhookSecret: { type: 'string', description: 'Not in a2a.proto: returned on create only, the secret that signs deliveries (Standard Webhooks).' },
      },
      externalDocs: spec('TaskPushNotificationConfig'),
    },
    A2AAgentCard: {
      ...generated.A2AAgentCard,
      description: 'AgentCard (a2a.proto), projected from the published revision, the agent and its binding; signed (`signatures`) when its profile declares `signedAgentCard`.',
      externalDocs: spec('Agent Card'),
    },
    A2ASendMessageRequest: {
      ...sendMessageRequest,
      description: 'SendMessageRequest (ProtoJSON; snake_case field names are accepted too). `message.role` must be ROLE_USER.',
      externalDocs: spec('SendMessageRequest'),
    },
    A2ACancelTaskRequest: {
      ...requestFields(A2A_REST_ROUTES.find((r) => r.operation === 'CancelTask')!),
      description: 'CancelTaskRequest (ProtoJSON) without its id, which the path gives; optional (the SDK client sends no body).',
      externalDocs: spec('CancelTask'),
    },
    A2AEmpty: { type: 'object', description: 'google.protobuf.Empty: an empty JSON object.' },
    A2AStruct: { ...STRUCT, description: 'A JSON object (google.protobuf.Struct).' },
    A2AJsonRpcRequest: {
      type: 'object',
      description: `A JSON-RPC 2.0 request. Methods: v1.0 (with \`A2A-Version: 1.0\`) ${JSON_RPC_METHODS['1.0'].join(', ')}; v0.3 (no header) ${JSON_RPC_METHODS['0.3'].join(', ')}.`,
      externalDocs: spec('JSON-RPC protocol binding'),
      properties: {
        jsonrpc: { type: 'string', enum: ['2.0'] },
        id: { oneOf: [{ type: 'string' }, { type: 'integer' }], nullable: true },
        method: { type: 'string', enum: [...JSON_RPC_METHODS['1.0'], ...JSON_RPC_METHODS['0.3']] },
        params: STRUCT,
      },
      required: ['jsonrpc', 'method'],
    },
    A2AJsonRpcResponse: {
      type: 'object',
      description: 'A JSON-RPC 2.0 response: `result` (e.g. a SendMessageResponse for SendMessage, a Task for GetTask) or `error` (A2A error codes; v1.0 puts a google.rpc.ErrorInfo in `error.data`).',
      externalDocs: spec('JSON-RPC protocol binding'),
      properties: {
        jsonrpc: { type: 'string', enum: ['2.0'] },
        id: { oneOf: [{ type: 'string' }, { type: 'integer' }], nullable: true },
        result: {},
        error: { type: 'object', properties: { code: { type: 'integer' }, message: { type: 'string' }, data: {} }, required: ['code', 'message'] },
      },
      required: ['jsonrpc'],
    },
    A2ARestError: {
      type: 'object',
      description: 'HTTP+JSON error: google.rpc.Status JSON with an ErrorInfo (`reason` = the A2A error, `domain` a2a-protocol.org).',
      externalDocs: spec('HTTP+JSON error handling'),
      properties: {
        error: {
          type: 'object',
          properties: {
            code: { type: 'integer' },
            status: { type: 'string' },
            message: { type: 'string' },
            details: { type: 'array', items: { type: 'object', properties: { '@type': { type: 'string' }, reason: { type: 'string' }, domain: { type: 'string' }, metadata: STRUCT } } },
          },
          required: ['code', 'status', 'message'],
        },
      },
      required: ['error'],
    },
  };
}

/**
 * The A2A v1.0 message schemas (`A2ATask`, `A2AMessage`, `A2APart`, `A2AAgentCard`, …, 47 of them),
 * generated from the specification's a2a.proto and its JSON Schema by
 * scripts/vendor-a2a-schemas.mjs into libs/a2a/proto/a2a.schemas.json (shipped beside a2a.proto),
 * read when the document is first built. Throws when the file is missing (an image without
 * libs/a2a/proto).
 */
function specSchemas(): Record<string, OpenApiSchema> {
  const up = new URL('../../../../', import.meta.url);
  for (const candidate of [new URL('libs/a2a/proto/a2a.schemas.json', up), new URL('../libs/a2a/proto/a2a.schemas.json', up)]) {
    const file = fileURLToPath(candidate);
    if (!existsSync(file)) continue;
    const { schemas } = JSON.parse(readFileSync(file, 'utf8')) as { schemas: Record<string, OpenApiSchema> };
    return Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [`A2A${name}`, schema]));
  }
  throw new Error('libs/a2a/proto/a2a.schemas.json is missing: the A2A schemas of the OpenAPI document come from it');
}

/**
 * What the parser accepts, from its output-side JSON Schema: a field whose zod schema ends in a
 * transform (an optional id where `""` means not set) converts to `{}` and reads as required,
 * but is optional on the wire; and unknown fields are ignored (§5.7), not refused.
 */
function relaxTransformed(schema: OpenApiSchema): OpenApiSchema {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!node || typeof node !== 'object') return node;
    const out = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v)])) as Record<string, unknown>;
    if (out.additionalProperties === false) delete out.additionalProperties;
    const props = out.properties as Record<string, object> | undefined;
    if (props && Array.isArray(out.required)) {
      out.required = (out.required as string[]).filter((name) => !props[name] || Object.keys(props[name]!).length > 0);
    }
    return out;
  };
  return walk(schema) as OpenApiSchema;
}

// ------------------------------------------------------------------ examples

const TASK_ID_VALUE = 'd3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a';
const CONTEXT_ID = '6512bd43-d9ca-4a6e-8b1f-2c3d4e5f6a7b';
const USER_MESSAGE = { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'What is the weather?' }] };
const SEND_MESSAGE = { message: USER_MESSAGE, configuration: { historyLength: 10 } };
const TASK = {
  id: TASK_ID_VALUE,
  contextId: CONTEXT_ID,
  status: {
    state: 'TASK_STATE_COMPLETED',
    timestamp: '2026-05-04T09:15:01.250Z',
  },
  artifacts: [{ artifactId: 'forecast-1', name: 'forecast', parts: [{ text: 'Sunny in Paris' }] }],
  history: [
    { ...USER_MESSAGE, contextId: CONTEXT_ID, taskId: TASK_ID_VALUE },
    { messageId: 'm-2', role: 'ROLE_AGENT', parts: [{ text: 'Which city?' }], contextId: CONTEXT_ID, taskId: TASK_ID_VALUE },
    { messageId: 'm-3', role: 'ROLE_USER', parts: [{ text: 'Paris' }], contextId: CONTEXT_ID, taskId: TASK_ID_VALUE },
  ],
};
const INPUT_REQUIRED_TASK = {
  id: TASK_ID_VALUE,
  contextId: CONTEXT_ID,
  status: {
    state: 'TASK_STATE_INPUT_REQUIRED',
    message: { messageId: 'm-2', role: 'ROLE_AGENT', parts: [{ text: 'Which city?' }], contextId: CONTEXT_ID, taskId: TASK_ID_VALUE },
    timestamp: '2026-05-04T09:15:00.400Z',
  },
  history: [{ ...USER_MESSAGE, contextId: CONTEXT_ID, taskId: TASK_ID_VALUE }],
};
const STREAM_EXAMPLE = [
  `id: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","status":{"state":"TASK_STATE_SUBMITTED"}}}}`,
  `id: 3\ndata: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","status":{"state":"TASK_STATE_WORKING"}}}}`,
  `id: 6\ndata: {"jsonrpc":"2.0","id":1,"result":{"artifactUpdate":{"taskId":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","artifact":{"artifactId":"forecast-1","parts":[{"text":"Sunny in Paris"}]},"lastChunk":true}}}`,
  `id: 8\ndata: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","status":{"state":"TASK_STATE_COMPLETED"}}}}`,
].join('\n\n');
const REST_STREAM_EXAMPLE = [
  `id: 1\ndata: {"task":{"id":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","status":{"state":"TASK_STATE_SUBMITTED"}}}`,
  `id: 8\ndata: {"statusUpdate":{"taskId":"${TASK_ID_VALUE}","contextId":"${CONTEXT_ID}","status":{"state":"TASK_STATE_COMPLETED"}}}`,
].join('\n\n');
const CARD = {
  name: 'Helper',
  description: 'Helps with the weather',
  supportedInterfaces: [
    { url: 'https://agents.example.com/a2a/acme/helper', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    { url: 'https://agents.example.com/a2a/acme/helper', protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    { url: 'https://agents.example.com/a2a/acme/helper', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
  ],
  version: '1.0.0',
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
  securitySchemes: { apiKey: { apiKeySecurityScheme: { location: 'header', name: 'X-API-Key' } } },
  securityRequirements: [{ schemes: { apiKey: {} } }],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'Repeats what it is told', tags: ['demo'] }],
};
const PUSH_CONFIG = { id: 'cfg-1', taskId: TASK_ID_VALUE, url: 'https://client.example.com/a2a/push', token: 'opaque-client-token' };
const rpc = (id: number, method: string, params: unknown) => ({ jsonrpc: '2.0', id, method, params });
const restError = (code: number, status: string, reason: string, message: string) => ({
  error: { code, status, message, details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'a2a-protocol.org' }] },
});

const REST_ERRORS = {
  '400': { description: 'InvalidParams, or (A2A v1.0 §5.4, FAILED_PRECONDITION) VersionNotSupported (no `A2A-Version: 1.0`), UnsupportedOperation, PushNotificationNotSupported, TaskNotCancelable', content: json(ref('A2ARestError'), { version: { summary: 'No A2A-Version header', value: restError(400, 'FAILED_PRECONDITION', 'VERSION_NOT_SUPPORTED', 'A2A version 0.3 is not supported by the HTTP+JSON binding') } }) },
  '401': { description: 'Unauthenticated (with WWW-Authenticate)', content: json(ref('A2ARestError'), { missing: { summary: 'No credentials', value: restError(401, 'UNAUTHENTICATED', 'UNAUTHENTICATED', 'credentials are required') } }) },
  '403': { description: 'Unauthorized', content: json(ref('A2ARestError')) },
  '404': { description: 'Unknown agent, binding without HTTP+JSON, TaskNotFound', content: json(ref('A2ARestError'), { task: { summary: 'Unknown task', value: restError(404, 'NOT_FOUND', 'TASK_NOT_FOUND', `task ${TASK_ID_VALUE} not found`) } }) },
};
const REST_BODY_ERRORS = { ...REST_ERRORS, '415': { description: 'The body is not JSON (application/json or application/a2a+json)', content: json(ref('A2ARestError')) } };

// ------------------------------------------------------------------ paths

const BASE = '/a2a/{org}/{agent}';

/** A path parameter of the HTTP+JSON routes, by name (besides the binding path's org and agent). */
const ROUTE_PARAMS: Record<string, object> = {
  id: TASK_ID,
  configId: CONFIG_ID,
  method: { name: 'method', in: 'path', required: true, description: 'The method of an activated extension', schema: { type: 'string' }, example: 'SearchTasks' },
};

/** Query parameters beside a request message's fields (`extraQuery` of a route). */
const EXTRA_QUERY: Record<string, object> = {
  cursor: { name: 'cursor', in: 'query', required: false, description: 'Same as the A2A-Cursor header', schema: { type: 'string' } },
};

/**
 * The examples of the HTTP+JSON operations, by operationId: request body and 200 answer (JSON), or
 * the SSE text of a stream. Each JSON example is validated against its schema (test/openapi.test.ts).
 */
const REST_EXAMPLES: Record<string, { request?: Record<string, { summary: string; value: unknown }>; response?: Record<string, { summary: string; value: unknown }>; description: string }> = {
  A2ARestSendMessage: {
    description: 'SendMessageResponse: the Task, or a direct reply Message',
    request: { text: { summary: 'A message with a text part', value: SEND_MESSAGE } },
    response: { task: { summary: 'The Task', value: { task: TASK } }, inputRequired: { summary: 'A Task waiting for input', value: { task: INPUT_REQUIRED_TASK } } },
  },
  A2ARestSendStreamingMessage: { description: "SSE: each event's data is a StreamResponse; `id` is the run sequence", request: { text: { summary: 'A message with a text part', value: SEND_MESSAGE } } },
  A2ARestListTasks: { description: 'ListTasksResponse', response: { page: { summary: 'One page', value: { tasks: [TASK], nextPageToken: '', pageSize: 20, totalSize: 1 } } } },
  A2ARestGetTask: { description: 'The Task', response: { task: { summary: 'A completed task', value: TASK } } },
  A2ARestCancelTask: {
    description: 'The canceled Task',
    request: { empty: { summary: 'No body fields', value: {} } },
    response: { canceled: { summary: 'Canceled', value: { id: TASK_ID_VALUE, contextId: CONTEXT_ID, status: { state: 'TASK_STATE_CANCELED', timestamp: '2026-05-04T09:15:02.000Z' } } } },
  },
  A2ARestSubscribeToTask: { description: "SSE of StreamResponse, from the task's current state (or after Last-Event-ID)" },
  A2ARestSubscribeToTaskByPost: { description: "SSE of StreamResponse, from the task's current state (or after Last-Event-ID)" },
  A2ARestCreatePushConfig: {
    description: 'The config (with its webhookSecret)',
    request: { webhook: { summary: 'A webhook with a bearer credential', value: { url: 'https://client.example.com/a2a/push', token: 'opaque-client-token', authentication: { scheme: 'Bearer', credentials: 's3cr3t' } } } },
    response: { created: { summary: 'Created', value: { ...PUSH_CONFIG, webhookSecret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } } },
  },
  A2ARestListPushConfigs: { description: 'The configs', response: { list: { summary: 'One config', value: { configs: [PUSH_CONFIG], nextPageToken: '' } } } },
  A2ARestGetPushConfig: { description: 'The config', response: { config: { summary: 'A config', value: PUSH_CONFIG } } },
  A2ARestDeletePushConfig: { description: 'Deleted (empty object)', response: { deleted: { summary: 'Deleted', value: {} } } },
  A2ARestGetExtendedAgentCard: { description: 'The extended AgentCard', response: { card: { summary: 'An extended card', value: { ...CARD, description: 'Helps with the weather (all skills)' } } } },
  A2ARestExtensionMethod: {
    description: "The method's result",
    request: { search: { summary: 'SearchTasks params', value: { query: 'weather' } } },
    response: { result: { summary: 'A result', value: { tasks: [], nextPageToken: '' } } },
  },
};

/**
 * The fields of a request message's zod schema as the parser reads them (the input side of the
 * object inside its `z.preprocess`): query parameters of a GET, the body of a POST.
 */
function requestFields(route: A2ARestRoute): OpenApiSchema & { properties?: Record<string, OpenApiSchema>; required?: string[] } {
  const schema = route.request as unknown as { out?: unknown } | undefined;
  if (!schema) return { type: 'object' };
  const inner = (schema.out ?? schema) as Parameters<typeof z.toJSONSchema>[0];
  const { $schema: _s, ...json } = z.toJSONSchema(inner, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) as OpenApiSchema & { properties?: Record<string, OpenApiSchema> };
  // the tenant and the path's fields are in the URL
  const skip = new Set(['tenant', ...(route.pathFields ?? [])]);
  const properties = Object.fromEntries(Object.entries(json.properties ?? {}).filter(([name]) => !skip.has(name)));
  const required = ((json as { required?: string[] }).required ?? []).filter((name) => !skip.has(name));
  const { required: _r, ...rest } = json as OpenApiSchema & { required?: string[] };
  return { ...rest, properties, ...(required.length > 0 ? { required } : {}) };
}

/** The OpenAPI operation of one HTTP+JSON route of the table. */
function restOperationOf(route: A2ARestRoute): Record<string, unknown> {
  const ex = REST_EXAMPLES[route.operationId];
  const query =
    route.method === 'GET' && route.request
      ? Object.entries(requestFields(route).properties ?? {}).map(([name, schema]) => ({ name, in: 'query', required: false, schema }))
      : [];
  const parameters = [
    ...PATH_PARAMS,
    VERSION_HEADER,
    EXTENSIONS_HEADER,
    ...restPathParams(route.path).map((name) => ROUTE_PARAMS[name]),
    ...(route.streaming && route.operation === 'SubscribeToTask' ? RESUME_HEADERS : []),
    ...query,
    ...(route.extraQuery ?? []).map((name) => EXTRA_QUERY[name]),
  ];
  const body = route.requestBody && route.body !== 'ignored'
    ? {
        required: route.body === 'required',
        content: {
          ...json(ref(route.requestBody), ex?.request),
          ...(route.requestBody === 'A2ASendMessageRequest' ? { 'application/a2a+json': { schema: ref(route.requestBody) } } : {}),
        },
      }
    : undefined;
  const ok = route.streaming
    ? { description: ex?.description ?? 'SSE of StreamResponse', content: sse('SSE events of StreamResponse JSON', REST_STREAM_EXAMPLE) }
    : { description: ex?.description ?? route.summary, content: json(ref(route.response), ex?.response) };
  return {
    tags: [A2A_TAGS.httpJson],
    operationId: route.operationId,
    summary: route.summary,
    externalDocs: spec(route.section),
    parameters,
    ...(body ? { requestBody: body } : {}),
    responses: { '200': ok, ...(route.body ? REST_BODY_ERRORS : REST_ERRORS) },
    security: A2A_SECURITY,
  };
}

/** The HTTP+JSON paths, generated from the route table (`A2A_REST_ROUTES`, libs/a2a). */
function restPaths(): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of A2A_REST_ROUTES) (paths[`${BASE}${route.path}`] ??= {})[route.method.toLowerCase()] = restOperationOf(route);
  return paths;
}

function a2aPaths(): Record<string, Record<string, unknown>> {
  const jsonRpcExamples = {
    sendMessage: { summary: 'SendMessage (v1.0) with a text part', value: rpc(1, 'SendMessage', SEND_MESSAGE) },
    streaming: { summary: 'SendStreamingMessage (v1.0): answered as SSE', value: rpc(1, 'SendStreamingMessage', SEND_MESSAGE) },
    continue: {
      summary: 'Answer an input-required task (v1.0)',
      value: rpc(2, 'SendMessage', { message: { messageId: 'm-3', role: 'ROLE_USER', taskId: TASK_ID_VALUE, contextId: CONTEXT_ID, parts: [{ text: 'Paris' }] } }),
    },
    getTask: { summary: 'GetTask (v1.0)', value: rpc(3, 'GetTask', { id: TASK_ID_VALUE, historyLength: 10 }) },
    listTasks: { summary: 'ListTasks (v1.0)', value: rpc(4, 'ListTasks', { contextId: CONTEXT_ID, pageSize: 20 }) },
    cancelTask: { summary: 'CancelTask (v1.0)', value: rpc(5, 'CancelTask', { id: TASK_ID_VALUE }) },
    v03: {
      summary: 'message/send (v0.3, no A2A-Version header)',
      value: rpc(6, 'message/send', { message: { kind: 'message', messageId: 'm-1', role: 'user', parts: [{ kind: 'text', text: 'What is the weather?' }] } }),
    },
  };
  return {
    [BASE]: {
      post: {
        tags: [A2A_TAGS.jsonRpc],
        operationId: 'A2AJsonRpc',
        summary: 'A2A JSON-RPC endpoint of an agent (v1.0 with A2A-Version: 1.0; v0.3 without)',
        description:
          `JSON-RPC 2.0 over HTTP (A2A v1.0 §9). v1.0 methods: ${JSON_RPC_METHODS['1.0'].join(', ')}. ` +
          `v0.3 methods (requests without \`A2A-Version\`): ${JSON_RPC_METHODS['0.3'].join(', ')}. ` +
          'Streaming methods answer `text/event-stream`: each event\'s `id` is the run sequence (resume with `Last-Event-ID`), its data a JSON-RPC response whose `result` is a StreamResponse. ' +
          'JSON-RPC errors are HTTP 200; an unknown or unpublished agent is 404, missing or bad credentials 401 (with WWW-Authenticate), a key without the scope 403 — each with a JSON-RPC error body.',
        externalDocs: spec('JSON-RPC protocol binding'),
        parameters: [...PATH_PARAMS, VERSION_HEADER, EXTENSIONS_HEADER, ...RESUME_HEADERS],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: ref('A2AJsonRpcRequest'), examples: jsonRpcExamples }, 'application/a2a+json': { schema: ref('A2AJsonRpcRequest') } },
        },
        responses: {
          '200': {
            description: 'A JSON-RPC response (result or error), or an SSE stream for SendStreamingMessage / SubscribeToTask (message/stream, tasks/resubscribe)',
            content: {
              ...json(ref('A2AJsonRpcResponse'), {
                task: { summary: 'SendMessage → the Task', value: { jsonrpc: '2.0', id: 1, result: { task: TASK } } },
                inputRequired: { summary: 'SendMessage → a Task waiting for input', value: { jsonrpc: '2.0', id: 1, result: { task: INPUT_REQUIRED_TASK } } },
                reply: {
                  summary: 'SendMessage → a direct reply (no task)',
                  value: { jsonrpc: '2.0', id: 1, result: { message: { messageId: 'r-1', role: 'ROLE_AGENT', contextId: CONTEXT_ID, parts: [{ text: 'hello!' }] } } },
                },
                getTask: { summary: 'GetTask → the Task', value: { jsonrpc: '2.0', id: 3, result: TASK } },
                error: {
                  summary: 'TaskNotFound',
                  value: {
                    jsonrpc: '2.0',
                    id: 3,
                    error: { code: -32001, message: `task ${TASK_ID_VALUE} not found`, data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org' }] },
                  },
                },
              }),
              ...sse('SSE events whose data are JSON-RPC responses with a StreamResponse result', STREAM_EXAMPLE),
            },
          },
          '401': { description: 'Unauthenticated (WWW-Authenticate says how)', content: json(ref('A2AJsonRpcResponse')) },
          '403': { description: 'Unauthorized', content: json(ref('A2AJsonRpcResponse')) },
          '404': { description: 'No such published agent with a JSON-RPC binding', content: json(ref('A2AJsonRpcResponse')) },
        },
        security: A2A_SECURITY,
      },
    },
    ...restPaths(),
    [`${BASE}/.well-known/agent-card.json`]: {
      get: {
        tags: [A2A_TAGS.cards],
        operationId: 'A2AAgentCard',
        summary: "An agent's public Agent Card (v1.0; `A2A-Version: 0.3` gets the v0.3 shape)",
        description: 'Public. Cacheable for 60 s; ETag and Last-Modified (If-None-Match / If-Modified-Since → 304). `Vary: A2A-Version`.',
        externalDocs: spec('Agent discovery: the Agent Card'),
        parameters: [...PATH_PARAMS, { ...VERSION_HEADER, description: 'Ask for `0.3` to get the v0.3 card; absent or `1.0` gets v1.0.' }],
        responses: {
          '200': { description: 'The AgentCard', content: json(ref('A2AAgentCard'), { card: { summary: 'A v1.0 card (unsigned)', value: CARD } }) },
          '304': { description: 'Not modified' },
          '404': { description: 'No such published agent', content: json(ref('ErrorResponse'), { missing: { summary: 'Not published', value: { error: { code: 'agent.not_published', message: 'agent acme/helper is not published' }, requestId: 'req-3f9c2a' } } }) },
        },
        security: [{}],
      },
    },
    '/.well-known/agent-card.json': {
      get: {
        tags: [A2A_TAGS.cards],
        operationId: 'A2ADefaultAgentCard',
        summary: "The deployment's default agent's card, at the host root",
        externalDocs: spec('Agent discovery: the Agent Card'),
        parameters: [VERSION_HEADER],
        responses: {
          '200': { description: 'The AgentCard', content: json(ref('A2AAgentCard'), { card: { summary: 'A v1.0 card', value: CARD } }) },
          '304': { description: 'Not modified' },
          '404': { description: 'No default agent', content: json(ref('ErrorResponse')) },
        },
        security: [{}],
      },
    },
    '/a2a/{org}/.well-known/jwks.json': {
      get: {
        tags: [A2A_TAGS.cards],
        operationId: 'A2AJwks',
        summary: "The organization's public card-signing keys (JWKS, RFC 7517): the `jku` of card signatures",
        externalDocs: spec('Agent Card signing'),
        parameters: [PATH_PARAMS[0]],
        responses: {
          '200': {
            description: 'JWKS',
            content: json(
              { type: 'object', properties: { keys: { type: 'array', items: STRUCT } }, required: ['keys'] },
              { jwks: { summary: 'One Ed25519 key', value: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'acme-2026-05-04-ed25519', alg: 'EdDSA', use: 'sig' }] } } },
            ),
          },
        },
        security: [{}],
      },
    },
    '/extensions/{name}/{version}': {
      get: {
        tags: [A2A_TAGS.cards],
        operationId: 'A2AExtensionSpec',
        summary: 'The specification of an extension this service registers, at its URI path (text/markdown)',
        externalDocs: spec('Extensions'),
        parameters: [
          { name: 'name', in: 'path', required: true, schema: { type: 'string' }, example: 'substates' },
          { name: 'version', in: 'path', required: true, schema: { type: 'string' }, example: 'v1' },
        ],
        responses: { '200': { description: 'The document', content: { 'text/markdown': { schema: { type: 'string' }, example: '# Working sub-states\n…' } } }, '404': { description: 'extension.not_found', content: json(ref('ErrorResponse')) } },
        security: [{}],
      },
    },
  };
}

/**
 * Add the A2A endpoints (paths, tags, schemas, the JWT scheme of `jwt` bindings) to the document
 * SwaggerModule built from the admin controllers.
 */
export function addA2AOpenApi(doc: OpenAPIObject): OpenAPIObject {
  const components = doc.components ?? {};
  return {
    ...doc,
    tags: [
      ...(doc.tags ?? []),
      {
        name: A2A_TAGS.jsonRpc,
        description: 'A2A v1.0 and v0.3 over JSON-RPC 2.0 at the binding path `/a2a/{org}/{agent}`. Security is the binding\'s: none, an API key (a2a:invoke), or a JWT.',
        externalDocs: spec('JSON-RPC protocol binding'),
      },
      {
        name: A2A_TAGS.httpJson,
        description:
          'A2A v1.0 over HTTP+JSON (routes of the `google.api.http` options of a2a.proto) under the binding path; requests need `A2A-Version: 1.0`. ' +
          'Every route also exists under `/a2a/{org}/{agent}/{tenant}/...` where the tenant is the organization\'s slug.',
        externalDocs: spec('HTTP+JSON/REST protocol binding'),
      },
      { name: A2A_TAGS.cards, description: 'Discovery: Agent Cards, the JWKS that verifies their signatures, extension specifications. Public.', externalDocs: spec('Agent discovery') },
    ],
    paths: { ...doc.paths, ...(a2aPaths() as OpenAPIObject['paths']) },
    components: {
      ...components,
      schemas: { ...components.schemas, ...a2aSchemas() } as NonNullable<OpenAPIObject['components']>['schemas'],
      securitySchemes: {
        ...components.securitySchemes,
        [BINDING_JWT_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: "A2A bindings with `security.scheme: jwt` only: an access token of the binding's issuer (checked: signature by its JWKS, iss, aud, exp, required scopes).",
        },
      },
    },
  };
}
