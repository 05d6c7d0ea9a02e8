/**
 * Telemetry — traces (OpenTelemetry), off unless configured. One trace follows a request from the
 * HTTP edge through the outbox (the job carries the W3C trace context of its `run.dispatch`
 * span) and BullMQ into the worker's `run.execute` span and the appends the execution makes.
 * Every helper costs one boolean check when tracing is off. The only lib that touches
 * `@opentelemetry/*`; others use these helpers.
 */
export { startTracing, stopTracing, flushTracing, isTracing, tracingConfigured, type TracingConfig } from './tracing.js';
export { ATTR, injectTrace, setActiveSpanAttributes, withChildSpan, withSpan, type SpanKindName, type SpanOptions, type TraceCarrier } from './spans.js';
export { nameServerSpan, tracedRequestListener } from './http-server.js';
