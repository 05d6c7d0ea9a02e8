import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { createLogger, loadConfig, NestPinoLogger, type AppConfig } from '#libs/config';
import { WorkerModule } from './worker.module.js';

/**
 * Build and start the worker (BullMQ consumers start on bootstrap). Used by main.ts, the demo and
 * tests. `runtimes`: extra runtime kinds (examples/custom-runtime shows one).
 */
export async function createWorkerApp(overrides: Partial<Record<keyof AppConfig, string>> = {}, opts: Parameters<typeof WorkerModule.forRoot>[1] = {}): Promise<INestApplicationContext> {
  const config = loadConfig({ ...process.env, ...overrides });
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(overrides, opts), {
    // Nest's lines as pino JSON, like the API's
    logger: config.LOG_LEVEL === 'silent' ? false : new NestPinoLogger(createLogger(config, 'aaas-worker')),
  });
  app.enableShutdownHooks();
  return app;
}
