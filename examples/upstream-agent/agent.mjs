// A small A2A agent written with the official @a2a-js/sdk server (DefaultRequestHandler,
// InMemoryTaskStore, express; JSON-RPC and HTTP+JSON, A2A v1.0): the upstream that `npm run demo`
// and the tests put behind the control plane with the `a2a` runtime.
//
//   node examples/upstream-agent/agent.mjs          # UPSTREAM_PORT (default 0 = any), UPSTREAM_HOST (127.0.0.1)
//
// Prints ONE JSON line on stdout once listening:
//   {"ready":true,"url":".../a2a/jsonrpc","restUrl":".../a2a/rest","cardUrl":".../.well-known/agent-card.json"}
// and exits when stdin closes (its parent died) or on SIGTERM/SIGINT.
//
// What it does with the user's text:
//   "weather"           input-required "Which city?"; the answer (same task) completes it with a
//                       forecast message and a `forecast` artifact
//   "stream <n> [ms]"   working, then <n> chunks of a `report` artifact every [ms] (default 50),
//                       then completed
//   "hold"              working until canceled (CancelTask)
//   "fail"              failed, with the message "upstream says no"
//   "reply <text>"      answers with a Message (no task)
//   anything else       completed with "echo: <text>"
// UPSTREAM_EXTENSIONS (comma-separated URIs): extensions its card declares.
// GET /stats answers {"canceled": [taskId, ...], "executions": n, "extensions": [uri, ...]} (the
// A2A extensions the last message asked for). With UPSTREAM_TOKEN set, every
// A2A request needs `Authorization: Bearer <UPSTREAM_TOKEN>` (401 otherwise).
import express from 'express';
import { randomUUID } from 'node:crypto';
import { TaskState, Role } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const now = () => new Date().toISOString();
const agentMessage = (taskId, contextId, value) => ({
  messageId: randomUUID(),
  contextId,
  taskId,
  role: Role.ROLE_AGENT,
  parts: [text(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const stats = { canceled: [], executions: 0, extensions: [] };
const canceled = new Set();

class UpstreamExecutor {
  async execute(ctx, bus) {
    stats.executions++;
    stats.extensions = [...(ctx.context?.requestedExtensions ?? [])];
    const { taskId, contextId } = ctx;
    const input = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('').trim();
    const status = (state, message, final = false) =>
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state, message: message && agentMessage(taskId, contextId, message), timestamp: now() }, metadata: undefined }));
    if (input.startsWith('reply ')) {
      bus.publish(AgentEvent.message(agentMessage('', contextId, input.slice(6))));
      bus.finished();
      return;
    }
    // every turn starts with the task (the SDK requires it), new or continued
    bus.publish(
      AgentEvent.task(
        ctx.task ?? { id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() }, artifacts: [], history: [ctx.userMessage], metadata: undefined },
      ),
    );
    const asked = ctx.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED;
    if (asked) {
      const city = input || 'nowhere';
      status(TaskState.TASK_STATE_WORKING, `Looking up ${city}…`);
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: { artifactId: 'forecast', name: 'forecast', description: 'Three-day forecast', parts: [text(`${city}: sunny, 21°C`)], metadata: undefined, extensions: [] },
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
      );
      status(TaskState.TASK_STATE_COMPLETED, `The weather in ${city} is sunny.`);
    } else if (/^weather\b/i.test(input)) {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, 'Which city?');
    } else if (input.startsWith('stream')) {
      const [, n = '3', ms = '50'] = input.split(/\s+/);
      status(TaskState.TASK_STATE_WORKING, 'Writing the report…');
      for (let i = 0; i < Number(n); i++) {
        if (canceled.has(taskId)) break;
        await sleep(Number(ms));
        bus.publish(
          AgentEvent.artifactUpdate({
            taskId,
            contextId,
            artifact: { artifactId: 'report', name: 'report', description: '', parts: [text(`chunk ${i + 1};`)], metadata: undefined, extensions: [] },
            append: i > 0,
            lastChunk: i === Number(n) - 1,
            metadata: undefined,
          }),
        );
      }
      if (!canceled.has(taskId)) status(TaskState.TASK_STATE_COMPLETED, `Report done in ${n} chunks.`);
    } else if (input === 'hold') {
      status(TaskState.TASK_STATE_WORKING, 'Holding until canceled…');
      while (!canceled.has(taskId)) await sleep(50);
    } else if (input === 'fail') {
      status(TaskState.TASK_STATE_FAILED, 'upstream says no');
    } else {
      status(TaskState.TASK_STATE_COMPLETED, `echo: ${input}`);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    canceled.add(taskId);
    stats.canceled.push(taskId);
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() }, metadata: undefined }));
    bus.finished();
  }
}

const app = express();
const server = app.listen(Number(process.env.UPSTREAM_PORT ?? 0), process.env.UPSTREAM_HOST ?? "127.0.0.1");
await new Promise((resolve, reject) => {
  server.once('listening', resolve);
  server.once('error', reject);
});
const base = `http://${process.env.UPSTREAM_HOST ?? "127.0.0.1"}:${server.address().port}`;
const card = {
  name: 'Weather (upstream)',
  description: 'A small @a2a-js/sdk agent: asks for a city, streams reports, echoes',
  version: '1.0.0',
  supportedInterfaces: [
    { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
    { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
  ],
  provider: { organization: 'Example', url: 'https://example.com' },
  capabilities: {
    streaming: process.env.UPSTREAM_STREAMING !== 'false',
    pushNotifications: false,
    // UPSTREAM_EXTENSIONS: comma-separated extension URIs the card declares (the SDK server only
    // passes requested extensions it declares on to the executor)
    extensions: (process.env.UPSTREAM_EXTENSIONS ?? '').split(',').filter(Boolean).map((uri) => ({ uri, description: '', required: false, params: undefined })),
  },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    { id: 'weather', name: 'Weather', description: 'Asks for a city and forecasts its weather', tags: ['weather'], examples: ['weather'], inputModes: [], outputModes: [], securityRequirements: [] },
    { id: 'report', name: 'Report', description: 'Streams a report in chunks', tags: ['stream'], examples: ['stream 5'], inputModes: [], outputModes: [], securityRequirements: [] },
  ],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new UpstreamExecutor());
const token = process.env.UPSTREAM_TOKEN;
const auth = (req, res, next) => (!token || req.headers.authorization === `Bearer ${token}` ? next() : res.status(401).json({ error: 'unauthorized' }));
app.get('/stats', (_req, res) => res.json(stats));
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a/jsonrpc', auth, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.use('/a2a/rest', auth, restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
if (!process.env.UPSTREAM_VERBOSE) console.error = console.warn = () => {};

const shutdown = () => {
  server.closeAllConnections?.();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
if (!process.stdin.isTTY) {
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();
}
process.stdout.write(JSON.stringify({ ready: true, url: `${base}/a2a/jsonrpc`, restUrl: `${base}/a2a/rest`, cardUrl: `${base}/.well-known/agent-card.json` }) + '\n');
