import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import type { RunExecuteJob } from '#libs/contracts';
import { RunExecutor } from '#libs/execution';
import { RunExecutionQueue } from '#libs/runs';
import { injectTrace, isTracing, startTracing, stopTracing } from '#libs/telemetry';
import { RunExecutionProcessor } from '../apps/worker/src/run-execution.processor.js';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Traces (OpenTelemetry) end to end: the API and a worker in this process, real Postgres, Redis and
 * HTTP, the official `@a2a-js/sdk` client as the caller, spans collected by an in-memory exporter.
 * One SendMessage must be one trace: the request's server span → the dispatch written with the
 * outbox row → (BullMQ) the worker's `run.execute` → the execution's appends. Tracing off (the
 * default) must leave jobs exactly as they were.
 */
let stack: Stack;
let echo: PublishedAgent;
let client: A2AClient;
let queue: RunExecutionQueue;
const exporter = new InMemorySpanExporter();

function send(text: string): SendMessageRequest {
  return SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text, mediaType: 'text/plain' }] } });
}

async function sendAndComplete(text: string): Promise<Task> {
  const r = await client.sendMessage(send(text));
  expect('messageId' in r, 'expected a Task').toBe(false);
  const task = r as Task;
  expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_COMPLETED');
  return task;
}

/** The run.execute payload BullMQ holds for a run's creation (trigger: its user message, sequence 2; a batch of one). */
async function createdJob(runId: string): Promise<RunExecuteJob> {
  const job = await queue.queue.getJob(RunExecutionQueue.jobId(runId, 2));
  expect(job, `no job for run ${runId}`).toBeDefined();
  return job!.data.dispatches[0]!.job as RunExecuteJob;
}

