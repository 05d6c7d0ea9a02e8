import { Injectable } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { currentReader, DatabaseService, newReader, readerKeyOf, runAsReader } from '#libs/db';
import { Metrics } from '#libs/metrics';

/** HTTP methods that never write. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** JSON-RPC methods (A2A 1.0 and 0.3) that only read: a POST carrying one is not a write. */
const READ_ONLY_RPC = /^(Get|List|tasks\/(get|list|resubscribe|pushNotificationConfig\/(get|list))$|agent\/getAuthenticatedExtendedCard$)/;
/** gRPC methods (A2A 1.0 `lf.a2a.v1.A2AService`) that only read. */
const READ_ONLY_GRPC = /^(Get|List|Subscribe)/;

function isWrite(req: FastifyRequest): boolean {
  if (SAFE_METHODS.has(req.method)) return false;
  const body = req.body as { method?: unknown } | undefined;
  return !(body && typeof body === 'object' && typeof body.method === 'string' && READ_ONLY_RPC.test(body.method));
}

/**
 * Read-your-writes for the read replica (DATABASE_READ_URL; without one every method is a no-op
 * and no hook is installed). Each request runs as its caller's reader (the API key or bearer
 * token it presents, else its address), so lag-tolerant reads (DatabaseService.readQuery) see
 * the caller's own earlier writes; a request that writes has the primary's WAL position
 * remembered for its caller before its response leaves: onSend for HTTP, before the first frame
 * of a hijacked SSE response (SseHeartbeat), before the reply of a gRPC call (A2AGrpcServer).
 */
@Injectable()
export class ReadYourWrites {
  constructor(
    private readonly db: DatabaseService,
    private readonly metrics: Metrics,
  ) {}

  /**
   * Hooks of the HTTP edge (preHandler: after the body is parsed, so a JSON-RPC read is known), and
   * `aaas_db_lag_tolerant_reads_total` from DatabaseService.readStats.
   */
  install(fastify: FastifyInstance): void {
    if (!this.db.readPool) return;
    this.metrics.lagTolerantReads = () => this.db.readStats;
    fastify.addHook('preHandler', (req, _reply, done) => {
      const header = req.headers['x-api-key'];
      const credential = (Array.isArray(header) ? header[0] : header) ?? req.headers.authorization;
      runAsReader(newReader(readerKeyOf(credential, req.ip), isWrite(req)), done);
    });
    fastify.addHook('onSend', async (_req, _reply, payload) => {
      await this.remember();
      return payload;
    });
  }

  /** Run one gRPC call as its caller's reader (`credential`: its API key or bearer token). */
  runCall<T>(method: string, credential: string | undefined, address: string, fn: () => Promise<T>): Promise<T> {
    if (!this.db.readPool) return fn();
    return runAsReader(newReader(readerKeyOf(credential, address), !READ_ONLY_GRPC.test(method)), fn);
  }

  /** Remember the current request's writes for its caller, if it wrote (never throws). */
  remember(): Promise<void> {
    return this.db.rememberWrite(currentReader());
  }
}
