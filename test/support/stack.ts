import { randomBytes, randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createApiApp } from '../../apps/api/src/app.factory.js';
import type { A2AExtensionPlugin } from '#libs/extensions';
import type { AgentRuntime } from '#libs/runtimes';
import { createWorkerApp } from '../../apps/worker/src/worker.factory.js';
import { testEnv } from './env.js';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function alnum(n: number): string {
  return Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');
}

export interface Stack {
  baseUrl: string;
  adminKey: string;
  orgSlug: string;
  /** Config values both apps were started with. */
  env: Record<string, string>;
  api: NestFastifyApplication;
  worker: INestApplicationContext | null;
  close(): Promise<void>;
}

/**
 * Boot the API (listening on 127.0.0.1, random port) and, unless `worker: false`, a worker in the
 * same process, against the test database and a Redis prefix of their own. A fresh organization
 * and admin key are bootstrapped for each stack.
 */
export async function startStack(opts: { worker?: boolean; env?: Record<string, string>; extensions?: ReadonlyArray<A2AExtensionPlugin<any>>; runtimes?: AgentRuntime[] } = {}): Promise<Stack> {
  const orgSlug = `org-${randomUUID().slice(0, 8)}`;
  const adminKey = `aaas_${alnum(8)}_${alnum(32)}`;
  const env: Record<string, string> = {
    ...testEnv(),
    REDIS_PREFIX: `aaas-test-${randomUUID().slice(0, 8)}`,
    BOOTSTRAP_ORG_SLUG: orgSlug,
    BOOTSTRAP_ORG_NAME: orgSlug,
    BOOTSTRAP_ADMIN_KEY: adminKey,
    ...opts.env,
  };
  const api = await createApiApp(env, { extensions: opts.extensions, runtimes: opts.runtimes });
  await api.listen(0, '127.0.0.1');
  const address = api.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const baseUrl = `http://127.0.0.1:${port}`;
  const worker = opts.worker === false ? null : await createWorkerApp(env, { runtimes: opts.runtimes });
  return {
    baseUrl,
    adminKey,
    orgSlug,
    env,
    api,
    worker,
    async close() {
      if (worker) await reportSlowClose('worker', worker);
      await reportSlowClose('api', api);
    },
  };
}

/** Lifecycle hooks Nest awaits on close (the ones a stuck shutdown hides in). */
const HOOKS = ['onModuleDestroy', 'beforeApplicationShutdown', 'onApplicationShutdown'] as const;
const SLOW_CLOSE_MS = 5_000;

/**
 * Close an app; a close or a lifecycle hook that takes longer than 5 s is reported on stderr
 * (which provider, which hook, what the process still holds), so a hang is named, not guessed.
 */
async function reportSlowClose(label: string, app: INestApplicationContext): Promise<void> {
  const pending = new Map<string, number>();
  const container = (app as unknown as { container?: { getModules(): Map<string, { providers: Map<unknown, { name?: unknown; instance?: any }> }> } }).container;
  for (const mod of container?.getModules().values() ?? []) {
    for (const wrapper of mod.providers.values()) {
      const inst = wrapper.instance;
      if (!inst || typeof inst !== 'object') continue;
      for (const hook of HOOKS) {
        const fn = inst[hook];
        if (typeof fn !== 'function' || Object.prototype.hasOwnProperty.call(inst, hook)) continue;
        const key = `${String(wrapper.name)}.${hook}`;
        inst[hook] = async (...args: unknown[]) => {
          pending.set(key, Date.now());
          try {
            return await fn.apply(inst, args);
          } finally {
            pending.delete(key);
          }
        };
      }
    }
  }
  const t0 = Date.now();
  const watchdog = setInterval(() => {
    const hooks = [...pending].map(([k, t]) => `${k} (${Date.now() - t} ms)`).join(', ') || 'none (the server or Nest itself)';
    process.stderr.write(`[stack] ${label} close still pending after ${Date.now() - t0} ms; hooks: ${hooks}; resources: ${process.getActiveResourcesInfo().join(',')}\n`);
  }, SLOW_CLOSE_MS);
  try {
    await app.close();
  } finally {
    clearInterval(watchdog);
  }
}