/** Wait until the exported spans satisfy `ready` (exports are asynchronous), then return them. */
async function spansWhen(ready: (spans: ReadableSpan[]) => boolean, what: string): Promise<ReadableSpan[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const spans = exporter.getFinishedSpans();
    if (ready(spans)) return spans;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; spans: ${spans.map((s) => s.name).join(', ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const executeOf = (runId: string) => (s: ReadableSpan) => s.name === 'run.execute' && s.attributes['aaas.run_id'] === runId;

/** True when following parents from `span` within `spans` reaches `ancestor`. */
function descendsFrom(span: ReadableSpan, ancestor: ReadableSpan, spans: ReadableSpan[]): boolean {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  for (let s: ReadableSpan | undefined = span; s; s = byId.get(parentOf(s) ?? '')) {
    if (s === ancestor) return true;
  }
  return false;
}

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  queue = stack.api.get(RunExecutionQueue);
  echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
  client = await new ClientFactory().createFromUrl(`${stack.baseUrl}${echo.basePath}/`);
});

afterAll(async () => {
  await stack?.close();
  await stopTracing();
});

describe('tracing off (the default)', () => {
  it('adds no trace to jobs and makes no spans', async () => {
    expect(isTracing()).toBe(false);
    const job = { orgId: randomUUID(), runId: randomUUID(), trigger: 'created' as const };
    expect(injectTrace(job)).toBe(job);

    const task = await sendAndComplete('hello untraced');
    const data = await createdJob(task.id);
    expect(data.runId).toBe(task.id);
    expect('trace' in data).toBe(false);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('tracing on (in-memory exporter)', () => {
  beforeAll(async () => {
    expect(await startTracing({ serviceName: 'aaas-test', exporter })).toBe(true);
    exporter.reset();
  });

  it('one trace from the HTTP request through the outbox and BullMQ into the worker and its appends', async () => {
    const task = await sendAndComplete('hello traced');
    const spans = await spansWhen((all) => {
      const exec = all.find(executeOf(task.id));
      return !!exec && all.some((s) => s.name.startsWith('runs.append') && descendsFrom(s, exec, all));
    }, 'the worker span and its appends');

    // the request: a root server span named after the route, with the A2A operation, org and agent
    const server = spans.find((s) => s.kind === SpanKind.SERVER && s.attributes['a2a.operation'] === 'SendMessage');
    expect(server).toBeDefined();
    const traceId = server!.spanContext().traceId;
    expect(parentOf(server!)).toBeUndefined();
    expect(server!.attributes).toMatchObject({
      'aaas.agent_id': echo.agentId,
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'url.path': echo.basePath,
    });
    expect(server!.attributes['aaas.org_id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(server!.attributes['http.route']).toMatch(/^\/a2a\//);
    expect(server!.name).toBe(`POST ${server!.attributes['http.route']}`);
    expect(server!.status.code).not.toBe(SpanStatusCode.ERROR);
    const orgId = server!.attributes['aaas.org_id'];

    // the request's statements and its dispatch are children of the server span
    const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);
    const create = inTrace.find((s) => s.name === 'runs.create_batch');
    expect(create, 'the creation statement').toBeDefined();
    expect(parentOf(create!)).toBe(server!.spanContext().spanId);
    expect(create!.kind).toBe(SpanKind.CLIENT);
    expect(create!.attributes['db.system.name']).toBe('postgresql');
    const dispatch = inTrace.find((s) => s.name === 'run.dispatch' && s.attributes['aaas.run_id'] === task.id);
    expect(dispatch, 'the dispatch span').toBeDefined();
    expect(dispatch!.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(dispatch!)).toBe(server!.spanContext().spanId);
    expect(dispatch!.attributes).toMatchObject({ 'aaas.org_id': orgId, 'aaas.agent_id': echo.agentId, 'aaas.trigger': 'created' });

    // the job carried the dispatch's context through the outbox row and BullMQ (the relay's fast
    // path runs no statement: the worker claims the row, for its whole batch, outside any run's trace)
    expect(inTrace.some((s) => s.name.startsWith('outbox.')), 'no outbox statement in the request trace').toBe(false);
    const data = await createdJob(task.id);
    expect(data.trace?.traceparent).toBe(`00-${traceId}-${dispatch!.spanContext().spanId}-01`);

    // the worker's execution continues the trace as the dispatch's child
    const exec = inTrace.find(executeOf(task.id));
    expect(exec, 'run.execute in the request trace').toBeDefined();
    expect(exec!.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(exec!)).toBe(dispatch!.spanContext().spanId);
    expect(exec!.parentSpanContext?.isRemote).toBe(true);
    expect(exec!.attributes).toMatchObject({
      'aaas.org_id': orgId,
      'aaas.agent_id': echo.agentId,
      'aaas.run_id': task.id,
      'aaas.trigger': 'created',
      'messaging.system': 'bullmq',
      'messaging.message.id': RunExecutionQueue.jobId(task.id, 2),
    });
    expect(exec!.status.code).not.toBe(SpanStatusCode.ERROR);

    // the execution's appends (working, the echo, completed) are its descendants, in the same trace
    const workerAppends = inTrace.filter((s) => s.name.startsWith('runs.append') && descendsFrom(s, exec!, inTrace));
    expect(workerAppends.length).toBeGreaterThanOrEqual(1);
    // and the request's trace is one tree: every span of it reaches the server span
    for (const s of inTrace) expect(descendsFrom(s, server!, inTrace), `${s.name} is not under the request`).toBe(true);
  });

  it('an HTTP+JSON request names its A2A operation on the server span', async () => {
    const rest = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'rest-echo', transports: ['HTTP+JSON'] });
    const res = await fetch(`${stack.baseUrl}${rest.basePath}/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'over REST' }] } }),
    });
    expect(res.status).toBe(200);
    const runId = ((await res.json()) as { task: { id: string } }).task.id;
    const spans = await spansWhen((all) => all.some(executeOf(runId)), 'the worker span');
    const traceId = spans.find(executeOf(runId))!.spanContext().traceId;
    const server = spans.find((s) => s.kind === SpanKind.SERVER && s.spanContext().traceId === traceId);
    expect(server!.attributes).toMatchObject({ 'a2a.operation': 'SendMessage', 'aaas.agent_id': rest.agentId });
    const get = await fetch(`${stack.baseUrl}${rest.basePath}/tasks/${runId}`, { headers: { 'a2a-version': '1.0' } });
    expect(get.status).toBe(200);
    await get.arrayBuffer();
    const getSpan = await spansWhen((all) => all.some((s) => s.kind === SpanKind.SERVER && s.attributes['a2a.operation'] === 'GetTask'), 'the GetTask span');
    expect(getSpan.find((s) => s.attributes['a2a.operation'] === 'GetTask')!.attributes['aaas.org_id']).toBeDefined();
  });

  it("continues a caller's W3C traceparent", async () => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const res = await fetch(`${stack.baseUrl}${echo.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', traceparent: `00-${traceId}-${callerSpanId}-01` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello from a traced caller' }] } },
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { task: { id: string } } };
    const runId = body.result.task.id;
    const spans = await spansWhen((all) => all.some(executeOf(runId)), 'the worker span');
    const server = spans.find((s) => s.kind === SpanKind.SERVER && s.spanContext().traceId === traceId);
    expect(server, 'the server span joins the caller trace').toBeDefined();
    expect(parentOf(server!)).toBe(callerSpanId);
    expect(server!.parentSpanContext?.isRemote).toBe(true);
    expect(spans.find(executeOf(runId))!.spanContext().traceId).toBe(traceId);
  });

  it('a job with an unreadable trace context starts its own trace, and a failed execution marks its span failed', async () => {
    const processor = stack.worker!.get(RunExecutionProcessor);
    const runId = randomUUID();
    const job = { orgId: 'not-a-uuid', runId, trigger: 'created', trace: { traceparent: 'garbage' } } as unknown as RunExecuteJob;
    await expect(processor.process({ data: job, id: `${runId}-2` })).rejects.toThrow(/invalid run\.execute payload/);
    const spans = await spansWhen((all) => all.some(executeOf(runId)), 'the failed execution span');
    const exec = spans.find(executeOf(runId))!;
    expect(exec.parentSpanContext).toBeUndefined();
    expect(exec.status.code).toBe(SpanStatusCode.ERROR);
    expect(exec.events.some((e) => e.name === 'exception')).toBe(true);
  });

  it('an idle API and worker export nothing: background polls that find no work make no spans', async () => {
    // let every in-flight trace of the tests above finish (no execution left running: a slow one on
    // a loaded machine renews its lease, in its trace), then watch a quiet period longer than the
    // relay's and the push loop's 1 s polls (each of them ran statements every second before)
    await expect.poll(() => stack.worker!.get(RunExecutor).running, { timeout: 20_000, interval: 100 }).toBe(0);
    await new Promise((r) => setTimeout(r, 1_500));
    exporter.reset();
    await new Promise((r) => setTimeout(r, 3_000));
    // (a lease renewal is an execution's heartbeat — work, not a poll: under CI load an execution
    // of another test file sharing this process was seen renewing in the window)
    expect(exporter.getFinishedSpans().map((s) => s.name).filter((n) => n !== 'runs.lease_renew')).toEqual([]);
    // and a request still traces its statements under its server span
    await sendAndComplete('after the quiet');
    const spans = await spansWhen((all) => all.some((s) => s.name === 'runs.create_batch'), 'the creation statement');
    const create = spans.find((s) => s.name === 'runs.create_batch')!;
    expect(parentOf(create)).toBeDefined();
  });
});
