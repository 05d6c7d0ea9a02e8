import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { SendMessageRequest } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { DatabaseService } from '#libs/db';
import { RunExecutionQueue } from '#libs/runs';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #44 item 4, admission before effect: every limit a SendMessage / SendStreamingMessage can
 * hit — the per-caller stream cap, the request rate limit, the storage quota, the body size limit —
 * refuses it before the command that creates or changes a run, on every binding (JSON-RPC v1.0,
 * JSON-RPC v0.3, HTTP+JSON, gRPC), for a new task and for more input on an existing one. A refused
 * request leaves nothing behind: no run, no event, no message, no dispatch in run_dispatches, no
 * queued job. The stacks run without a worker, so runs stay `submitted` (a held stream stays open)
 * and dispatches and jobs stay where the API left them.
 *
 * Every request presents one API key: the stream slots and the rate limits count it (`key:<prefix>`)
 * on every binding alike, and its tasks are its own to continue.
 */

type BindingName = 'JSON-RPC 1.0' | 'JSON-RPC 0.3' | 'HTTP+JSON' | 'gRPC';
const BINDINGS: BindingName[] = ['JSON-RPC 1.0', 'JSON-RPC 0.3', 'HTTP+JSON', 'gRPC'];

/** The four requests a limit must refuse before their effect: a new task or more input on one, streaming or not. */
const VARIANTS = [
  { name: 'a SendMessage', streaming: false, continuation: false, effect: 'creates no task' },
  { name: 'a SendStreamingMessage', streaming: true, continuation: false, effect: 'creates no task' },
  { name: 'a SendMessage with more input', streaming: false, continuation: true, effect: 'adds no message to its task' },
  { name: 'a SendStreamingMessage with more input', streaming: true, continuation: true, effect: 'adds no message to its task' },
];

/** One SendMessage of a binding: streaming or not, a new task or more input on `taskId`. */
interface Send {
  streaming: boolean;
  taskId?: string;
  text: string;
}

/** How a refused (or not) request ended: an HTTP status with its body, or a gRPC status code. */
interface Outcome {
  http?: number;
  grpc?: number;
  /** The body (HTTP) or the status details (gRPC): the reason the server gave. */
  text: string;
  /** An SSE stream was opened (the request was accepted as a stream). */
  streamed: boolean;
}

/** A stack with one streaming agent on all four bindings, an API key, and an SDK gRPC client. */
class Harness {
  stack!: Stack;
  agent!: PublishedAgent;
  key!: string;
  orgId!: string;
  grpcClient!: A2AClient;
  private db!: DatabaseService;

  async start(env: Record<string, string>, pushNotifications = false): Promise<void> {
    this.stack = await startStack({ worker: false, env: { GRPC_PORT: '0', ...env } });
    this.agent = await publishAgent(this.stack.baseUrl, this.stack.adminKey, {
      slug: 'admitted',
      transports: ['JSONRPC', 'HTTP+JSON', 'GRPC'],
      a2a: { capabilities: { streaming: true, pushNotifications, extendedAgentCard: false } },
    });
    const created = await adminRequest<{ key: string }>(this.stack.baseUrl, this.stack.adminKey, 'POST', '/v1/api-keys', { name: 'caller', scopes: ['a2a:invoke'] });
    expect(created.status).toBe(201);
    this.key = created.body.key;
    this.db = this.stack.api.get(DatabaseService);
    const [org] = await this.db.query<{ id: string }>('SELECT id FROM organizations WHERE slug = $1', [this.stack.orgSlug]);
    this.orgId = org!.id;
    const card = (await (await fetch(this.agent.cardUrl)).json()) as Parameters<ClientFactory['createFromAgentCard']>[0];
    this.grpcClient = await new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(card);
  }

  async close(): Promise<void> {
    await this.stack?.close();
  }

  get ep(): string {
    return `${this.stack.baseUrl}${this.agent.basePath}`;
  }

  /** A task of the key's, created with a plain SendMessage that returns at once. */
  async existingTask(): Promise<string> {
    const r = await this.send('JSON-RPC 1.0', { streaming: false, text: 'first' });
    expect(r.http).toBe(200);
    const body = JSON.parse(r.text) as { result?: { task?: { id: string } } };
    expect(body.result?.task?.id, r.text).toBeDefined();
    return body.result!.task!.id;
  }

