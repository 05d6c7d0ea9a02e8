import { startChildServer } from '../lib/child-server.js';

/** Repo-relative path of the child script (resolved from the repo root, see `repoPath`). */
export const SDK_IN_MEMORY_SCRIPT = 'bench/baselines/sdk-in-memory.mjs';

export interface SdkInMemoryServer {
  /** JSON-RPC endpoint (POST, header `A2A-Version: 1.0` required). */
  url: string;
  /** HTTP+JSON base (`POST {restUrl}/message:send`). */
  restUrl: string;
  /** `GET` agent card. */
  cardUrl: string;
  pid: number | undefined;
  close(): Promise<void>;
}

/**
 * Baseline (b): the official `@a2a-js/sdk` v1.0 server (express, JSON-RPC + REST, InMemoryTaskStore,
 * echo executor), in a child process on 127.0.0.1:0.
 */
export async function startSdkInMemory(): Promise<SdkInMemoryServer> {
  const child = await startChildServer({ script: SDK_IN_MEMORY_SCRIPT });
  return {
    url: child.url,
    restUrl: String(child.info.restUrl),
    cardUrl: String(child.info.cardUrl),
    pid: child.pid,
    close: child.close,
  };
}
