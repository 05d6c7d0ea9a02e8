import { Ajv, type ValidateFunction } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunEventSchema, runtimeKinds } from '#libs/contracts';
import { A2A_REST_ROUTES, routerPath } from '#libs/a2a';
import type { FastifyInstance } from 'fastify';
import { registeredRestRoutes } from '../apps/api/src/a2a/a2a-rest.routes.js';
import { JSON_RPC_ROUTE } from '../apps/api/src/a2a/a2a-jsonrpc.route.js';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The OpenAPI document served at /docs/openapi.json: examples on every admin route (each valid
 * against the schema it illustrates), the runtime and event schemas generated from the zod
 * contracts, both API key schemes, and the A2A endpoints with links to the specification.
 */

type Json = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
const SPEC_URL = 'https://a2a-protocol.org/latest/specification/';

let stack: Stack;
let doc: Json;

beforeAll(async () => {
  stack = await startStack({ worker: false });
  const res = await fetch(`${stack.baseUrl}/docs/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Json;
});

afterAll(async () => {
  await stack?.close();
});

function operations(filter: (path: string) => boolean = () => true): Array<{ path: string; method: string; op: Json }> {
  return Object.entries(doc.paths as Json)
    .filter(([path]) => filter(path))
    .flatMap(([path, item]) => Object.entries(item as Json).filter(([m]) => METHODS.includes(m)).map(([method, op]) => ({ path, method, op: op as Json })));
}
const adminOperations = () => operations((p) => p.startsWith('/v1/'));

/** `#/a/b` in the document (JSON Pointer, RFC 6901). */
function resolvePointer(ref: string): unknown {
  expect(ref.startsWith('#/'), `${ref} is a local reference`).toBe(true);
  return ref
    .slice(2)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node && typeof node === 'object' ? (node as Json)[key] : undefined), doc);
}
const deref = (s: Json): Json => (typeof s.$ref === 'string' ? deref(resolvePointer(s.$ref) as Json) : s);

function* walk(node: unknown, path: string): Generator<{ node: Json; path: string }> {
  if (!node || typeof node !== 'object') return;
  yield { node: node as Json, path };
  for (const [k, v] of Object.entries(node)) yield* walk(v, `${path}/${k}`);
}

/** Every example of a media type object: `example` and each `examples[*].value`. */
function examplesOf(media: Json | undefined): unknown[] {
  if (!media) return [];
  return [...('example' in media ? [media.example] : []), ...Object.values((media.examples ?? {}) as Json).map((e) => (e as Json).value)];
}

// OpenAPI 3.0 schemas → JSON Schema (draft-07) for Ajv: `nullable` becomes a `null` alternative,
// references point into one schema holding the components.
function toJsonSchema(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(toJsonSchema);
  if (!s || typeof s !== 'object') return s;
  const out: Json = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === '$ref' && typeof v === 'string') out.$ref = v.replace('#/components/', 'openapi#/components/');
    else if (k === 'example' || k === 'discriminator' || k === 'externalDocs') continue;
    else if (k === 'properties' || k === 'patternProperties') out[k] = Object.fromEntries(Object.entries(v as Json).map(([p, ps]) => [p, toJsonSchema(ps)]));
    else out[k] = toJsonSchema(v);
  }
  if (out.nullable === true) {
    delete out.nullable;
    return { anyOf: [out, { type: 'null' }] };
  }
  delete out.nullable;
  return out;
}

let ajv: Ajv;
const validators = new Map<unknown, ValidateFunction>();
function validatorOf(schema: Json): ValidateFunction {
  if (!ajv) {
    ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false, unicodeRegExp: false });
    ajv.addSchema({ $id: 'openapi', components: { schemas: toJsonSchema(doc.components.schemas) } });
  }
  let v = validators.get(schema);
  if (!v) {
    v = ajv.compile(toJsonSchema(schema) as Json);
    validators.set(schema, v);
  }
  return v;
}
function expectValid(schema: Json | undefined, value: unknown, where: string): void {
  expect(schema, `${where}: a schema`).toBeDefined();
  const validate = validatorOf(schema!);
  expect(validate(value), `${where}: ${ajv.errorsText(validate.errors)}`).toBe(true);
}

