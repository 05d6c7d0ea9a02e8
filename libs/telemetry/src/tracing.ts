import { context, propagation, trace, type Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { AppConfig } from '#libs/config';

/** The standard OpenTelemetry variables that decide whether this process traces. */
export type TracingConfig = Pick<AppConfig, 'OTEL_SDK_DISABLED' | 'OTEL_TRACES_EXPORTER' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'>;

/** What `startTracing` started; null while tracing is off (the default). */
let running: { shutdown(): Promise<void> } | null = null;
/** The tracer every span of ours comes from; set only while tracing is on. */
let activeTracer: Tracer | null = null;

/**
 * True when the configuration asks for traces: an exporter is named (`OTEL_TRACES_EXPORTER`, not
 * `none`) or an OTLP endpoint is set, and `OTEL_SDK_DISABLED` is not `true`. Off by default.
 */
export function tracingConfigured(config: TracingConfig): boolean {
  if (config.OTEL_SDK_DISABLED) return false;
  const exporters = (config.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (exporters.includes('none')) return false;
  return exporters.length > 0 || config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}

/**
 * Start the OpenTelemetry Node SDK for traces (only traces: metrics stay on Prometheus, logs on
 * pino), when `config` asks for it (`tracingConfigured`) or when `exporter` is given (tests pass an
 * `InMemorySpanExporter`, exported span by span). With the configuration alone, the SDK reads the
 * standard OTEL_* variables itself: exporter and protocol, endpoint, headers, sampler, batch sizes.
 * The SDK is loaded only then, so a process that does not trace never loads it.
 *
 * Spans are made by hand (`withSpan`, `tracedRequestListener`, DatabaseService), not by
 * auto-instrumentation: the apps are ES modules, which the `require` hooks of the instrumentation
 * packages cannot patch without a loader flag on every start. Resolves to true when tracing is on.
 * Call it once per process, before the apps are created.
 */
export async function startTracing(opts: { serviceName: string; config?: TracingConfig; exporter?: SpanExporter }): Promise<boolean> {
  if (running) return true;
  if (!opts.exporter && !(opts.config && tracingConfigured(opts.config))) return false;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const spanProcessors = opts.exporter ? [new (await import('@opentelemetry/sdk-trace')).SimpleSpanProcessor({ exporter: opts.exporter })] : undefined;
  const sdk = new NodeSDK({ serviceName: opts.serviceName, spanProcessors, metricReaders: [], logRecordProcessors: [], instrumentations: [] });
  sdk.start();
  running = sdk;
  activeTracer = trace.getTracer('aaas');
  return true;
}

/** True while this process traces. The one check the hot paths make when tracing is off. */
export function isTracing(): boolean {
  return activeTracer !== null;
}

/** @internal the tracer (only while `isTracing()`). */
export function tracer(): Tracer {
  if (!activeTracer) throw new Error('tracing is off');
  return activeTracer;
}

/** Longest a stopping process waits for its last spans to be exported (ms). */
const FLUSH_TIMEOUT_MS = 3_000;

/**
 * Export the spans still buffered (a process that stops calls it last). No-op when off. Never
 * rejects, and gives up after FLUSH_TIMEOUT_MS: a collector that cannot be reached (the exporter
 * retries for seconds) must not keep the process from stopping.
 */
export async function flushTracing(): Promise<void> {
  if (!running) return;
  const provider = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } };
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    provider.getDelegate?.().forceFlush?.().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

/** Flush and stop tracing, and unregister the global tracer, context manager and propagator. Never rejects. */
export async function stopTracing(): Promise<void> {
  const sdk = running;
  if (!sdk) return;
  running = null;
  activeTracer = null;
  await sdk.shutdown().catch(() => undefined);
  trace.disable();
  context.disable();
  propagation.disable();
}
