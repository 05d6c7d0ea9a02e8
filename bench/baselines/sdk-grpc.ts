import { startChildServer } from '../lib/child-server.js';

/** Repo-relative path of the child script (resolved from the repo root, see `repoPath`). */
export const SDK_GRPC_SCRIPT = 'bench/baselines/sdk-grpc.mjs';

export interface SdkGrpcServer {
  /** `host:port` of the plaintext gRPC server (`lf.a2a.v1.A2AService`, no tenant). */
  address: string;
  pid: number | undefined;
  close(): Promise<void>;
}

/**
 * Baseline: the official `@a2a-js/sdk` gRPC server (`@a2a-js/sdk/server/grpc`, DefaultRequestHandler,
 * InMemoryTaskStore, echo executor), in a child process on 127.0.0.1:0.
 */
export async function startSdkGrpc(): Promise<SdkGrpcServer> {
  const child = await startChildServer({ script: SDK_GRPC_SCRIPT });
  return { address: child.url, pid: child.pid, close: child.close };
}