describe('the OpenAPI document', () => {
  it('describes A2A payloads with schemas generated from the specification (a2a.proto and its JSON Schema); a task and a card as served validate against them', async () => {
    const s = doc.components.schemas as Json;
    // REQUIRED fields and oneof groups of a2a.proto
    expect(s.A2ATask.required).toEqual(['id', 'status']);
    expect(s.A2AMessage.required).toEqual(['messageId', 'role', 'parts']);
    expect(s.A2ASendMessageResponse.oneOf).toEqual([{ required: ['task'] }, { required: ['message'] }]);
    expect((s.A2APart.oneOf as Json[]).map((o) => o.required[0])).toEqual(['text', 'raw', 'url', 'data']);
    expect(s.A2AAgentCard.required).toEqual(expect.arrayContaining(['name', 'supportedInterfaces', 'capabilities', 'skills']));
    // OpenAPI 3.0 schema objects: none of the draft-2020-12 keywords 3.0 lacks
    const text = JSON.stringify(s);
    for (const keyword of ['"$schema"', '"patternProperties"', '"propertyNames"']) expect(text).not.toContain(keyword);

    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `oas-${randomUUID().slice(0, 8)}` });
    const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': stack.adminKey },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello' }] }, configuration: { returnImmediately: true } } }),
    });
    const answer = (await res.json()) as Json;
    expect(answer.result?.task, JSON.stringify(answer)).toBeDefined();
    expectValid(s.A2ASendMessageResponse, answer.result, 'SendMessageResponse as served');
    const card = (await (await fetch(`${stack.baseUrl}${agent.basePath}/.well-known/agent-card.json`)).json()) as Json;
    expectValid(s.A2AAgentCard, card, 'AgentCard as served');

    // the committed schemas are what the specification gives (checked where its files are at hand)
    if (existsSync('../shared/spec/v1.0/a2a.json')) execFileSync(process.execPath, ['scripts/vendor-a2a-schemas.mjs', '--check'], { stdio: 'pipe' });
  });

  it('is OpenAPI 3.x, every $ref resolves, operation ids are unique and path parameters declared', () => {
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(doc.info.title).toBeTruthy();
    const refs = [...walk(doc, '#')].filter(({ node }) => typeof node.$ref === 'string');
    expect(refs.length).toBeGreaterThan(50);
    for (const { node, path } of refs) expect(resolvePointer(node.$ref), `${path}: ${node.$ref}`).toBeDefined();

    const ids = operations().map(({ op }) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of operations()) {
      expect(Object.keys(op.responses ?? {}).length, `${method} ${path} responses`).toBeGreaterThan(0);
      const declared = new Set<string>(((op.parameters ?? []) as Json[]).map(deref).filter((p) => p.in === 'path').map((p) => p.name));
      for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) expect(declared.has(name!), `${method} ${path} declares {${name}}`).toBe(true);
    }
  });

  it('documents every admin route with request and response examples, each valid against its schema', () => {
    const ops = adminOperations();
    expect(ops.length).toBeGreaterThanOrEqual(27);
    for (const { path, method, op } of ops) {
      const where = `${method.toUpperCase()} ${path}`;
      if (op.requestBody) {
        const media = deref(op.requestBody).content?.['application/json'];
        const examples = examplesOf(media);
        expect(examples.length, `${where}: request example`).toBeGreaterThan(0);
        for (const e of examples) expectValid(media.schema, e, `${where} request`);
      }
      let responseExamples = 0;
      for (const [status, response] of Object.entries(op.responses as Json)) {
        const media = deref(response as Json).content?.['application/json'];
        const examples = examplesOf(media);
        // every response with a body illustrates it
        if (media) expect(examples.length, `${where} ${status}: response example`).toBeGreaterThan(0);
        for (const e of examples) expectValid(media.schema, e, `${where} ${status}`);
        responseExamples += examples.length;
      }
      expect(responseExamples, `${where}: response examples`).toBeGreaterThan(0);
    }
  });

  it('describes runtime configs with the real schema of every runtime kind, generated from zod', () => {
    const runtime = doc.components.schemas.RuntimeConfig as Json;
    const members = (runtime.oneOf ?? runtime.anyOf) as Json[];
    expect(Array.isArray(members)).toBe(true);
    const kinds = members.map((m) => deref(m).properties.kind.enum[0]);
    expect(kinds).toEqual(expect.arrayContaining(['scripted', 'http']));
    expect(kinds).toEqual(runtimeKinds());
    expect(runtime.discriminator.propertyName).toBe('kind');
    for (const m of members) expect(Object.keys(deref(m).properties).length, 'a kind has fields beyond kind').toBeGreaterThan(1);
    const scripted = deref(members[kinds.indexOf('scripted')]!);
    expect(deref(scripted.properties.rules.items.properties.steps.items).oneOf.length).toBeGreaterThan(5);
    const http = deref(members[kinds.indexOf('http')]!);
    expect(http.required).toEqual(expect.arrayContaining(['kind', 'url']));
    // the signing key: exactly one of a runtime secret of the org or a worker variable of its namespace
    expect(http.properties).toHaveProperty('secret');
    expect(http.oneOf).toEqual([{ required: ['secret'] }, { required: ['secretEnv'] }]);

    // the revision routes point at it instead of `{ kind }`
    const revisions = doc.paths['/v1/agents/{agent}/revisions'];
    expect(revisions.post.requestBody.content['application/json'].schema.properties.runtime).toEqual({ $ref: '#/components/schemas/RuntimeConfig' });
    expect(revisions.get.responses['200'].content['application/json'].schema.properties.revisions.items.properties.runtime).toEqual({
      $ref: '#/components/schemas/RuntimeConfig',
    });
    // an example whose runtime breaks the schema is refused (the validation above means something)
    const body = revisions.post.requestBody.content['application/json'];
    const bad = { ...(body.examples.http.value as Json), runtime: { kind: 'http', url: 'https://x.example.com' } };
    expect(validatorOf(body.schema)(bad)).toBe(false);
    const both = { ...(body.examples.http.value as Json), runtime: { kind: 'http', url: 'https://x.example.com', secret: 'a', secretEnv: 'B' } };
    expect(validatorOf(body.schema)(both)).toBe(false);
  });

  it('describes run events with the real schema of every event type, not {}', () => {
    const events = doc.paths['/v1/runs/{runId}/events'].get.responses['200'].content['application/json'].schema;
    const envelope = deref(events.properties.events.items);
    expect(envelope.required).toEqual(expect.arrayContaining(['runId', 'threadId', 'sequence', 'occurredAt', 'event']));
    const runEvent = deref(envelope.properties.event);
    const variants = ((runEvent.oneOf ?? runEvent.anyOf) as Json[]).map(deref);
    const types = variants.map((v) => v.properties.type.enum[0]);
    expect(types).toEqual(RunEventSchema.options.map((o) => o.shape.type.value));
    for (const v of variants) {
      const payload = deref(v.properties.payload);
      expect(Object.keys(payload.properties ?? {}).length, `${v.properties.type.enum[0]} payload`).toBeGreaterThan(0);
    }
    const statusChanged = variants.find((v) => v.properties.type.enum[0] === 'run.status_changed')!;
    expect(deref(statusChanged.properties.payload).properties.status.enum).toContain('completed');
    // a run's history is made of Messages
    const run = doc.paths['/v1/runs/{runId}'].get.responses['200'].content['application/json'].schema;
    expect(run.properties.history.items).toEqual({ $ref: '#/components/schemas/Message' });
  });

  it('has the X-API-Key and bearer (API key, not JWT) schemes, and every admin route takes either', () => {
    const schemes = doc.components.securitySchemes as Json;
    expect(schemes['X-API-Key']).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(schemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(schemes.bearer.bearerFormat).not.toBe('JWT');
    expect(schemes.bearer.description).toMatch(/API key/);
    expect(schemes.bearer.description).toMatch(/not a JWT/);
    for (const { path, method, op } of adminOperations()) {
      expect(op.security, `${method} ${path}`).toEqual(expect.arrayContaining([{ 'X-API-Key': [] }, { bearer: [] }]));
      expect(op.security.some((r: Json) => Object.keys(r).length === 0), `${method} ${path}: no anonymous access`).toBe(false);
    }
    // every scheme an operation names exists
    for (const { op } of operations()) for (const req of op.security ?? []) for (const name of Object.keys(req)) expect(schemes[name], name).toBeDefined();
  });

  it('documents the A2A JSON-RPC endpoint: methods, A2A-Version, a SendMessage example with a text part and the Task answer', () => {
    const rpc = doc.paths['/a2a/{org}/{agent}']?.post as Json;
    expect(rpc).toBeDefined();
    expect(rpc.tags).toEqual(['a2a-jsonrpc']);
    expect(rpc.externalDocs.url).toBe(SPEC_URL);
    for (const m of ['SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask', 'message/send', 'message/stream', 'tasks/get', 'tasks/cancel', 'tasks/resubscribe']) {
      expect(rpc.description, m).toContain(m);
    }
    expect((rpc.parameters as Json[]).map(deref).some((p) => p.in === 'header' && p.name === 'A2A-Version')).toBe(true);

    const request = rpc.requestBody.content['application/json'];
    const send = examplesOf(request).find((e) => (e as Json).method === 'SendMessage') as Json;
    expect(send.params.message.parts[0].text).toEqual(expect.any(String));
    expect(send.params.message.role).toBe('ROLE_USER');
    for (const e of examplesOf(request)) expectValid(request.schema, e, 'JSON-RPC request');
    // the params of SendMessage validate against the schema generated from the parser's zod schema
    expectValid(doc.components.schemas.A2ASendMessageRequest, send.params, 'SendMessageRequest');

    const ok = rpc.responses['200'].content;
    expect(ok['text/event-stream']).toBeDefined();
    const answers = examplesOf(ok['application/json']) as Json[];
    const task = answers.find((a) => a.result?.task)!.result.task;
    expect(task.status.state).toMatch(/^TASK_STATE_/);
    expectValid(doc.components.schemas.A2ATask, task, 'Task');
  });

  it('documents the A2A HTTP+JSON routes and the agent card routes, linked to the spec, with valid examples', () => {
    const base = '/a2a/{org}/{agent}';
    const expected: Array<[string, string]> = [
      ['post', `${base}/message:send`],
      ['post', `${base}/message:stream`],
      ['get', `${base}/tasks`],
      ['get', `${base}/tasks/{id}`],
      ['post', `${base}/tasks/{id}:cancel`],
      ['get', `${base}/tasks/{id}:subscribe`],
      ['post', `${base}/tasks/{id}:subscribe`],
      ['post', `${base}/tasks/{id}/pushNotificationConfigs`],
      ['get', `${base}/tasks/{id}/pushNotificationConfigs`],
      ['get', `${base}/tasks/{id}/pushNotificationConfigs/{configId}`],
      ['delete', `${base}/tasks/{id}/pushNotificationConfigs/{configId}`],
      ['get', `${base}/extendedAgentCard`],
    ];
    for (const [method, path] of expected) {
      const op = doc.paths[path]?.[method] as Json;
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.tags).toEqual(['a2a-http-json']);
      expect(op.externalDocs.url).toBe(SPEC_URL);
    }
    for (const [method, path] of [
      ['get', `${base}/.well-known/agent-card.json`],
      ['get', '/.well-known/agent-card.json'],
      ['get', '/a2a/{org}/.well-known/jwks.json'],
    ] as const) {
      const op = doc.paths[path]?.[method] as Json;
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.tags).toEqual(['agent-cards']);
    }
    const tags = new Map((doc.tags as Json[]).map((t) => [t.name, t]));
    for (const t of ['a2a-jsonrpc', 'a2a-http-json', 'agent-cards']) expect(tags.get(t)?.externalDocs?.url, t).toBe(SPEC_URL);
    expect(doc.externalDocs.url).toBe(SPEC_URL);

    const send = doc.paths[`${base}/message:send`].post;
    expect(examplesOf(send.requestBody.content['application/json']).some((e) => typeof (e as Json).message?.parts?.[0]?.text === 'string')).toBe(true);
    expect(examplesOf(send.responses['200'].content['application/json']).some((e) => (e as Json).task?.status?.state)).toBe(true);

    // every JSON example of an A2A operation validates against its schema
    for (const { path, method, op } of operations((p) => p.startsWith('/a2a/') || p.startsWith('/.well-known/'))) {
      const bodies = [op.requestBody, ...Object.values(op.responses as Json)].filter(Boolean).map((b) => deref(b as Json).content?.['application/json']);
      for (const media of bodies) for (const e of examplesOf(media)) expectValid(media.schema, e, `${method} ${path}`);
    }
  });

  it('documents exactly the A2A routes the app serves: every registered route in the document, every documented one registered', () => {
    const fastify = stack.api.getHttpAdapter().getInstance() as FastifyInstance;
    const documented = new Set(operations((p) => p.startsWith('/a2a/') || p.startsWith('/.well-known/') || p.startsWith('/extensions/')).map(({ path, method }) => `${method.toUpperCase()} ${path}`));
    // every route of the HTTP+JSON table is registered twice (plain and under /{tenant}), both served, the plain one documented
    const registered = registeredRestRoutes();
    expect(registered).toHaveLength(2 * A2A_REST_ROUTES.length);
    for (const { method, url, route } of registered) {
      expect(fastify.hasRoute({ method, url }), `${method} ${url}`).toBe(true);
      expect(documented.has(`${method} /a2a/{org}/{agent}${route.path}`), `${method} ${url} documented`).toBe(true);
    }
    expect(fastify.hasRoute({ method: 'POST', url: JSON_RPC_ROUTE })).toBe(true);
    expect(documented.has('POST /a2a/{org}/{agent}')).toBe(true);
    // every documented A2A operation is a route of the app
    for (const op of documented) {
      const [method, path] = op.split(' ') as [string, string];
      expect(fastify.hasRoute({ method: method as 'GET', url: routerPath(path) }), `${op} registered`).toBe(true);
    }
    // the query parameters of GET /tasks come from ListTasksRequest's zod schema
    const list = doc.paths['/a2a/{org}/{agent}/tasks'].get as Json;
    const query = (list.parameters as Json[]).filter((p) => p.in === 'query').map((p) => p.name);
    expect(query).toEqual(['contextId', 'status', 'pageSize', 'pageToken', 'historyLength', 'statusTimestampAfter', 'includeArtifacts']);
  });
});
