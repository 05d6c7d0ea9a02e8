import { listenFailure } from '#libs/common';
import { loadConfig } from '#libs/config';
import { checkSchema } from '#libs/db';
import { flushTracing, startTracing } from '#libs/telemetry';
import { createApiApp } from './app.factory.js';

/**
 * API process entry point: A2A endpoints, Agent Cards and the admin API on PORT. Refuses to start,
 * with one clear line and exit code 1, when the configuration is invalid, PostgreSQL cannot be
 * reached, its schema is behind this build, or PORT is taken (run `npm run db:migrate`, or the migration job).
 * Traces (OpenTelemetry) start first, when configured (OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_TRACES_EXPORTER).
 */
async function main(): Promise<void> {
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
    if (!line) throw e;
    await app.close().catch(() => undefined);
    throw new Error(line);
  }
}

main().catch((e: unknown) => {
  console.error(`aaas api: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
