import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Role, TaskState, type AgentCard, type Message, type Part, type Task } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import express from 'express';
import { Webhook } from 'standardwebhooks';
import type { BackendCall } from './history.js';
import { chunkFlags, partsText, type BackendStep } from './output.js';
import { onCleanup } from './world.js';

/**
 * The suite's own agents' backends, in the suite process (never faulted): the `http` runtime's
 * backend and the `a2a` runtime's upstream agent. Both play a fixed script (output.ts
 * BackendStep, `{{input}}` = the run's input text) and record every request that starts an
 * execution (history.ts BackendCall), which `one-call-per-execution` counts and `output-is-script`
 * compares the runs' logs against.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The `http` runtime's backend (docs/runtimes.md): checks the Standard Webhooks signature (401
 * otherwise, which fails the run), records the request (`webhook-id`, run id, trigger), then
 * answers `application/x-ndjson` with the script's operations as they are due (`wait` steps
 * pause). Every operation is named, so a resumed execution may simply replay (trigger `resumed`:
 * the same answer again; what the log holds is dropped by id): status steps by `id`
 * (`step-<i>`), the message by its messageId (`<runId>:step-<i>`), chunks by the runtime's
 * `<execution>:<artifactId>#<n>`. A client that goes away stops the answer.
 */
export class HttpBackend {
  readonly calls: BackendCall[] = [];
  /** Requests refused for a bad signature. */
  refused = 0;
  port = 0;
  private readonly server = http.createServer((req, res) => void this.handle(req, res));

  constructor(
    private readonly secret: string,
    private readonly script: readonly BackendStep[],
    /** ms since the start of the load (BackendCall.at). */
    private readonly now: () => number,
  ) {}

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
    onCleanup(() => {
      this.server.closeAllConnections();
      this.server.close();
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/run`;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const headers = { 'webhook-id': String(req.headers['webhook-id'] ?? ''), 'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''), 'webhook-signature': String(req.headers['webhook-signature'] ?? '') };
    let body: { run?: { runId?: string }; trigger?: { kind?: string }; input?: { parts?: unknown } };
    try {
      new Webhook(this.secret).verify(raw, headers);
      body = JSON.parse(raw);
    } catch {
      this.refused++;
      res.writeHead(401).end();
      return;
    }
    const runId = body.run?.runId ?? '';
    this.calls.push({ backend: 'http', key: headers['webhook-id'], runId, trigger: body.trigger?.kind, at: this.now() });
    const input = partsText(body.input?.parts);
    const render = (t: string) => t.replaceAll('{{input}}', input);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    for (const [i, s] of this.script.entries()) {
      if (res.destroyed) return;
      if (s.op === 'wait') {
        await sleep(s.ms);
        continue;
      }
      const message = (text: string) => ({ messageId: `${runId}:step-${i}`, parts: [{ text: render(text) }] });
      const op =
        s.op === 'status'
          ? { op: 'status', id: `step-${i}`, status: s.status, ...(s.text !== undefined && { message: message(s.text) }) }
          : s.op === 'message'
            ? { op: 'message', message: message(s.text) }
            : { op: 'artifact', artifactId: s.artifactId, parts: [{ text: render(s.text) }], ...chunkFlags(this.script, i) };
      res.write(`${JSON.stringify(op)}\n`);
    }
    res.end();
  }
}

const textPart = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

/**
 * The `a2a` runtime's upstream: an A2A agent written with `@a2a-js/sdk`'s server
 * (DefaultRequestHandler, InMemoryTaskStore, express; JSON-RPC and HTTP+JSON, streaming), as
 * examples/upstream-agent does. A message that starts a task records a BackendCall (`key`: its
 * messageId, our run's originMessageId; `trigger`: `new`, or `continued` on an existing task) and
 * plays the script as A2A events: the task, then status updates (a step's `text` as the status
 * message, id `step-<i>`, which the runtime prefixes with the task id) and artifact updates
 * (append / lastChunk as output.ts chunkFlags says); `message` steps are not playable here (an A2A
 * task has no bare agent message) and are skipped. CancelTask ends the task canceled.
 */
export class UpstreamAgent {
  readonly calls: BackendCall[] = [];
  port = 0;
  private server?: http.Server;
  private readonly canceled = new Set<string>();

  constructor(
    private readonly script: readonly BackendStep[],
    private readonly now: () => number,
  ) {}

  get cardUrl(): string {
    return `http://127.0.0.1:${this.port}/.well-known/agent-card.json`;
  }

  async start(): Promise<void> {
    const app = express();
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    onCleanup(() => {
      server.closeAllConnections();
      server.close();
    });
    const base = `http://127.0.0.1:${this.port}`;
    const card = {
      name: 'Faults upstream',
      description: 'The fault suite\'s upstream A2A agent: a fixed script per task',
      version: '1.0.0',
      supportedInterfaces: [
        { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
        { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
      ],
      capabilities: { streaming: true, pushNotifications: false, extensions: [] },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: [{ id: 'job', name: 'Job', description: 'Works on the input in a few steps', tags: ['job'], examples: ['job 1'], inputModes: [], outputModes: [], securityRequirements: [] }],
      signatures: [],
    } as unknown as AgentCard;
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), this.executor());
    app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
    app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
    app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  }

  private executor(): AgentExecutor {
    return {
      execute: async (ctx: RequestContext, bus: ExecutionEventBus) => {
        const { taskId, contextId } = ctx;
        this.calls.push({ backend: 'a2a', key: ctx.userMessage.messageId, taskId, trigger: ctx.task ? 'continued' : 'new', at: this.now() });
        const input = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('\n');
        const render = (t: string) => t.replaceAll('{{input}}', input);
        const now = () => new Date().toISOString();
        bus.publish(
          AgentEvent.task(
            ctx.task ?? ({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() }, artifacts: [], history: [ctx.userMessage], metadata: undefined } as Task),
          ),
        );
        for (const [i, s] of this.script.entries()) {
          if (this.canceled.has(taskId)) break;
          if (s.op === 'wait') await sleep(s.ms);
          else if (s.op === 'status') {
            const message: Message | undefined =
              s.text !== undefined ? { messageId: `step-${i}`, contextId, taskId, role: Role.ROLE_AGENT, parts: [textPart(render(s.text))], metadata: undefined, extensions: [], referenceTaskIds: [] } : undefined;
            const state = s.status === 'working' ? TaskState.TASK_STATE_WORKING : s.status === 'completed' ? TaskState.TASK_STATE_COMPLETED : TaskState.TASK_STATE_FAILED;
            bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state, message, timestamp: now() }, metadata: undefined }));
          } else if (s.op === 'artifact') {
            const artifact = { artifactId: s.artifactId, name: s.artifactId, description: '', parts: [textPart(render(s.text))], metadata: undefined, extensions: [] };
            bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact, ...chunkFlags(this.script, i), metadata: undefined }));
          }
        }
        bus.finished();
      },
      cancelTask: async (taskId: string, bus: ExecutionEventBus) => {
        this.canceled.add(taskId);
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
        bus.finished();
      },
    };
  }
}
