import { once } from 'node:events';
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import * as grpc from '@grpc/grpc-js';
import health from 'grpc-health-check';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import {
  A2AError,
  A2AGrpcBinding,
  A2A_GRPC_METHODS,
  describeCause,
  GRPC_STATUS_DETAILS_KEY,
  GrpcEndpoint,
  negotiateVersion,
  parseGrpcTenant,
  toA2AError,
  toGrpcError,
  type A2AGrpcCall,
  type A2AGrpcMethodKey,
  type GrpcCodeName,
} from '#libs/a2a';
import { RETRY_AFTER_SECONDS } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { Metrics } from '#libs/metrics';
import { ApiKeyService, type ResolvedA2AAgent } from '#libs/registry';
import { A2AAdmission } from '../a2a/a2a-admission.js';
import { configuredBaseUrl } from '../a2a/a2a-http.js';
import { checkJsonValue, MAX_JSON_DEPTH } from '../common/malformed-json.js';
import { SseHeartbeat } from '../common/sse.js';
import { ReadYourWrites } from '../common/read-your-writes.js';
import { addReflection } from './grpc-reflection.js';
import { credentialsOf, first, GrpcCallGate, rateLimited, type GrpcCallTicket } from './grpc-call-gate.js';
import { GrpcCallLimits, type Refusal } from './grpc-limits.js';

/** The service name health checks report on (besides the server-wide `""`). */
export const A2A_GRPC_SERVICE = 'lf.a2a.v1.A2AService';

/** How long a stop waits for unary calls in flight before cutting them off (ms). */
const SHUTDOWN_GRACE_MS = 5_000;

/**
 * The A2A gRPC binding (A2A v1.0 §10): one listener per API process on GRPC_PORT (off when
 * unset), serving `lf.a2a.v1.A2AService` (every RPC; codecs of `@a2a-js/sdk/server/grpc`) and
 * `grpc.health.v1.Health`, with server reflection (grpc.reflection.v1 and v1alpha, describing
 * libs/a2a/proto/a2a.proto; `grpcurl -plaintext host:port list`). An edge only: per call it
 * 1. routes by the request's `tenant` = `<org slug>/<agent slug>` (InvalidParams otherwise);
 * 2. admits like the HTTP bindings (A2AAdmission: agent published and serving `GRPC` → else
 *    NOT_FOUND; credentials from metadata `authorization: Bearer <key|JWT>` or `x-api-key` →
 *    UNAUTHENTICATED / PERMISSION_DENIED);
 * 3. checks metadata `a2a-version` (absent = 1.0: the `lf.a2a.v1` service exists in 1.0 only;
 *    anything else → VersionNotSupported) and negotiates `a2a-extensions` (activated ones are
 *    answered in the `a2a-extensions` response header);
 * 4. hands the decoded request to A2AGrpcBinding (the same v1.0 method table as JSON-RPC).
 * Before any of that, while its message has not been read, a call passes GrpcCallGate (caps on open
 * calls and on calls without a valid API key, the API key authenticated from the metadata, the
 * rate limits, a smaller message limit before authentication, the receive deadline; docs/deploy.md
 * "The gRPC listener"). A request that does not decode (malformed protobuf) is ParseError, one
 * holding what the HTTP edge refuses in JSON (a NUL, an unpaired surrogate, nesting deeper than
 * MAX_JSON_DEPTH) InvalidParams naming the field: INVALID_ARGUMENT, before anything is looked up.
 * Errors are the §5.4 status with `google.rpc.ErrorInfo` in `grpc-status-details-bin`
 * (`toGrpcError`, its texts bounded); a dependency that cannot serve the call now is UNAVAILABLE with `retry-after`
 * (seconds) in the trailers, as a refusal over a rate limit is RESOURCE_EXHAUSTED with it. Streams: one per caller slot of MAX_STREAMS_PER_CALLER (shared with SSE; past it RESOURCE_EXHAUSTED),
 * written with backpressure (`drain`), ended when the client cancels; SubscribeToTask resumes
 * after request metadata `last-event-id` (or `a2a-cursor`), each streamed event carrying its id
 * in `metadata.eventId`. Metrics: aaas_grpc_requests_total{method,code},
 * aaas_grpc_request_duration_seconds{method}.
 */
