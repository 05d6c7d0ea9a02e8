// Baseline (a): bare Fastify JSON route — the floor for "HTTP + JSON parse + JSON reply" cost.
//
// Child process, started by bench/baselines/bare-fastify.ts. Listens on 127.0.0.1:<random>
// and prints ONE JSON line on stdout: {"ready":true,"url":"http://127.0.0.1:PORT/a2a/jsonrpc"}.
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
//
// The route accepts the same JSON-RPC SendMessage body as the A2A targets, parses it (Fastify's
// JSON parser), and answers with a JSON-RPC response shaped and sized like the SDK's
// `returnImmediately` answer (a SUBMITTED Task echoing the user message, ~600 bytes), with fresh
// ids and timestamp, so the serialisation cost is comparable.
import Fastify from 'fastify';
import { randomUUID } from 'node:crypto';

const app = Fastify({ logger: false });

app.post('/a2a/jsonrpc', async (req, reply) => {
  const rpc = req.body ?? {};
  const msg = rpc.params?.message ?? {};
  const taskId = randomUUID();
  const contextId = msg.contextId || randomUUID();
  reply.header('content-type', 'application/json; charset=utf-8');
  return {
    jsonrpc: '2.0',
    id: rpc.id ?? null,
    result: {
      task: {
        id: taskId,
        contextId,
        status: { state: 'TASK_STATE_SUBMITTED', timestamp: new Date().toISOString() },
        history: [
          {
            messageId: msg.messageId ?? randomUUID(),
            contextId,
            taskId,
            role: msg.role ?? 'ROLE_USER',
            parts: Array.isArray(msg.parts) ? msg.parts : [],
          },
        ],
      },
    },
  };
});

const shutdown = async () => {
  try {
    await app.close();
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
