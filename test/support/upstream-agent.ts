import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** The example @a2a-js/sdk agent (examples/upstream-agent/agent.mjs) running in its own process. */
export interface UpstreamAgent {
  url: string;
  restUrl: string;
  cardUrl: string;
  base: string;
  process: ChildProcess;
  stats(): Promise<{ canceled: string[]; executions: number; extensions: string[] }>;
  close(): Promise<void>;
}

/** Start the example upstream agent on 127.0.0.1 (random port) and wait for its ready line. */
export async function startUpstreamAgent(env: Record<string, string> = {}): Promise<UpstreamAgent> {
  const child = spawn(process.execPath, ['examples/upstream-agent/agent.mjs'], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const info = await new Promise<{ url: string; restUrl: string; cardUrl: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('upstream agent: no ready line within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`upstream agent exited (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line));
    });
  });
  const base = new URL(info.cardUrl).origin;
  return {
    ...info,
    base,
    process: child,
    stats: async () => (await fetch(`${base}/stats`)).json() as Promise<{ canceled: string[]; executions: number; extensions: string[] }>,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