@Injectable()
export class A2AGrpcServer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger('A2AGrpc');
  private server: grpc.Server | null = null;
  private readonly health = new health.HealthImplementation({ '': 'NOT_SERVING', [A2A_GRPC_SERVICE]: 'NOT_SERVING' });
  /** Aborted on stop: every open stream's signal. */
  private readonly streams = new Set<AbortController>();
  /** The bound port once listening (GRPC_PORT=0 picks a free one). */
  port: number | null = null;
  private readonly limits: GrpcCallLimits;
  /** What a call passes before its message is read (exposed for tests: its counts). */
  readonly gate: GrpcCallGate;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly admission: A2AAdmission,
    private readonly binding: A2AGrpcBinding,
    private readonly endpoint: GrpcEndpoint,
    private readonly metrics: Metrics,
    private readonly slots: SseHeartbeat,
    private readonly readYourWrites: ReadYourWrites,
    keys: ApiKeyService,
  ) {
    this.limits = new GrpcCallLimits(config);
    this.gate = new GrpcCallGate(config, keys, this.limits, (m) => this.log.warn(m));
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.GRPC_PORT === undefined || this.server) return;
    const server = new grpc.Server(this.serverOptions());
    server.addService(tolerantDecoding(A2AService), this.implementation());
    this.health.addToServer(server);
    if (!addReflection(server)) this.log.warn('gRPC server reflection off: libs/a2a/proto/a2a.proto is not shipped beside the app');
    const host = this.config.HOST;
    const target = `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${this.config.GRPC_PORT}`;
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(new Error(`cannot listen for gRPC on ${target} (GRPC_PORT; set another port): ${err.message}`)) : resolve(port),
      ),
    );
    this.server = server;
    drainUnserved(server, (m) => this.log.warn(m));
    this.endpoint.address = this.config.GRPC_PUBLIC_ADDRESS ?? `${new URL(configuredBaseUrl(this.config)).hostname}:${this.port}`;
    this.health.setStatus('', 'SERVING');
    this.health.setStatus(A2A_GRPC_SERVICE, 'SERVING');
    this.log.log(`A2A gRPC listening on ${host}:${this.port} (cards: ${this.endpoint.address})`);
  }

  /**
   * The listener's bounds (docs/deploy.md "The gRPC listener"): streams per connection, the
   * receive limit of a call before authentication (GrpcCallGate raises it for a call whose API key
   * authenticated), keep-alive pings, idle and old connections closed, and the gate as the one
   * interceptor.
   */
  private serverOptions(): grpc.ServerOptions {
    const c = this.config;
    return {
      'grpc.max_concurrent_streams': c.GRPC_MAX_CONCURRENT_STREAMS,
      // larger messages are RESOURCE_EXHAUSTED at their length prefix, unread
      'grpc.max_receive_message_length': this.gate.preauthMessageBytes,
      // HTTP/2 pings keep idle streams alive through proxies, as SSE heartbeats do; a peer that
      // does not answer one in 20 s is gone
      'grpc.keepalive_time_ms': c.SSE_HEARTBEAT_MS,
      'grpc.keepalive_timeout_ms': 20_000,
      ...(c.GRPC_MAX_CONNECTION_IDLE_MS > 0 && { 'grpc.max_connection_idle_ms': c.GRPC_MAX_CONNECTION_IDLE_MS }),
      ...(c.GRPC_MAX_CONNECTION_AGE_MS > 0 && { 'grpc.max_connection_age_ms': c.GRPC_MAX_CONNECTION_AGE_MS, 'grpc.max_connection_age_grace_ms': c.A2A_BLOCKING_TIMEOUT_MS + 5_000 }),
      // no channelz service is served: its per-connection and per-call bookkeeping is not kept
      'grpc.enable_channelz': 0,
      interceptors: [this.gate.interceptor],
    };
  }

  /** Stop first (before the database closes): refuse new calls, end streams, give unary calls a grace period. */
  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    this.endpoint.address = null;
    this.health.setStatus('', 'NOT_SERVING');
    this.health.setStatus(A2A_GRPC_SERVICE, 'NOT_SERVING');
    for (const ac of this.streams) ac.abort();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, SHUTDOWN_GRACE_MS);
      timer.unref();
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** One handler per RPC of the service definition, unary or server-streaming as a2a.proto says. */
  private implementation(): grpc.UntypedServiceImplementation {
    const impl: grpc.UntypedServiceImplementation = {};
    for (const key of Object.keys(A2A_GRPC_METHODS) as A2AGrpcMethodKey[]) {
      // each call as its caller's reader (read-your-writes on the read replica, as on the HTTP edge)
      const reader = (call: grpc.ServerUnaryCall<any, unknown> | grpc.ServerWritableStream<any, unknown>) =>
        [key, first(call.metadata, 'x-api-key') ?? first(call.metadata, 'authorization'), this.gate.ticketOf(call.metadata)?.address ?? 'unknown'] as const;
      impl[key] = A2A_GRPC_METHODS[key].streaming
        ? (call: grpc.ServerWritableStream<any, unknown>) => void this.readYourWrites.runCall(...reader(call), () => this.serverStream(key, call))
        : (call: grpc.ServerUnaryCall<any, unknown>, callback: grpc.sendUnaryData<unknown>) => void this.readYourWrites.runCall(...reader(call), () => this.unary(key, call, callback));
    }
    return impl;
  }

  private async unary(key: A2AGrpcMethodKey, call: grpc.ServerUnaryCall<{ tenant?: string }, unknown>, callback: grpc.sendUnaryData<unknown>): Promise<void> {
    const started = performance.now();
    let code: GrpcCodeName = 'OK';
    try {
      const request = checkedRequest(key, call.request, call.metadata);
      const { agent, ctx } = await this.admitLimited(request, call.metadata);
      const response = await this.binding.unary(agent, key, request, ctx);
      await this.readYourWrites.remember();
      call.sendMetadata(responseMetadata(ctx));
      callback(null, response);
    } catch (e) {
      const { status, codeName } = this.errorStatus(e);
      code = codeName;
      callback(status);
    } finally {
      this.record(key, code, started);
    }
  }

  private async serverStream(key: A2AGrpcMethodKey, call: grpc.ServerWritableStream<{ tenant?: string }, unknown>): Promise<void> {
    const started = performance.now();
    const ac = new AbortController();
    const abort = () => ac.abort();
    call.once('cancelled', abort);
    this.streams.add(ac);
    let code: GrpcCodeName = 'OK';
    let release: (() => void) | null = null;
    let iterator: AsyncIterator<unknown> | undefined;
    try {
      const request = checkedRequest(key, call.request, call.metadata);
      const { agent, ctx } = await this.admitLimited(request, call.metadata, ac.signal);
      release = this.slots.reserve(callerKeyOf(ticketOf(this.gate, call.metadata)));
      if (!release) throw new LimitExceeded({ message: `too many open streams for this caller (MAX_STREAMS_PER_CALLER ${this.config.MAX_STREAMS_PER_CALLER}); close one and resume with last-event-id` });
      iterator = (await this.binding.stream(agent, key, request, ctx))[Symbol.asyncIterator]();
      let next = await iterator.next();
      await this.readYourWrites.remember();
      call.sendMetadata(responseMetadata(ctx));
      while (!next.done && !ac.signal.aborted) {
        if (!call.write(next.value)) await drained(call, ac.signal);
        if (ac.signal.aborted) break;
        next = await iterator.next();
      }
      if (ac.signal.aborted) code = 'CANCELLED';
      call.end();
    } catch (e) {
      if (ac.signal.aborted) {
        code = 'CANCELLED';
        call.end();
      } else {
        const { status, codeName } = this.errorStatus(e);
        code = codeName;
        // grpc-js ends the call with this status (the SDK's gRPC server does the same)
        call.emit('error', status);
      }
    } finally {
      ac.abort();
      this.streams.delete(ac);
      call.off('cancelled', abort);
      release?.();
      await iterator?.return?.().catch(() => undefined);
      this.record(key, code, started);
    }
  }

  /**
   * `admit`, after GrpcCallGate counted the call (per authenticated key, else per address): a call
   * failing authentication past its address's budget is refused with RESOURCE_EXHAUSTED
   * (`retry-after` in the trailers) instead of UNAUTHENTICATED; a valid credential is never refused
   * for its address's failures. Once admitted, the call no longer counts as one before authentication.
   */
  private async admitLimited(request: { tenant?: string }, md: grpc.Metadata, signal?: AbortSignal): Promise<{ agent: ResolvedA2AAgent; ctx: A2AGrpcCall }> {
    const ticket = ticketOf(this.gate, md);
    try {
      const admitted = await this.admit(request, md, signal);
      ticket.admitted();
      return admitted;
    } catch (e) {
      if (toA2AError(e).type === 'Unauthenticated') {
        const past = this.limits.failedAuthentication(ticket.address, ticket.credential);
        if (past) throw new LimitExceeded(past);
      }
      throw e;
    }
  }

  /** Steps 1–3 of the class comment: the agent and what the binding needs to know about the call. */
  private async admit(request: { tenant?: string }, md: grpc.Metadata, signal?: AbortSignal): Promise<{ agent: ResolvedA2AAgent; ctx: A2AGrpcCall }> {
    const { org, agent: slug } = parseGrpcTenant(request?.tenant);
    const presented = credentialsOf(md);
    const { agent, caller } = await this.admission.admitPresented(org, slug, 'GRPC', presented);
    const version = first(md, 'a2a-version');
    if (version !== undefined && version.trim() !== '') {
      let negotiated: string | undefined;
      try {
        negotiated = negotiateVersion(version);
      } catch {
        negotiated = undefined;
      }
      if (negotiated !== '1.0') {
        throw new A2AError('VersionNotSupported', `A2A-Version ${version.trim().slice(0, 32)} is not supported by the gRPC binding, which serves A2A 1.0 only`, {
          metadata: { requested: version.trim().slice(0, 32), supported: '1.0' },
        });
      }
    }
    const extHeader = md.get('a2a-extensions').concat(md.get('x-a2a-extensions')).map(String);
    const extensions = this.admission.negotiateValue(agent, extHeader.length > 0 ? extHeader.join(',') : undefined);
    const base = configuredBaseUrl(this.config);
    return {
      agent,
      ctx: {
        caller,
        extensions,
        resume: { lastEventId: first(md, 'last-event-id'), token: first(md, 'a2a-cursor') },
        ...(signal ? { signal } : {}),
        extendedCard: (v) => this.admission.extendedCardFor(agent, presented, base, v),
      },
    };
  }

  /** The gRPC status of a failed call; internal errors are logged (never sent). */
  private errorStatus(e: unknown): { status: grpc.ServerErrorResponse; codeName: GrpcCodeName } {
    if (e instanceof LimitExceeded) {
      const { code, details, metadata } = e.refusal.retryAfterSeconds === undefined ? { code: grpc.status.RESOURCE_EXHAUSTED, details: e.message, metadata: new grpc.Metadata() } : rateLimited(e.refusal as Refusal);
      return { status: Object.assign(new Error(e.message), { code, details, metadata: metadata ?? new grpc.Metadata() }), codeName: 'RESOURCE_EXHAUSTED' };
    }
    const err = toA2AError(e);
    if (err.unavailable) this.log.warn(`unavailable: ${err.message} (${describeCause(err.cause)})`);
    else if (err.type === 'InternalError') {
      const cause = err.cause ?? err;
      this.log.error(cause instanceof Error ? (cause.stack ?? cause.message) : String(cause));
    }
    const g = toGrpcError(err);
    const metadata = new grpc.Metadata();
    metadata.set(GRPC_STATUS_DETAILS_KEY, g.statusDetails);
    // UNAVAILABLE says "retry"; `retry-after` says when, as on RESOURCE_EXHAUSTED and the HTTP bindings' 503
    if (err.unavailable) metadata.set('retry-after', String(RETRY_AFTER_SECONDS));
    return { status: Object.assign(new Error(g.message), { code: g.code, details: g.message, metadata }), codeName: g.codeName };
  }

  private record(key: A2AGrpcMethodKey, code: GrpcCodeName, started: number): void {
    const method = A2A_GRPC_METHODS[key].rpc;
    this.metrics.grpcRequests.inc({ method, code });
    this.metrics.grpcDuration.observe({ method }, (performance.now() - started) / 1000);
  }
}

