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
      await worker?.close();
      await api.close();
    },
  };
}
