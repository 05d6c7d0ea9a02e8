// Baseline: the official @a2a-js/sdk v1.0 server with its DatabaseTaskStore on PostgreSQL
// (express + JSON-RPC, Kysely over pg). The store's `tasks` table is (re)created in the database of
// BENCH_SDK_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk) at start,
// with the columns and indexes of the SDK's own migration (src/cli/task/migrations/0001_create_tasks).
//
// Child process, started by bench/baselines/sdk-in-memory.ts. Listens on 127.0.0.1:<random> and
// prints ONE JSON line on stdout:
//   {"ready":true,"url":"http://127.0.0.1:PORT/a2a/jsonrpc","restUrl":".../a2a/rest","cardUrl":".../.well-known/agent-card.json"}
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
//
// Wire notes (see /tmp/sdk-notes.md): requests MUST carry `A2A-Version: 1.0` (absent header is
// treated as 0.3 -> JSON-RPC error -32009 with HTTP 200), method `SendMessage`, proto-JSON params
// `{message:{messageId, role:'ROLE_USER', parts:[{text}]}, configuration:{returnImmediately:true}}`.
// With returnImmediately the answer is the first executor event: `{result:{task:{…SUBMITTED…}}}`.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { TaskState, Role } from '@a2a-js/sdk';
import { DefaultRequestHandler, AgentEvent } from '@a2a-js/sdk/server';
import { DatabaseTaskStore } from '@a2a-js/sdk/server/database';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { jsonRpcHandler, restHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' });

/** Echo agent: publishes the Task (SUBMITTED) first, then a COMPLETED status carrying "echo: <text>". */
class EchoExecutor {
  async execute(ctx, bus) {
    const user = ctx.userMessage;
    const text = user.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    if (!ctx.task) {
      bus.publish(
        AgentEvent.task({
          id: ctx.taskId,
          contextId: ctx.contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [user],
          metadata: undefined,
        }),
      );
    }
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

const app = express();
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve, reject) => {
  server.once('listening', resolve);
  server.once('error', reject);
});
const base = `http://127.0.0.1:${server.address().port}`;

const card = {
  name: 'SDK Echo Agent on Postgres (bench baseline)',
  description: 'Echoes the user text; @a2a-js/sdk server with DatabaseTaskStore',
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

const databaseUrl = process.env.BENCH_SDK_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_sdk';
{
  const admin = new URL(databaseUrl);
  const dbName = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await c.query(`CREATE DATABASE "${dbName}"`);
  await c.end();
}
const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.BENCH_POOL_MAX ?? 20) });
await pool.query(`CREATE TABLE tasks (
  tenant varchar(255) collate "C" NOT NULL, owner varchar(255) collate "C" NOT NULL, id varchar(36) collate "C" NOT NULL,
  context_id varchar(36) collate "C" NOT NULL, status_last_updated bigint NOT NULL, status_state varchar(255) collate "C",
  status text, artifacts text, history text, metadata text, protocol_version varchar(255),
  CONSTRAINT tasks_pkey PRIMARY KEY (tenant, owner, id))`);
await pool.query('CREATE INDEX tasks_scope_updated_idx ON tasks (tenant, owner, status_last_updated, id)');
await pool.query('CREATE INDEX tasks_scope_context_updated_idx ON tasks (tenant, owner, context_id, status_last_updated, id)');
const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
const handler = new DefaultRequestHandler(card, new DatabaseTaskStore(db), new EchoExecutor());
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));

// The SDK logs every handler-level error with console.error; keep the bench output readable.
if (!process.env.BENCH_CHILD_VERBOSE) console.error = console.warn = () => {};

const shutdown = () => {
  server.closeAllConnections?.();
  server.close(() => pool.end().finally(() => process.exit(0)));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();

process.stdout.write(
  JSON.stringify({
    ready: true,
    url: `${base}/a2a/jsonrpc`,
    restUrl: `${base}/a2a/rest`,
    cardUrl: `${base}/.well-known/agent-card.json`,
  }) + '\n',
);
