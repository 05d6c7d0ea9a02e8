import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** A server running in a child process (so it does not share the load generator's event loop). */
export interface ChildServer {
  /** URL announced by the child (the JSON-RPC endpoint for the baselines). */
  url: string;
  /** The whole JSON line announced by the child (may carry extra URLs). */
  info: Record<string, unknown>;
  pid: number | undefined;
  close(): Promise<void>;
}

/**
 * Resolves a repo-relative path (e.g. `bench/baselines/x.mjs`). The bench runs compiled from
 * `dist/bench/...`, so child scripts are resolved from the repo root, NOT from `import.meta.url`:
 * `BENCH_ROOT` if set, else `process.cwd()`.
 */
export function repoPath(relative: string): string {
  const root = process.env.BENCH_ROOT ?? process.cwd();
  return path.resolve(root, relative);
}

export interface StartChildOptions {
  /** Repo-relative path of a plain ESM `.mjs` script. */
  script: string;
  env?: Record<string, string>;
  /** Max time to wait for the ready line. */
  startTimeoutMs?: number;
  /** Extra node flags, e.g. ['--max-old-space-size=4096']. */
  nodeArgs?: string[];
}

/**
 * Spawns `node <script>` and waits for the first stdout line that parses as JSON with a string
 * `url` field. stdin is a pipe the child watches: if this process dies, the child exits too.
 */
export async function startChildServer(opts: StartChildOptions): Promise<ChildServer> {
  const file = repoPath(opts.script);
  if (!existsSync(file)) {
    throw new Error(`bench child script not found: ${file} (run from the repo root or set BENCH_ROOT)`);
  }
  const child: ChildProcess = spawn(process.execPath, [...(opts.nodeArgs ?? []), file], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...opts.env },
  });

  const info = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timeout = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${opts.script}: no ready line within ${opts.startTimeoutMs ?? 15000} ms`));
    }, opts.startTimeoutMs ?? 15000);
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      clearTimeout(timeout);
      reject(new Error(`${opts.script} exited before it was ready (code=${code}, signal=${signal})`));
    };
    child.once('exit', onExit);
    child.once('error', (err) => {
      clearTimeout(timeout);
      reject(err);
    });
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        process.stdout.write(`[${path.basename(opts.script)}] ${line}\n`);
        return;
      }
      if (parsed && typeof parsed === 'object' && typeof (parsed as { url?: unknown }).url === 'string') {
        clearTimeout(timeout);
        child.off('exit', onExit);
        // keep draining the child's stdout so it never blocks on a full pipe
        lines.removeAllListeners('line');
        lines.on('line', (l) => process.stdout.write(`[${path.basename(opts.script)}] ${l}\n`));
        resolve(parsed as Record<string, unknown>);
      }
    });
  });

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        resolve();
        return;
      }
      const killTimer = setTimeout(() => child.kill('SIGKILL'), 3000);
      child.once('exit', () => {
        clearTimeout(killTimer);
        resolve();
      });
      child.kill('SIGTERM');
    });
    return closed;
  };

  return { url: info.url as string, info, pid: child.pid, close };
}
