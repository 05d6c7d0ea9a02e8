import { listenFailure } from '#libs/common';
import { loadConfig } from '#libs/config';
import { checkSchema } from '#libs/db';
import { startTracing } from '#libs/telemetry';
import { createWorkerApp } from './worker.factory.js';

/**
 * Worker process entry point: executes runs from the `run-execution` queue. Refuses to start
 * (one line, exit 1) when PostgreSQL cannot be reached or its schema is behind this build.
 * Traces (OpenTelemetry) start first, when configured (OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_TRACES_EXPORTER).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const schema = await checkSchema(config.DATABASE_URL);
  if (!schema.reachable) throw new Error(`cannot reach PostgreSQL at ${new URL(config.DATABASE_URL).host}: ${schema.error}`);
  if (schema.pending.length > 0) throw new Error(`the database schema is behind this build (${schema.pending.length} migration(s) not applied: ${schema.pending.join(', ')}); run npm run db:migrate`);
  await startTracing({ serviceName: config.OTEL_SERVICE_NAME ?? 'aaas-worker', config });
  try {
    await createWorkerApp();
  } catch (e) {
    // the metrics port is the only one a worker listens on
    const line = config.WORKER_METRICS_PORT === undefined ? null : listenFailure(e, config.WORKER_METRICS_PORT, config.WORKER_METRICS_HOST, 'WORKER_METRICS_PORT');
    throw line ? new Error(line) : e;
  }
}

main().catch((e: unknown) => {
  console.error(`aaas worker: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
