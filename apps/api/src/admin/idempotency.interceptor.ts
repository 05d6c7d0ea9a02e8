import { createHash } from 'node:crypto';
import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import canonicalize from 'canonicalize';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { catchError, from, mergeMap, type Observable, of, throwError } from 'rxjs';
import { AppError } from '#libs/common';
import { isMalformedJson } from '../common/malformed-json.js';
import { principalOf } from './admin-auth.guard.js';
import { IDEMPOTENCY_PENDING, IdempotencyRepository } from './idempotency.repository.js';

/** A record older than this is forgotten: the key may be used again for a new request. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/** A pending record older than this is taken to be abandoned (its process died). */
export const IDEMPOTENCY_ABANDONED_MS = 60_000;
/** How long a duplicate waits for the original request before answering 409. */
export const IDEMPOTENCY_WAIT_MS = 5_000;

const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** sha256 of method, path and the RFC 8785 canonical JSON of the body. */
export function requestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${path}\n${canonicalize(body ?? null) ?? 'null'}`)
    .digest('hex');
}

/** A copy of a response body with every API key secret (a `key` property holding one) set to null. */
export function withoutSecrets(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(withoutSecrets);
  if (body === null || typeof body !== 'object') return body;
  return Object.fromEntries(
    Object.entries(body).map(([k, v]) => [k, k === 'key' && typeof v === 'string' && v.startsWith('aaas_') ? null : withoutSecrets(v)]),
  );
}

/**
 * `Idempotency-Key` for admin POSTs that create things. The first request with a key claims a
 * record (org, key); when it succeeds (2xx) its status and body are stored, and a later request
 * with the same key and the same method + path + canonical body gets that response again with no
 * second effect. The same key with another request is 422 `idempotency.mismatch`. A duplicate
 * arriving while the first one runs waits for it (up to IDEMPOTENCY_WAIT_MS, then 409
 * `idempotency.in_progress`). A failed request leaves no record, so it can be retried.
 * Records are kept IDEMPOTENCY_RETENTION_MS. API key secrets are never stored: a replay of a
 * key-creating request returns the key's id, prefix and scopes with `key: null` (a caller that
 * lost the first response revokes that key and creates another).
 * Needs AdminAuthGuard before it (records are scoped by the caller's org).
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(private readonly records: IdempotencyRepository) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const reply = ctx.switchToHttp().getResponse<FastifyReply>();
    const header = req.headers['idempotency-key'];
    if (header === undefined) return next.handle();
    const key = Array.isArray(header) ? header[0] ?? '' : header;
    if (!KEY_RE.test(key)) {
      throw new AppError('request.invalid', 'Idempotency-Key must be 1..255 visible ASCII characters', {
        details: { issues: [{ path: 'headers.idempotency-key', message: 'invalid Idempotency-Key' }] },
      });
    }
    // The validation pipe answers a malformed body; nothing to record for it.
    if (isMalformedJson(req.body)) return next.handle();
    const { orgId } = principalOf(req);
    const hash = requestHash(req.method, req.url.split('?')[0]!, req.body);

    return from(this.begin(orgId, key, hash)).pipe(
      mergeMap((replay) => {
        if (replay) {
          void reply.status(replay.statusCode).header('idempotent-replayed', 'true');
          return of(JSON.parse(replay.body) as unknown);
        }
        return next.handle().pipe(
          mergeMap(async (body: unknown) => {
            const status = reply.statusCode;
            if (status >= 200 && status < 300) await this.records.complete(orgId, key, status, JSON.stringify(withoutSecrets(body ?? null)));
            else await this.records.release(orgId, key);
            return body;
          }),
          catchError((e: unknown) => from(this.records.release(orgId, key)).pipe(mergeMap(() => throwError(() => e)))),
        );
      }),
    );
  }

  /** Claim the key (null: run the request) or return the stored response to replay. */
  private async begin(orgId: string, key: string, hash: string): Promise<{ statusCode: number; body: string } | null> {
    const deadline = Date.now() + IDEMPOTENCY_WAIT_MS;
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      if (await this.records.claim(orgId, key, hash)) return null;
      const record = await this.records.find(orgId, key);
      if (!record) continue; // released meanwhile: claim again
      const age = Date.now() - record.createdAt.getTime();
      if (age > IDEMPOTENCY_RETENTION_MS || (record.statusCode === IDEMPOTENCY_PENDING && age > IDEMPOTENCY_ABANDONED_MS)) {
        // delete exactly the record seen (created_at has millisecond precision)
        await this.records.expire(orgId, key, new Date(record.createdAt.getTime() + 1));
        continue;
      }
      if (record.requestHash !== hash) {
        throw new AppError('idempotency.mismatch', 'this Idempotency-Key was used with a different request', { details: { idempotencyKey: key } });
      }
      if (record.statusCode !== IDEMPOTENCY_PENDING && record.response !== null) return { statusCode: record.statusCode, body: record.response };
      if (Date.now() >= deadline) {
        throw new AppError('idempotency.in_progress', 'a request with this Idempotency-Key is still being processed; retry later', { details: { idempotencyKey: key } });
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
