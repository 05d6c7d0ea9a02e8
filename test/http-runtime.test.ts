import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { SUBSTATES_EXTENSION_URI, httpRuntimeJsonSchema } from '#libs/contracts';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The `http` runtime against a test backend over real HTTP: the backend verifies the Standard
 * Webhooks signature and answers with an NDJSON stream of runtime operations, or one JSON result;
 * a backend that never answers times out into a failed run; a cancel aborts the request and calls
 * the cancel URL; a backend at a private address is refused at draft unless allowlisted.
 */
const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
/** A worker variable in the stack's organization's namespace (`AAAS_RUNTIME_SECRET_<ORG ID>_<NAME>`, set once the org exists). */
let SECRET_ENV = '';
let NAMESPACE = '';

let stack: Stack;
let backend: http.Server;
let base: string;
const seen: Array<{ path: string; verified: boolean; body: any }> = [];
let canceledRequest = false;
const cancelCalls: any[] = [];

function verify(body: string, headers: http.IncomingHttpHeaders): boolean {
  try {
    new Webhook(SECRET).verify(body, { 'webhook-id': String(headers['webhook-id']), 'webhook-timestamp': String(headers['webhook-timestamp']), 'webhook-signature': String(headers['webhook-signature']) });
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const verified = verify(raw, req.headers);
      const body = raw ? JSON.parse(raw) : null;
      seen.push({ path: req.url ?? '', verified, body });
      if (!verified) return void res.writeHead(401).end();
      const text = body?.input?.parts?.[0]?.text ?? '';
      switch (req.url) {
        case '/ndjson': {
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          const ops = [
            { op: 'status', status: 'working', message: { parts: [{ text: `working on: ${text}` }] } },
            { op: 'artifact', artifactId: 'out', name: 'out.txt', parts: [{ text: 'abc' }] },
            { op: 'artifact', artifactId: 'out', parts: [{ text: 'def' }], append: true, lastChunk: true },
            { op: 'status', status: 'completed', message: { parts: [{ text: `history had ${body.history.length} message(s)` }] } },
          ];
          let i = 0;
          const next = () => {
            if (i === ops.length) return void res.end();
            res.write(`${JSON.stringify(ops[i++])}\n`);
            setTimeout(next, 20);
          };
          return next();
        }
        case '/sse':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify({ op: 'message', message: { parts: [{ text: 'from SSE' }] } })}\n\n`);
          return void res.end(`event: op\ndata: ${JSON.stringify({ op: 'status', status: 'completed', message: { parts: [{ text: 'SSE done' }] } })}\n\n`);
        case '/delegate':
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          return void res.end(
            body.trigger.kind === 'link_settled'
              ? `${JSON.stringify({ op: 'status', status: 'completed', message: { parts: [{ text: `child ${body.trigger.link.status}, state ${JSON.stringify(body.trigger.link.state)}` }] } })}\n`
              : `${JSON.stringify({ op: 'delegate', agent: 'http-helper', message: { parts: [{ text: 'help me' }] }, state: { step: 2 } })}\n`,
          );
        case '/json':
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end(JSON.stringify({ operations: [{ op: 'message', message: { parts: [{ text: 'one JSON answer' }] } }] }));
        case '/ask':
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          return void res.end(
            body.trigger.kind === 'interaction_responded'
              ? `${JSON.stringify({ op: 'status', status: 'completed', message: { parts: [{ text: `got ${text}` }] } })}\n`
              : `${JSON.stringify({ op: 'interaction', kind: 'input', message: { parts: [{ text: 'Which size?' }] } })}\n`,
          );
        case '/bad':
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          return void res.end('{"op":"status","status":"done"}\n');
        case '/hold':
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.write(`${JSON.stringify({ op: 'status', status: 'working' })}\n`);
          req.socket.once('close', () => (canceledRequest = true));
          return;
        case '/cancel':
          cancelCalls.push(body);
          return void res.writeHead(204).end();
        case '/silent':
          return; // never answers
        default:
          res.writeHead(404).end();
      }
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  stack = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  const org = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'GET', '/v1/organization');
  NAMESPACE = `AAAS_RUNTIME_SECRET_${org.body.id.replace(/-/g, '').toUpperCase()}_`;
  SECRET_ENV = `${NAMESPACE}HTTP`;
  process.env[SECRET_ENV] = SECRET;
});

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => backend?.close(() => r()));
  delete process.env[SECRET_ENV];
});

const runtime = (path: string, extra: object = {}) => ({ kind: 'http', url: `${base}${path}`, secretEnv: SECRET_ENV, ...extra });

async function agentFor(slug: string, path: string, extra: object = {}) {
  const a = await publishAgent(stack.baseUrl, stack.adminKey, { slug, runtime: runtime(path, extra) });
  const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${a.basePath}/`);
  return { a, client };
}

