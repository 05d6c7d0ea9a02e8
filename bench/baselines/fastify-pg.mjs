// Baseline: bare Fastify + ONE prepared pg statement per request — the floor for "HTTP + JSON +
// a durable accept". The statement inserts a task row and its first event row (one CTE, one round
// trip, one commit) and the route answers with the same SUBMITTED-task body as bare-fastify.mjs.
//
// Child process. Database: BENCH_LEAN_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/
// aaas_bench_lean), recreated at start. Prints {"ready":true,"url":…} on stdout; exits when stdin
// closes or on SIGTERM/SIGINT.
import Fastify from 'fastify';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { recreateDatabase } from './recreate-database.mjs';

const databaseUrl = process.env.BENCH_LEAN_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_bench_lean';
await recreateDatabase(databaseUrl);
const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.BENCH_POOL_MAX ?? 20) });
await pool.query(`CREATE TABLE tasks (id uuid PRIMARY KEY, context_id text NOT NULL, state text NOT NULL,
  message jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
await pool.query(`CREATE TABLE task_events (task_id uuid NOT NULL REFERENCES tasks(id), sequence int NOT NULL,
  type text NOT NULL, payload jsonb NOT NULL, PRIMARY KEY (task_id, sequence))`);

const INSERT = {
  name: 'accept',
  text: `WITH t AS (INSERT INTO tasks (id, context_id, state, message) VALUES ($1, $2, 'submitted', $3::jsonb) RETURNING id)
         INSERT INTO task_events (task_id, sequence, type, payload) SELECT id, 1, 'task.created', $3::jsonb FROM t`,
};

const app = Fastify({ logger: false });
app.post('/a2a/jsonrpc', async (req, reply) => {
  const rpc = req.body ?? {};
  const msg = rpc.params?.message ?? {};
  const taskId = randomUUID();
  const contextId = msg.contextId || randomUUID();
  await pool.query({ ...INSERT, values: [taskId, contextId, JSON.stringify(msg)] });
  reply.header('content-type', 'application/json; charset=utf-8');
  return {
    jsonrpc: '2.0',
    id: rpc.id ?? null,
    result: {
      task: {
        id: taskId,
        contextId,
        status: { state: 'TASK_STATE_SUBMITTED', timestamp: new Date().toISOString() },
        history: [{ messageId: msg.messageId ?? randomUUID(), contextId, taskId, role: msg.role ?? 'ROLE_USER', parts: Array.isArray(msg.parts) ? msg.parts : [] }],
      },
    },
  };
});

const shutdown = async () => {
  try {
    await app.close();
    await pool.end();
  } finally {
    process.exit(0);
  }
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();

const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(JSON.stringify({ ready: true, url: `${address}/a2a/jsonrpc` }) + '\n');
