// Baseline: the official @a2a-js/sdk gRPC server (`@a2a-js/sdk/server/grpc`), in memory
// (DefaultRequestHandler + InMemoryTaskStore, the echo executor of sdk-common.mjs).
//
// Child process, started by bench/baselines/sdk-grpc.ts. Listens on 127.0.0.1:<random> (plaintext
// HTTP/2) and prints ONE JSON line on stdout: {"ready":true,"url":"127.0.0.1:PORT"}.
// Exits when stdin closes (parent died) or on SIGTERM/SIGINT.
import * as grpc from '@grpc/grpc-js';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { A2AService, grpcService, UserBuilder } from '@a2a-js/sdk/server/grpc';
import { EchoExecutor } from './sdk-common.mjs';

const server = new grpc.Server();
const port = await new Promise((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
const address = `127.0.0.1:${port}`;
const card = {
  name: 'SDK Echo Agent (gRPC bench baseline)',
  description: 'Echoes the user text; in-memory @a2a-js/sdk gRPC server',
  version: '1.0.0',
  supportedInterfaces: [{ url: address, protocolBinding: 'GRPC', protocolVersion: '1.0', tenant: '' }],
  provider: undefined,
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'Echoes input', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
server.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));

// The SDK logs every handler-level error; keep the bench output readable.
if (!process.env.BENCH_CHILD_VERBOSE) console.error = console.warn = () => {};

const shutdown = () => {
  server.tryShutdown(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();

process.stdout.write(JSON.stringify({ ready: true, url: address }) + '\n');
