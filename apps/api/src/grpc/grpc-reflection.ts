import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import health from 'grpc-health-check';
import descriptor, { type IDescriptorProto, type IFileDescriptorProto } from 'protobufjs/ext/descriptor/index.js';

/** proto-loader options for the descriptors reflection serves (only the descriptors are used, not the codecs). */
const LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

/**
 * Where our copy of a2a.proto is (libs/a2a/proto/a2a.proto: upstream v1.0.1 with the google.api
 * annotations removed, wire-identical): under the repository root both when the app runs from
 * source (apps/api/src/grpc → root) and when compiled (dist/apps/api/src/grpc → dist/.. = root).
 * Null when absent (an image that ships dist/ only).
 */
export function a2aProtoPath(): string | null {
  const up = new URL('../../../../', import.meta.url);
  for (const candidate of [new URL('libs/a2a/proto/a2a.proto', up), new URL('../libs/a2a/proto/a2a.proto', up)]) {
    const file = fileURLToPath(candidate);
    if (existsSync(file)) return file;
  }
  return null;
}

/**
 * The files reflection describes, as one proto-loader PackageDefinition: `lf.a2a.v1.A2AService`
 * (from `a2aFile`), `grpc.health.v1.Health` (grpc-health-check's health.proto) and both
 * `grpc.reflection.v1{,alpha}.ServerReflection` (@grpc/reflection's own protos). proto-loader
 * names each file after its package (`lf_a2a_v1.proto`, `google_protobuf.proto`, …) and leaves
 * every file's `dependency` list empty (grpc/grpc-node#2595), which strict clients such as grpcurl
 * reject ("unresolvable reference"); withDependencies fills them in.
 * Throws when a file cannot be read or parsed.
 */
export function reflectionPackageDefinition(a2aFile: string): protoLoader.PackageDefinition {
  const reflectionProtos = path.resolve(path.dirname(createRequire(import.meta.url).resolve('@grpc/reflection')), '../proto');
  const files = ['a2a.proto', 'health/v1/health.proto', 'grpc/reflection/v1/reflection.proto', 'grpc/reflection/v1alpha/reflection.proto'];
  const includeDirs = [path.dirname(a2aFile), path.resolve(path.dirname(health.protoPath), '../..'), reflectionProtos];
  return withDependencies(protoLoader.loadSync(files, { ...LOADER_OPTIONS, includeDirs }));
}

/**
 * The same definitions with each FileDescriptorProto's `dependency` list set to the files declaring
 * the types it references (fields, extensions, method input/output), by fully-qualified name.
 */
export function withDependencies(pkg: protoLoader.PackageDefinition): protoLoader.PackageDefinition {
  const decoded = new Map<string, IFileDescriptorProto>();
  const nameOf = new Map<Buffer, string>();
  for (const def of Object.values(pkg)) {
    for (const bin of (def as { fileDescriptorProtos?: Buffer[] }).fileDescriptorProtos ?? []) {
      if (nameOf.has(bin)) continue;
      const file = descriptor.FileDescriptorProto.decode(bin) as unknown as IFileDescriptorProto;
      nameOf.set(bin, file.name ?? '');
      if (file.name && !decoded.has(file.name)) decoded.set(file.name, file);
    }
  }
  const owner = new Map<string, string>();
  const declare = (prefix: string, fileName: string, messages: IDescriptorProto[] = [], enums: { name?: string | null }[] = []) => {
    for (const e of enums) owner.set(`${prefix}${e.name}`, fileName);
    for (const m of messages) {
      owner.set(`${prefix}${m.name}`, fileName);
      declare(`${prefix}${m.name}.`, fileName, m.nestedType ?? [], m.enumType ?? []);
    }
  };
  for (const [name, file] of decoded) declare(file.package ? `${file.package}.` : '', name, file.messageType ?? [], file.enumType ?? []);
  const encoded = new Map<string, Buffer>();
  for (const [name, file] of decoded) {
    const refs = new Set<string>();
    const fields = (messages: IDescriptorProto[] = []): void => {
      for (const m of messages) {
        for (const f of [...(m.field ?? []), ...(m.extension ?? [])]) [f.typeName, f.extendee].forEach((t) => t && refs.add(t));
        fields(m.nestedType ?? []);
      }
    };
    fields(file.messageType ?? []);
    for (const f of file.extension ?? []) [f.typeName, f.extendee].forEach((t) => t && refs.add(t));
    for (const svc of file.service ?? []) for (const m of svc.method ?? []) [m.inputType, m.outputType].forEach((t) => t && refs.add(t));
    const deps = new Set<string>();
    for (const ref of refs) {
      const dep = owner.get(ref.replace(/^\./, ''));
      if (dep && dep !== name) deps.add(dep);
    }
    file.dependency = [...deps].sort();
    encoded.set(name, Buffer.from(descriptor.FileDescriptorProto.encode(file as never).finish()));
  }
  const out: protoLoader.PackageDefinition = {};
  for (const [key, def] of Object.entries(pkg)) {
    const bins = (def as { fileDescriptorProtos?: Buffer[] }).fileDescriptorProtos;
    out[key] = bins
      ? ({ ...def, fileDescriptorProtos: bins.map((bin) => encoded.get(nameOf.get(bin) ?? '') ?? bin) } as typeof def)
      : def;
  }
  return out;
}

/**
 * Add gRPC server reflection (grpc.reflection.v1 and v1alpha, via @grpc/reflection) to `server`,
 * so `grpcurl -plaintext host:port list|describe` work. Returns false (and adds nothing) when
 * a2a.proto is not shipped beside the app (see a2aProtoPath).
 */
export function addReflection(server: Pick<grpc.Server, 'addService'>, a2aFile: string | null = a2aProtoPath()): boolean {
  if (!a2aFile) return false;
  new ReflectionService(reflectionPackageDefinition(a2aFile)).addToServer(server);
  return true;
}