const send = (text: string, taskId?: string, returnImmediately = false) =>
  SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) }, configuration: { returnImmediately } });
const state = (t: Task) => t.status!.state;
const text = (m: any) => (m?.parts ?? []).map((p: any) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

describe('the http runtime', () => {
  it('streams NDJSON operations into the log: status, artifact chunks, completion; the request is signed', async () => {
    const { client } = await agentFor('http-ndjson', '/ndjson');
    const task = (await client.sendMessage(send('paint a fence'))) as Task;
    expect(state(task)).toBe(3); // TASK_STATE_COMPLETED
    expect(text(task.status!.message)).toBe('history had 1 message(s)');
    expect(task.artifacts.map((a) => [a.artifactId, a.parts.map((p: any) => p.content.value).join('')])).toEqual([['out', 'abcdef']]);
    const req = seen.find((s) => s.path === '/ndjson')!;
    expect(req.verified).toBe(true);
    expect(req.body).toMatchObject({ run: { runId: task.id, threadId: task.contextId }, trigger: { kind: 'created' }, input: { parts: [{ text: 'paint a fence' }] } });
    // the body is what the published JSON Schema of the wire contract says
    const validate = new Ajv2020({ strict: false }).compile(httpRuntimeJsonSchema().request as object);
    // the config schema takes a secret reference, exactly one of its two forms
    const config = new Ajv2020({ strict: false }).compile(httpRuntimeJsonSchema().config as object);
    expect(config({ kind: 'http', url: 'https://x.example.com', secret: 'hook' })).toBe(true);
    expect(config({ kind: 'http', url: 'https://x.example.com', secretEnv: SECRET_ENV })).toBe(true);
    expect(config({ kind: 'http', url: 'https://x.example.com' })).toBe(false);
    expect(config({ kind: 'http', url: 'https://x.example.com', secret: 'hook', secretEnv: SECRET_ENV })).toBe(false);
    expect(validate(req.body), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...req.body, trigger: { kind: 'bogus' } })).toBe(false);
  });

  it('the request carries the A2A extensions the client activated', async () => {
    const a = await publishAgent(stack.baseUrl, stack.adminKey, {
      slug: 'http-ext',
      a2a: { extensions: [{ uri: SUBSTATES_EXTENSION_URI, params: { states: ['thinking'] } }] } as never,
      runtime: runtime('/json'),
    });
    const res = await fetch(`${stack.baseUrl}${a.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'a2a-extensions': SUBSTATES_EXTENSION_URI },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'with extensions' }] } } }),
    });
    expect(res.headers.get('a2a-extensions')).toBe(SUBSTATES_EXTENSION_URI);
    const runId = ((await res.json()) as any).result.task.id;
    const req = seen.find((s) => s.path === '/json' && s.body?.run?.runId === runId)!;
    expect(req.body.extensions).toEqual([SUBSTATES_EXTENSION_URI]);
    // without the header: none
    const plain = (await (await agentFor('http-json-plain', '/json')).client.sendMessage(send('no ext'))) as Task;
    expect(seen.find((s) => s.body?.run?.runId === plain.id)!.body.extensions).toEqual([]);
  });

  it('a single JSON answer works; without a final status the run completes', async () => {
    const { client } = await agentFor('http-json', '/json');
    const task = (await client.sendMessage(send('hi'))) as Task;
    expect(state(task)).toBe(3);
    expect(text(task.history.at(-1))).toBe('one JSON answer');
  });

  it('an SSE answer works, and a delegation comes back to the backend as link_settled with its state', async () => {
    const sse = (await (await agentFor('http-sse', '/sse')).client.sendMessage(send('x'))) as Task;
    expect(state(sse)).toBe(3);
    expect(sse.history.map(text)).toEqual(['x', 'from SSE', 'SSE done']);
    await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'http-helper', runtime: { kind: 'scripted', rules: [] } });
    const parent = (await (await agentFor('http-delegate', '/delegate')).client.sendMessage(send('x'))) as Task;
    expect(state(parent)).toBe(3);
    expect(text(parent.status!.message)).toBe('child completed, state {"step":2}');
  });

  it('an interaction from the backend round-trips: the answer reaches the backend as interaction_responded', async () => {
    const { client } = await agentFor('http-ask', '/ask');
    const asked = (await client.sendMessage(send('order'))) as Task;
    expect(state(asked)).toBe(6); // INPUT_REQUIRED
    const done = (await client.sendMessage(send('large', asked.id))) as Task;
    expect(text(done.status!.message)).toBe('got large');
  });

  it('an invalid operation, a timeout and a missing secret fail the run with a readable reason', async () => {
    const bad = (await (await agentFor('http-bad', '/bad')).client.sendMessage(send('x'))) as Task;
    expect(state(bad)).toBe(4); // FAILED
    expect(text(bad.status!.message)).toMatch(/line 1 is not a runtime operation: status/);
    const slow = (await (await agentFor('http-slow', '/silent', { timeoutMs: 1000, retries: 0 })).client.sendMessage(send('x'))) as Task;
    expect(state(slow)).toBe(4);
    expect(text(slow.status!.message)).toMatch(/timed out after 1000 ms/);
    const nosecret = (await (await agentFor('http-nosecret', '/json', { secretEnv: `${NAMESPACE}NOT_SET` })).client.sendMessage(send('x'))) as Task;
    expect(state(nosecret)).toBe(4);
    expect(text(nosecret.status!.message)).toContain(`the worker variable ${NAMESPACE}NOT_SET is not set on this worker`);
  });

  it('cancel aborts the backend request and calls the cancel URL', async () => {
    const { client } = await agentFor('http-hold', '/hold', { cancelUrl: `${base}/cancel` });
    const task = (await client.sendMessage(send('long job', undefined, true))) as Task;
    await expect.poll(async () => state((await client.getTask({ tenant: '', id: task.id, historyLength: undefined })) as Task), { timeout: 10_000 }).toBe(2); // WORKING
    await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    await expect.poll(() => canceledRequest, { timeout: 10_000 }).toBe(true);
    await expect.poll(() => cancelCalls.length, { timeout: 10_000 }).toBe(1);
    expect(cancelCalls[0]).toEqual({ runId: task.id, canceled: true });
  });

  it('a backend at a private address is refused at draft unless allowlisted', async () => {
    await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'http-private', name: 'P', description: 'p' });
    const draft = (url: string) =>
      adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents/http-private/revisions', {
        protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }] } },
        runtime: { kind: 'http', url, secretEnv: SECRET_ENV },
      });
    const refused = await draft('http://10.1.2.3/agent');
    expect(refused.status).toBe(422);
    expect(JSON.stringify(refused.body)).toMatch(/refused: 10\.1\.2\.3 is a private address/);
    expect((await draft('http://169.254.169.254/latest')).status).toBe(422);
    expect((await draft(`${base}/json`)).status).toBe(201);
  });
});
