import { startChildServer } from '../lib/child-server.js';

/** Repo-relative path of the child script (resolved from the repo root, see `repoPath`). */
export const BARE_FASTIFY_SCRIPT = 'bench/baselines/bare-fastify.mjs';

/**
 * Baseline (a): a bare Fastify server with one JSON POST route (`/a2a/jsonrpc`) answering a
 * Task-sized JSON-RPC body. Runs in a child process on 127.0.0.1:0.
 * `url` is the full route URL to POST to.
 */
export async function startBareFastify(): Promise<{ url: string; pid: number | undefined; close(): Promise<void> }> {
  const child = await startChildServer({ script: BARE_FASTIFY_SCRIPT });
  return { url: child.url, pid: child.pid, close: child.close };
}