  /**
   * Everything a SendMessage can leave behind in this stack's organization: its runs, events,
   * messages and dispatches, and the (run, trigger) pairs of the jobs in its queue. Stable between
   * requests (no worker claims anything) once every dispatch reached the queue.
   */
  async effects(): Promise<{ runs: number; events: number; messages: number; lastSequences: number; dispatches: string[]; jobs: string[] }> {
    const [row] = await this.db.query<{ runs: number; events: number; messages: number; last_sequences: number }>(
      `SELECT (SELECT count(*)::int FROM runs WHERE org_id = $1) AS runs,
              (SELECT count(*)::int FROM run_events WHERE org_id = $1) AS events,
              (SELECT count(*)::int FROM messages WHERE org_id = $1) AS messages,
              (SELECT coalesce(sum(last_sequence), 0)::int FROM runs WHERE org_id = $1) AS last_sequences`,
      [this.orgId],
    );
    const dispatches = await this.db.query<{ t: string }>('SELECT run_id || \'-\' || trigger_sequence AS t FROM run_dispatches WHERE org_id = $1 ORDER BY 1', [this.orgId]);
    const queue = this.stack.api.get(RunExecutionQueue).queue;
    const jobs = (await queue.getJobs(['waiting', 'delayed', 'prioritized', 'active']))
      .flatMap((j) => ((j?.data as { dispatches?: Array<{ triggerSequence: number; job: { runId: string } }> })?.dispatches ?? []).map((d) => `${d.job.runId}-${d.triggerSequence}`))
      .sort();
    return { runs: row!.runs, events: row!.events, messages: row!.messages, lastSequences: row!.last_sequences, dispatches: dispatches.map((d) => d.t), jobs };
  }

  /** `effects()` once every committed dispatch is in the queue (the relay's fast path is asynchronous). */
  async settledEffects(): Promise<Awaited<ReturnType<Harness['effects']>>> {
    await expect.poll(async () => {
      const e = await this.effects();
      return e.jobs.length >= e.dispatches.length && e.dispatches.every((d) => e.jobs.includes(d));
    }, { timeout: 5_000, interval: 50 }).toBe(true);
    return this.effects();
  }

  /** One SendMessage / SendStreamingMessage over `binding`, presenting the key. */
  async send(binding: BindingName, s: Send, headers: Record<string, string> = {}): Promise<Outcome> {
    const messageId = randomUUID();
    const v1 = { messageId, role: 'ROLE_USER', parts: [{ text: s.text }], ...(s.taskId && { taskId: s.taskId }) };
    const h = { 'content-type': 'application/json', 'x-api-key': this.key, ...headers };
    switch (binding) {
      case 'JSON-RPC 1.0':
        return http(this.ep, { ...h, 'a2a-version': '1.0' }, {
          jsonrpc: '2.0',
          id: 1,
          method: s.streaming ? 'SendStreamingMessage' : 'SendMessage',
          params: { message: v1, ...(!s.streaming && { configuration: { returnImmediately: true } }) },
        });
      case 'JSON-RPC 0.3':
        return http(this.ep, h, {
          jsonrpc: '2.0',
          id: 1,
          method: s.streaming ? 'message/stream' : 'message/send',
          params: {
            message: { kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text: s.text }], ...(s.taskId && { taskId: s.taskId }) },
            ...(!s.streaming && { configuration: { blocking: false } }),
          },
        });
      case 'HTTP+JSON':
        return http(`${this.ep}/message:${s.streaming ? 'stream' : 'send'}`, { ...h, 'a2a-version': '1.0' }, { message: v1, ...(!s.streaming && { configuration: { returnImmediately: true } }) });
      case 'gRPC':
        return this.grpcSend(SendMessageRequest.fromJSON({ message: v1, ...(!s.streaming && { configuration: { returnImmediately: true } }) }), s.streaming);
    }
  }

  private async grpcSend(request: SendMessageRequest, streaming: boolean): Promise<Outcome> {
    const options = { serviceParameters: { 'x-api-key': this.key } };
    try {
      if (streaming) {
        const stream = this.grpcClient.sendMessageStream(request, options);
        // the first event means the stream was accepted; stop there (the run would never end here)
        await stream.next();
        await stream.return(undefined);
        return { grpc: grpc.status.OK, text: '', streamed: true };
      }
      await this.grpcClient.sendMessage(request, options);
      return { grpc: grpc.status.OK, text: '', streamed: false };
    } catch (e) {
      const err = e as { status?: number; code?: number; message?: string };
      return { grpc: err.status ?? err.code ?? -1, text: err.message ?? String(e), streamed: false };
    }
  }
}

