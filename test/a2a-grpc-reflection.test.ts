import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import descriptor, { type IFileDescriptorProto } from 'protobufjs/ext/descriptor/index.js';
import { startStack, type Stack } from './support/stack.js';
import { A2AGrpcServer } from '../apps/api/src/grpc/a2a-grpc.server.js';
import { addReflection } from '../apps/api/src/grpc/grpc-reflection.js';

/**
 * gRPC server reflection on the A2A listener (what `grpcurl -plaintext host:port list|describe`
 * do): a raw grpc.reflection.v1 / v1alpha ServerReflectionInfo client built from
 * @grpc/reflection's own protos lists the services and fetches the file declaring a symbol.
 */
let stack: Stack;
let address: string;

const PROTOS = path.resolve(path.dirname(createRequire(import.meta.url).resolve('@grpc/reflection')), '../proto');

type ReflectionResponse = {
  listServicesResponse?: { service: { name: string }[] };
  fileDescriptorResponse?: { fileDescriptorProto: Buffer[] };
  errorResponse?: { errorCode: number; errorMessage: string };
};

function reflectionClient(version: 'v1' | 'v1alpha'): grpc.Client & { ServerReflectionInfo(): grpc.ClientDuplexStream<object, ReflectionResponse> } {
  const def = protoLoader.loadSync(`grpc/reflection/${version}/reflection.proto`, { includeDirs: [PROTOS], longs: String, enums: String, defaults: true, oneofs: true });
  const Ctor = (grpc.loadPackageDefinition(def) as any).grpc.reflection[version].ServerReflection as grpc.ServiceClientConstructor;
  return new Ctor(address, grpc.credentials.createInsecure()) as any;
}

/** One request on one ServerReflectionInfo stream; the one answer. */
async function ask(request: object, version: 'v1' | 'v1alpha' = 'v1'): Promise<ReflectionResponse> {
  const client = reflectionClient(version);
  try {
    return await new Promise<ReflectionResponse>((resolve, reject) => {
      const call = client.ServerReflectionInfo();
      call.once('data', (r: ReflectionResponse) => {
        resolve(r);
        call.end();
      });
      call.once('error', reject);
      call.write({ host: '', ...request });
    });
  } finally {
    client.close();
  }
}

/** The FileDescriptorProtos of an answer, decoded (protobufjs, what @grpc/reflection encodes them with). */
const files = (r: ReflectionResponse): FileDescriptor[] =>
  (r.fileDescriptorResponse?.fileDescriptorProto ?? []).map((b) => descriptor.FileDescriptorProto.toObject(descriptor.FileDescriptorProto.decode(b), { defaults: true }) as FileDescriptor);
type FileDescriptor = Required<Pick<IFileDescriptorProto, 'name' | 'package' | 'dependency' | 'messageType' | 'service'>>;

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { GRPC_PORT: '0' } });
  address = `127.0.0.1:${stack.api.get(A2AGrpcServer).port}`;
});

afterAll(async () => {
  await stack?.close();
});

describe('gRPC server reflection', () => {
  it.each(['v1', 'v1alpha'] as const)('%s lists the A2A, health and reflection services', async (version) => {
    const r = await ask({ listServices: '' }, version);
    const names = r.listServicesResponse?.service.map((s) => s.name) ?? [];
    expect(names).toEqual(expect.arrayContaining(['lf.a2a.v1.A2AService', 'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection']));
  });

  it('describes lf.a2a.v1.A2AService: every RPC, streaming ones marked, types resolvable', async () => {
    const r = await ask({ fileContainingSymbol: 'lf.a2a.v1.A2AService' });
    const decoded = files(r);
    const a2a = decoded.find((f) => f.package === 'lf.a2a.v1');
    // proto-loader names a file after its package (lf_a2a_v1.proto), so do the dependencies
    expect(a2a?.name).toBe('lf_a2a_v1.proto');
    const service = a2a!.service.find((s) => s.name === 'A2AService')!;
    const methods = Object.fromEntries(service.method!.map((m) => [m.name, m]));
    expect(Object.keys(methods).sort()).toEqual(
      [
        'CancelTask',
        'CreateTaskPushNotificationConfig',
        'DeleteTaskPushNotificationConfig',
        'GetExtendedAgentCard',
        'GetTask',
        'GetTaskPushNotificationConfig',
        'ListTaskPushNotificationConfigs',
        'ListTasks',
        'SendMessage',
        'SendStreamingMessage',
        'SubscribeToTask',
      ].sort(),
    );
    expect(methods.SendStreamingMessage!.serverStreaming).toBe(true);
    expect(methods.SubscribeToTask!.serverStreaming).toBe(true);
    expect(methods.SendMessage!.serverStreaming).toBeFalsy();
    expect(methods.DeleteTaskPushNotificationConfig!.outputType).toBe('.google.protobuf.Empty');
    // the dependencies come along (grpcurl needs them to resolve Struct, Timestamp, Empty)
    expect(a2a!.dependency).toEqual(['google_protobuf.proto']);
    for (const dep of a2a!.dependency) {
      const byName = files(await ask({ fileByFilename: dep }));
      expect(byName.map((f) => f.name)).toContain(dep);
    }
    const wellKnown = decoded.filter((f) => f.package === 'google.protobuf').flatMap((f) => f.messageType.map((m) => m.name));
    expect(wellKnown).toEqual(expect.arrayContaining(['Empty', 'Struct', 'Value', 'Timestamp']));
    // a message's field numbers are the normative ones (wire-identical copy)
    const task = a2a!.messageType.find((m) => m.name === 'Task')!;
    expect(task.field!.map((f) => [f.name, f.number])).toEqual(expect.arrayContaining([['id', 1], ['context_id', 2], ['status', 3]]));
  });

  it('finds the file of a message symbol and of the health service', async () => {
    expect(files(await ask({ fileContainingSymbol: 'lf.a2a.v1.SendMessageRequest' })).map((f) => f.package)).toContain('lf.a2a.v1');
    const healthFiles = files(await ask({ fileContainingSymbol: 'grpc.health.v1.Health' }));
    expect(healthFiles.find((f) => f.package === 'grpc.health.v1')?.service.map((s) => s.name)).toContain('Health');
  });

  it('answers NOT_FOUND for unknown symbols and files, hostile names included', async () => {
    for (const request of [
      { fileContainingSymbol: 'lf.a2a.v1.NoSuchThing' },
      { fileContainingSymbol: '../../etc/passwd' },
      { fileContainingSymbol: 'x'.repeat(10_000) },
      { fileByFilename: '/etc/passwd' },
      { fileByFilename: '../a2a.proto' },
    ]) {
      const r = await ask(request);
      expect(r.errorResponse?.errorCode, JSON.stringify(request).slice(0, 80)).toBe(grpc.status.NOT_FOUND);
      expect(r.fileDescriptorResponse).toBeFalsy();
    }
  });

  it('adds nothing when a2a.proto is not shipped', () => {
    const added: string[] = [];
    expect(addReflection({ addService: (s) => void added.push(Object.keys(s).join(',')) }, null)).toBe(false);
    expect(added).toEqual([]);
  });
});
