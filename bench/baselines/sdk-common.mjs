// Shared by the @a2a-js/sdk baseline children (in memory, on Postgres): the echo executor, the
// card, and serving a DefaultRequestHandler over express (JSON-RPC + REST) until stdin closes.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { TaskState, Role } from '@a2a-js/sdk';
import { DefaultRequestHandler, AgentEvent } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';

export const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' });

/** Publishes the new Task (SUBMITTED, the user's message as its history) unless the request continues one. */
export function publishSubmitted(ctx, bus) {
  if (ctx.task) return;
  bus.publish(
    AgentEvent.task({
      id: ctx.taskId,
      contextId: ctx.contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
      artifacts: [],
      history: [ctx.userMessage],
      metadata: undefined,
    }),
  );
}

/** Echo agent: publishes the Task (SUBMITTED) first, then a COMPLETED status carrying "echo: <text>". */
export class EchoExecutor {
  async execute(ctx, bus) {
    const user = ctx.userMessage;
    const text = user.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    publishSubmitted(ctx, bus);
    bus.publish(
      AgentEvent.statusUpdate({
        taskId: ctx.taskId,
        contextId: ctx.contextId,
        status: {
          state: TaskState.TASK_STATE_COMPLETED,
          message: {
            messageId: randomUUID(),
            contextId: ctx.contextId,
            taskId: ctx.taskId,
            role: Role.ROLE_AGENT,
            parts: [textPart(`echo: ${text}`)],
            metadata: undefined,
            extensions: [],
            referenceTaskIds: [],
          },
          timestamp: new Date().toISOString(),
        },
        metadata: undefined,
      }),
    );
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
        metadata: undefined,
      }),
    );
    bus.finished();
  }
}


/**
 * Listen on 127.0.0.1:0 with the SDK's handler over `store` and `executor` (default: the echo
 * executor), print the ready line
 * `{"ready":true,"url":…,"restUrl":…,"cardUrl":…}` and exit when stdin closes or on SIGTERM/SIGINT
 * (after `onClose`).
 */
export async function serveSdk({ name, description, store, executor = new EchoExecutor(), onClose = async () => {} }) {
  const app = express();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name,
    description,
    version: '1.0.0',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
      { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
    ],
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      { id: 'echo', name: 'Echo', description: 'Echoes input', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
    ],
    signatures: [],
  };

  const handler = new DefaultRequestHandler(card, store, executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));

  // The SDK logs every handler-level error (and late store reads at shutdown); keep the bench output readable.
  if (!process.env.BENCH_CHILD_VERBOSE) console.error = console.warn = () => {};

  const shutdown = () => {
    server.closeAllConnections?.();
    server.close(() => onClose().finally(() => process.exit(0)));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();

  process.stdout.write(
    JSON.stringify({ ready: true, url: `${base}/a2a/jsonrpc`, restUrl: `${base}/a2a/rest`, cardUrl: `${base}/.well-known/agent-card.json` }) + '\n',
  );
}