/**
 * grpc-js answers a call it does not serve (an unknown method: UNIMPLEMENTED; not
 * `application/grpc`: HTTP 415) without reading its body, and Node counts a body nobody reads
 * against its connection's memory: past it the connection's new streams are refused
 * (ENHANCE_YOUR_CALM) and it is closed (GOAWAY INTERNAL_ERROR), which a client calling a missing
 * method a few hundred times with large messages met. Such a stream's body is drained (discarded)
 * instead. grpc-js 1.14 keeps its HTTP/2 servers and its handlers in private fields: without them
 * nothing is done (said once in the log).
 */
function drainUnserved(server: grpc.Server, warn: (message: string) => void): void {
  const internals = server as unknown as { http2Servers?: unknown; handlers?: unknown };
  const { http2Servers, handlers } = internals;
  if (!(http2Servers instanceof Map) || !(handlers instanceof Map)) {
    warn('this grpc-js keeps its HTTP/2 servers elsewhere: bodies of calls to unknown methods are not drained');
    return;
  }
  for (const h2 of http2Servers.keys() as Iterable<Http2Server>) {
    h2.prependListener('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      const path = headers[':path'];
      const type = headers['content-type'];
      if (typeof path !== 'string' || !handlers.has(path) || typeof type !== 'string' || !type.startsWith('application/grpc')) stream.resume();
    });
  }
}

