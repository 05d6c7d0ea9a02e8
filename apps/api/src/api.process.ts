import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { listenFailure } from '#libs/common';
import { loadConfig } from '#libs/config';
import { checkSchema } from '#libs/db';
import { flushTracing, startTracing } from '#libs/telemetry';
import { createApiApp } from './app.factory.js';

/**
 * Start the API as a process runs it: A2A endpoints, Agent Cards and the admin API listening on
 * PORT. Resolves with the listening app (close it to stop). Rejects, with one clear line, when the
 * configuration is invalid, PostgreSQL cannot be reached, its schema is behind this build (run
 * `npm run db:migrate`, or the migration job), or PORT is taken. Traces (OpenTelemetry) start
 * first, when configured (OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_TRACES_EXPORTER).
 * Called by main.ts and, once per edit, by `npm run dev`'s host (scripts/dev-host.mjs).
 */
export async function startApiProcess(): Promise<NestFastifyApplication> {
  const config = loadConfig();
  const schema = await checkSchema(config.DATABASE_URL);
  if (!schema.reachable) throw new Error(`cannot reach PostgreSQL at ${new URL(config.DATABASE_URL).host}: ${schema.error}`);
  if (schema.pending.length > 0) throw new Error(`the database schema is behind this build (${schema.pending.length} migration(s) not applied: ${schema.pending.join(', ')}); run npm run db:migrate`);
  await startTracing({ serviceName: config.OTEL_SERVICE_NAME ?? 'aaas-api', config });
  const app = await createApiApp();
  // the last spans are exported before the process exits (the server has stopped taking requests)
  app.getHttpAdapter().getInstance().addHook('onClose', async () => flushTracing());
  try {
    await app.listen(config.PORT, config.HOST);
  } catch (e) {
    const line = listenFailure(e, config.PORT, config.HOST, 'PORT');
    await app.close().catch(() => undefined);
    throw line ? new Error(line) : e;
  }
  return app;
}
