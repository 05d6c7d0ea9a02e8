import { once } from 'node:events';
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
import type { ResolvedA2AAgent } from '#libs/registry';
import { A2AAdmission, type PresentedCredentials } from '../a2a/a2a-admission.js';
import { configuredBaseUrl } from '../a2a/a2a-http.js';
import { SseHeartbeat } from '../common/sse.js';
import { ReadYourWrites } from '../common/read-your-writes.js';
import { addReflection } from './grpc-reflection.js';
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
 * Errors are the §5.4 status with `google.rpc.ErrorInfo` in `grpc-status-details-bin`
 * (`toGrpcError`); a dependency that cannot serve the call now is UNAVAILABLE with `retry-after`
 * (seconds) in the trailers, as a refusal over a limit is RESOURCE_EXHAUSTED with it. Streams: one per caller slot of MAX_STREAMS_PER_CALLER (shared with SSE),
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

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly admission: A2AAdmission,
    private readonly binding: A2AGrpcBinding,
    private readonly endpoint: GrpcEndpoint,
    private readonly metrics: Metrics,
    private readonly slots: SseHeartbeat,
    private readonly readYourWrites: ReadYourWrites,
  ) {
    this.limits = new GrpcCallLimits(config);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.GRPC_PORT === undefined || this.server) return;
    const server = new grpc.Server({
      // the same cap as an HTTP body; larger messages are RESOURCE_EXHAUSTED
      'grpc.max_receive_message_length': this.config.REQUEST_BODY_LIMIT_BYTES,
      // HTTP/2 pings keep idle streams alive through proxies, as SSE heartbeats do
      'grpc.keepalive_time_ms': this.config.SSE_HEARTBEAT_MS,
      'grpc.keepalive_timeout_ms': 20_000,
    });
    server.addService(A2AService, this.implementation());
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
    this.endpoint.address = this.config.GRPC_PUBLIC_ADDRESS ?? `${new URL(configuredBaseUrl(this.config)).hostname}:${this.port}`;
    this.health.setStatus('', 'SERVING');
    this.health.setStatus(A2A_GRPC_SERVICE, 'SERVING');
    this.log.log(`A2A gRPC listening on ${host}:${this.port} (cards: ${this.endpoint.address})`);
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
        [key, first(call.metadata, 'x-api-key') ?? first(call.metadata, 'authorization'), addressOf(call.getPeer())] as const;
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
      const { agent, ctx } = await this.admitLimited(call.request, call.metadata, call.getPeer());
      const response = await this.binding.unary(agent, key, call.request, ctx);
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
      const { agent, ctx } = await this.admitLimited(call.request, call.metadata, call.getPeer(), ac.signal);
      release = this.slots.reserve(callerKeyOf(call.metadata, call.getPeer()));
      if (!release) throw new A2AError('InvalidRequest', 'too many open streams for this caller; close one and resume with last-event-id');
      iterator = (await this.binding.stream(agent, key, call.request, ctx))[Symbol.asyncIterator]();
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
   * `admit` under the HTTP edge's limits (GrpcCallLimits): a call over a rate limit, or failing
   * authentication past its address's budget, is refused with RESOURCE_EXHAUSTED (`retry-after` in
   * the trailers); a valid credential is never refused for its address's failures.
   */
  private async admitLimited(request: { tenant?: string }, md: grpc.Metadata, peer: string, signal?: AbortSignal): Promise<{ agent: ResolvedA2AAgent; ctx: A2AGrpcCall }> {
    const address = addressOf(peer);
    const presented = first(md, 'x-api-key') ?? first(md, 'authorization');
    const prefix = credentialsOf(md).apiKey ? /^aaas_([A-Za-z0-9]{8})_/.exec(credentialsOf(md).apiKey!)?.[1] : undefined;
    const refused = this.limits.admit(address, presented, prefix);
    if (refused) throw new LimitExceeded(refused);
    try {
      return await this.admit(request, md, signal);
    } catch (e) {
      if (toA2AError(e).type === 'Unauthenticated') {
        const past = this.limits.failedAuthentication(address, presented);
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
      const metadata = new grpc.Metadata();
      metadata.set('retry-after', String(e.refusal.retryAfterSeconds));
      return { status: Object.assign(new Error(e.message), { code: grpc.status.RESOURCE_EXHAUSTED, details: e.message, metadata }), codeName: 'RESOURCE_EXHAUSTED' };
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

/** A call refused by GrpcCallLimits (RESOURCE_EXHAUSTED). */
class LimitExceeded extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}

/** The client address of a grpc-js peer (`ipv4:1.2.3.4:5678`, `ipv6:[::1]:5678`). */
function addressOf(peer: string): string {
  return peer.replace(/^ipv[46]:/, '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
}

/** Credentials in metadata, read as the HTTP bindings read their headers (`x-api-key`, else a bearer). */
function credentialsOf(md: grpc.Metadata): PresentedCredentials {
  const auth = first(md, 'authorization');
  const bearer = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1] : undefined;
  const x = first(md, 'x-api-key')?.trim();
  return { apiKey: x ? x : bearer, bearer };
}

/** The stream-slot key of a caller: its API key's prefix (never the secret), else its address. */
function callerKeyOf(md: grpc.Metadata, peer: string): string {
  const key = credentialsOf(md).apiKey;
  const prefix = key ? /^aaas_([A-Za-z0-9]{8})_/.exec(key)?.[1] : undefined;
  return prefix ? `key:${prefix}` : `ip:${peer.replace(/^ipv[46]:/, '').replace(/:\d+$/, '')}`;
}

function first(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return v === undefined ? undefined : String(v);
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