/** A call refused over a limit (RESOURCE_EXHAUSTED; with `retry-after` when the limit says when). */
class LimitExceeded extends Error {
  constructor(readonly refusal: { message: string; retryAfterSeconds?: number }) {
    super(refusal.message);
  }
}

/** A request message the SDK's codec could not decode: answered ParseError (INVALID_ARGUMENT) by the handler. */
class MalformedRequest {
  constructor(readonly reason: string) {}
}

/**
 * The service definition with decoders that never throw: grpc-js answers a throwing decoder with
 * INTERNAL, but a message that is not the method's protobuf is the client's fault. What does not
 * decode (truncated, wrong wire types, nesting past the decoder's stack) becomes a MalformedRequest.
 */
function tolerantDecoding(service: typeof A2AService): grpc.ServiceDefinition {
  const tolerant: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, def] of Object.entries(service as unknown as grpc.ServiceDefinition)) {
    tolerant[name] = {
      ...def,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return def.requestDeserialize(bytes);
        } catch (e) {
          return new MalformedRequest(e instanceof RangeError && /call stack/i.test(e.message) ? 'nested too deeply' : e instanceof Error ? e.message : String(e));
        }
      },
    };
  }
  return tolerant;
}

/**
 * The decoded request, refused as the HTTP edge refuses a JSON body PostgreSQL cannot store:
 * ParseError when it did not decode; InvalidParams naming the field for a string (or a metadata
 * value the call reads) with a NUL or an unpaired surrogate, or nesting deeper than MAX_JSON_DEPTH.
 */