/** POST `body` as JSON; an SSE answer is cut after its headers (a refused request never gets one). */
async function http(url: string, headers: Record<string, string>, body: unknown): Promise<Outcome> {
  const ac = new AbortController();
  const res = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body), signal: ac.signal });
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    ac.abort();
    return { http: res.status, text: '', streamed: true };
  }
  return { http: res.status, text: await res.text(), streamed: false };
}

/** A JSON-RPC answer's error message (HTTP 200 with an error object), else the body. */
function reason(o: Outcome): string {
  try {
    const body = JSON.parse(o.text) as { error?: { message?: string }; message?: string };
    return body.error?.message ?? body.message ?? o.text;
  } catch {
    return o.text;
  }
}

/**
 * `send` (on `binding`) is refused as `refusal` says — not streamed; HTTP status `http` (JSON-RPC
 * bindings too), gRPC status `grpc`; the refusal's text holding `text` when given — and leaves the
 * database and the queue as they were.
 */
async function refusedLeavingNothing(h: Harness, binding: BindingName, send: () => Promise<Outcome>, refusal: { http: number; grpc: grpc.status; text?: string }): Promise<void> {
  const before = await h.settledEffects();
  const o = await send();
  expect(o.streamed).toBe(false);
  if (binding === 'gRPC') expect(o.grpc, o.text).toBe(refusal.grpc);
  else expect(o.http, o.text).toBe(refusal.http);
  if (refusal.text !== undefined) expect(o.grpc === undefined ? reason(o) : o.text).toContain(refusal.text);
  expect(await h.effects()).toEqual(before);
}

/**
 * A suite's harness: started with `env` before the suite's tests (with push notifications offered
 * when `pushNotifications`), closed after them; `task()` is a task of the key's made at the start.
 */
function suiteHarness(env: Record<string, string>, pushNotifications = false): { h: Harness; task: () => string } {
  const h = new Harness();
  let taskId: string | undefined;
  beforeAll(async () => {
    await h.start(env, pushNotifications);
    taskId = await h.existingTask();
  });
  afterAll(async () => {
    await h.close();
  });
  return {
    h,
    task: () => {
      if (taskId === undefined) throw new Error('the suite did not start');
      return taskId;
    },
  };
}

describe('the stream cap (MAX_STREAMS_PER_CALLER) refuses before the message is accepted', () => {
  const { h, task } = suiteHarness({ MAX_STREAMS_PER_CALLER: '1' });
  let hold: AbortController;

  beforeAll(async () => {
    // the key's one stream: open until the file ends
    hold = new AbortController();
    const held = await fetch(h.ep, {
      method: 'POST',
      signal: hold.signal,
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': h.key },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold' }] } } }),
    });
    expect(held.headers.get('content-type')).toMatch(/text\/event-stream/);
  });
  afterAll(() => {
    hold?.abort();
  });

  for (const binding of BINDINGS) {
    for (const continuation of [false, true]) {
      const what = `${binding}: ${continuation ? 'more input on a task, refused, adds no message to it' : 'a refused stream creates no task'}`;
      it(what, () =>
        refusedLeavingNothing(h, binding, () => h.send(binding, { streaming: true, text: 'more', ...(continuation && { taskId: task() }) }), {
          http: 429,
          grpc: grpc.status.RESOURCE_EXHAUSTED,
          text: 'too many open streams',
        }));
    }
  }
});

describe('the request rate limit refuses before the message is accepted', () => {
  const PER_KEY = 8;
  const { h, task } = suiteHarness({ RATE_LIMIT_PER_KEY: String(PER_KEY) });

  /** Spend the key's budget on `binding` with reads until one is refused. */
  async function spend(binding: 'HTTP' | 'gRPC'): Promise<void> {
    for (let i = 0; i <= PER_KEY + 1; i++) {
      if (binding === 'HTTP') {
        const r = await fetch(h.ep, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': h.key },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: task() } }),
        });
        await r.arrayBuffer();
        if (r.status === 429) return;
      } else {
        const code = await h.grpcClient.getTask({ tenant: '', id: task(), historyLength: undefined }, { serviceParameters: { 'x-api-key': h.key } }).then(
          () => grpc.status.OK,
          (e: { status?: number; code?: number }) => e.status ?? e.code,
        );
        if (code === grpc.status.RESOURCE_EXHAUSTED) return;
      }
    }
    throw new Error(`the ${binding} budget of ${PER_KEY} was not spent`);
  }

  for (const binding of BINDINGS) {
    for (const v of VARIANTS) {
      it(`${binding}: ${v.name} past RATE_LIMIT_PER_KEY ${v.effect}`, async () => {
        // the HTTP bindings share one budget (in Redis); gRPC counts its calls in the process
        await spend(binding === 'gRPC' ? 'gRPC' : 'HTTP');
        await refusedLeavingNothing(h, binding, () => h.send(binding, { streaming: v.streaming, text: 'more', ...(v.continuation && { taskId: task() }) }), {
          http: 429,
          grpc: grpc.status.RESOURCE_EXHAUSTED,
          text: 'rate limit exceeded',
        });
      });
    }
  }
});

