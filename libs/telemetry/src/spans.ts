import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { isTracing, tracer } from './tracing.js';

/** Attribute names of our own (beside the OpenTelemetry semantic conventions). */
export const ATTR = {
  /** The A2A method called (`SendMessage`, `message/send`, ...). */
  A2A_OPERATION: 'a2a.operation',
  ORG_ID: 'aaas.org_id',
  AGENT_ID: 'aaas.agent_id',
  RUN_ID: 'aaas.run_id',
  /** Why a run executes: the job's trigger (`created`, `continued`, ...). */
  TRIGGER: 'aaas.trigger',
} as const;

/** W3C Trace Context of the span a job was dispatched under (carried inside the job). */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';
const KINDS: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

export interface SpanOptions {
  kind?: SpanKindName;
  attributes?: Attributes;
  /** Parent from another process (a job's `trace`); default: the active span. */
  parent?: TraceCarrier;
}

/**
 * Run `fn` inside a new span `name`, active for everything `fn` awaits (their spans are its
 * children). A rejection is recorded on the span (status error) and rethrown. When tracing is
 * off, `fn(undefined)` is all that happens.
 */
export function withSpan<R>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => Promise<R>): Promise<R> {
  if (!isTracing()) return fn(undefined);
  const parent = opts.parent ? extract(opts.parent) : context.active();
  return tracer().startActiveSpan(name, { kind: KINDS[opts.kind ?? 'internal'], attributes: opts.attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      failSpan(span, e);
      throw e;
    } finally {
      span.end();
    }
  });
}

/**
 * Like withSpan, but only inside a trace: with no active span (a background poll that found nothing
 * to do — the outbox relay, the sweeper, the push loop) `fn(undefined)` runs and no span is made,
 * so an idle process exports no traces. Used for database statements and transactions.
 */
export function withChildSpan<R>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => Promise<R>): Promise<R> {
  if (!isTracing() || trace.getSpan(context.active()) === undefined) return fn(undefined);
  return withSpan(name, opts, fn);
}

/** Set attributes on the active span (the request's, in an API handler). No-op when off. */
export function setActiveSpanAttributes(attributes: Attributes): void {
  if (!isTracing()) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * The job with `trace` set to a `run.dispatch` span (kind producer, child of the active span):
 * the worker's `run.execute` span continues that trace as its child. Called where a dispatch is
 * recorded (the outbox row), in the caller's context. Returns `job` itself when tracing is off,
 * so no job carries a `trace` then.
 */
export function injectTrace<T extends { orgId: string; runId: string; trigger?: string; context?: { agentId?: string } }>(job: T): T {
  if (!isTracing()) return job;
  const span = tracer().startSpan('run.dispatch', {
    kind: SpanKind.PRODUCER,
    attributes: {
      [ATTR.ORG_ID]: job.orgId,
      [ATTR.RUN_ID]: job.runId,
      ...(job.context?.agentId ? { [ATTR.AGENT_ID]: job.context.agentId } : {}),
      ...(job.trigger ? { [ATTR.TRIGGER]: job.trigger } : {}),
      'messaging.system': 'bullmq',
      'messaging.operation.type': 'create',
      'messaging.destination.name': 'run-execution',
    },
  });
  const carrier: Partial<TraceCarrier> = {};
  propagation.inject(trace.setSpan(context.active(), span), carrier);
  span.end();
  if (!carrier.traceparent) return job;
  return { ...job, trace: { traceparent: carrier.traceparent, ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}) } };
}

function extract(carrier: TraceCarrier): ReturnType<typeof context.active> {
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** @internal mark a span failed by `e` (name and message only: no stack, no SQL, no values). */
export function failSpan(span: Span, e: unknown): void {
  const err = e instanceof Error ? e : new Error(String(e));
  span.recordException({ name: err.name, message: err.message });
  span.setStatus({ code: SpanStatusCode.ERROR, message: err.message.slice(0, 200) });
}