function checkedRequest(key: A2AGrpcMethodKey, request: unknown, md: grpc.Metadata): { tenant?: string } {
  const rpc = A2A_GRPC_METHODS[key];
  if (request instanceof MalformedRequest) {
    throw new A2AError('ParseError', `the request is not a valid ${rpc.rpc} request message (protobuf): ${request.reason.slice(0, 200)}`);
  }
  let json: unknown;
  try {
    json = rpc.request.toJSON((request ?? {}) as never);
  } catch {
    throw new A2AError('InvalidParams', `the request message is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const bad = checkJsonValue(json);
  if (bad) throw new A2AError('InvalidParams', `${bad.path || 'the request'}: ${bad.reason}`, { metadata: { field: bad.path.slice(0, 200) } });
  for (const name of ['a2a-version', 'a2a-extensions', 'x-a2a-extensions', 'last-event-id', 'a2a-cursor']) {
    for (const v of md.get(name)) {
      if (typeof v === 'string' && checkJsonValue(v)) throw new A2AError('InvalidParams', `metadata ${name}: contains a NUL character or an unpaired surrogate`, { metadata: { field: name } });
    }
  }
  return (request ?? {}) as { tenant?: string };
}

/** The gate's ticket of a call (every call the handler sees passed the gate, which set it). */
function ticketOf(gate: GrpcCallGate, md: grpc.Metadata): GrpcCallTicket {
  const ticket = gate.ticketOf(md);
  if (!ticket) throw new A2AError('InternalError', 'a gRPC call reached its handler without passing the gate');
  return ticket;
}

/** The stream-slot key of a caller: its API key's prefix (never the secret) once the key authenticated, else its address. */
function callerKeyOf(ticket: GrpcCallTicket): string {
  return ticket.keyPrefix ? `key:${ticket.keyPrefix}` : `ip:${ticket.address}`;
}

/** Response headers: the extensions the call activated (`a2a-extensions`), as the HTTP bindings answer them. */
function responseMetadata(ctx: A2AGrpcCall): grpc.Metadata {
  const md = new grpc.Metadata();
  if (ctx.extensions && ctx.extensions.activated.length > 0) md.set('a2a-extensions', ctx.extensions.activated.join(', '));
  return md;
}

/** Until the stream can take more (`drain`) or the call ends. */
async function drained(call: grpc.ServerWritableStream<unknown, unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  const ac = new AbortController();
  const stop = () => ac.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    await once(call, 'drain', { signal: ac.signal });
  } catch {
    // aborted: the caller went away or the server stops
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