describe('the storage quota refuses before the message is accepted', () => {
  const QUOTA = 4_096;
  const { h, task } = suiteHarness({ ORG_STORAGE_QUOTA_BYTES: String(QUOTA) });

  for (const binding of BINDINGS) {
    for (const v of VARIANTS) {
      it(`${binding}: ${v.name} past the organization's storage quota ${v.effect}`, async () => {
        const before = await h.settledEffects();
        const o = await h.send(binding, { streaming: v.streaming, text: 'q'.repeat(QUOTA * 2), ...(v.continuation && { taskId: task() }) });
        expect(o.streamed).toBe(false);
        // an A2A error: JSON-RPC's in a 200, HTTP+JSON's and gRPC's in their status
        if (binding === 'gRPC') expect(o.grpc, o.text).not.toBe(grpc.status.OK);
        else if (o.http === 200) expect(JSON.parse(o.text).error, o.text).toBeDefined();
        else expect(o.http, o.text).toBeGreaterThanOrEqual(400);
        expect(o.grpc === undefined ? reason(o) : o.text).toContain('storage quota');
        expect(await h.effects()).toEqual(before);
      });
    }
  }
});

describe('the body size limit refuses before the message is accepted', () => {
  const BODY_LIMIT = 64 * 1024;
  const { h, task } = suiteHarness({ REQUEST_BODY_LIMIT_BYTES: String(BODY_LIMIT) });

  for (const binding of BINDINGS) {
    for (const v of VARIANTS) {
      it(`${binding}: ${v.name} larger than REQUEST_BODY_LIMIT_BYTES ${v.effect}`, () =>
        refusedLeavingNothing(h, binding, () => h.send(binding, { streaming: v.streaming, text: 'b'.repeat(BODY_LIMIT + 1024), ...(v.continuation && { taskId: task() }) }), {
          http: 413,
          grpc: grpc.status.RESOURCE_EXHAUSTED,
        }));
    }
  }
});

/**
 * A push notification config sent in SendMessage's configuration is admitted (outbound URL policy,
 * PUSH_CONFIG_MAX_BYTES, PUSH_MAX_CONFIGS_PER_TASK / PUSH_MAX_ACTIVE_CONFIGS_PER_ORG; A2APushService.admit)
 * before CreateRunCommand / ContinueRunCommand: a refused one leaves no task and no message.
 */
describe('a refused push config in SendMessage', () => {
  const h = new Harness();

  beforeAll(async () => {
    await h.start({ PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret', PUSH_ALLOWED_CIDRS: '127.0.0.0/8', PUSH_CONFIG_MAX_BYTES: '256' }, true);
  });
  afterAll(async () => {
    await h.close();
  });

  const sendWithPush = (config: Record<string, unknown>, taskId?: string) =>
    http(h.ep, { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': h.key }, {
      jsonrpc: '2.0',
      id: 1,
      method: 'SendMessage',
      params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }], ...(taskId && { taskId }) }, configuration: { returnImmediately: true, taskPushNotificationConfig: config } },
    });

  for (const [what, config, error] of [
    ['a URL the outbound policy refuses', { url: 'http://10.1.2.3/hook' }, 'URL refused'],
    ['a config over PUSH_CONFIG_MAX_BYTES', { url: 'http://127.0.0.1:9/hook', token: 'x'.repeat(400) }, 'PUSH_CONFIG_MAX_BYTES'],
  ] as const) {
    it(`JSON-RPC 1.0: a SendMessage with ${what} creates no task`, async () => {
      const before = await h.settledEffects();
      const o = await sendWithPush(config);
      expect((JSON.parse(o.text) as { error?: { code?: number } }).error?.code, o.text).toBe(-32602);
      expect(reason(o)).toContain(error);
      expect(await h.effects()).toEqual(before);
    });

    it(`JSON-RPC 1.0: more input with ${what} adds no message to its task`, async () => {
      const taskId = await h.existingTask();
      const before = await h.settledEffects();
      const o = await sendWithPush(config, taskId);
      expect((JSON.parse(o.text) as { error?: { code?: number } }).error?.code, o.text).toBe(-32602);
      expect(reason(o)).toContain(error);
      expect(await h.effects()).toEqual(before);
    });
  }
});
