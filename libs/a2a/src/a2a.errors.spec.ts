import { decodeErrorInfo, decodeStatus } from '@a2a-js/sdk/errors/grpc';
import { describe, expect, it } from 'vitest';
import { AppError, RETRY_AFTER_SECONDS } from '#libs/common';
import { A2AError, toA2AError } from './a2a.errors.js';
import { jsonRpcErrorResponse } from './a2a-jsonrpc.handler.js';
import { toGrpcError } from './grpc/grpc-errors.js';
import { toRestError } from './rest/rest-errors.js';

/** A pg DatabaseError as the driver raises it. */
const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'ERROR' });
const HINT = { retryAfterSeconds: String(RETRY_AFTER_SECONDS) };

describe('an unavailable dependency, on every binding', () => {
  it.each([
    ['disk full', pgError('53100', 'could not extend file: No space left on device')],
    ['read-only', pgError('25006', 'cannot execute INSERT in a read-only transaction')],
    ['out of memory', pgError('53200', 'out of memory')],
    ['an I/O error', pgError('58030', 'could not read block')],
    ['Redis read-only', Object.assign(new Error("READONLY You can't write against a read only replica."), { name: 'ReplyError' })],
  ])('%s: InternalError marked unavailable, with the retry hint in its ErrorInfo', (_what, cause) => {
    const e = toA2AError(cause);
    expect(e).toMatchObject({ type: 'InternalError', unavailable: true, metadata: HINT });
    // the SQL message never reaches the caller
    expect(e.message).toContain('temporarily unavailable');
    expect(e.message).not.toContain(cause.message);

    expect(jsonRpcErrorResponse(7, e, '1.0')).toMatchObject({ id: 7, error: { code: -32603, message: e.message, data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'INTERNAL_ERROR', domain: 'a2a-protocol.org', metadata: HINT }] } });
    expect(jsonRpcErrorResponse(7, e, '0.3')).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32603, message: e.message } });

    const rest = toRestError(e);
    expect(rest.httpStatus).toBe(503);
    expect(rest.body.error).toMatchObject({ code: 503, status: 'UNAVAILABLE', details: [{ reason: 'INTERNAL_ERROR', metadata: HINT }] });

    const g = toGrpcError(e);
    expect(g.codeName).toBe('UNAVAILABLE');
    expect(decodeErrorInfo(decodeStatus(g.statusDetails).details[0]!.value).metadata).toEqual(HINT);
  });

  it('keeps metadata it was given beside the hint; errors that are not outages carry no hint', () => {
    expect(new A2AError('InternalError', 'keys unreadable', { unavailable: true, metadata: { issuer: 'https://i.test' } }).metadata).toEqual({ issuer: 'https://i.test', ...HINT });
    expect(toA2AError(new AppError('signing.unavailable', 'cannot sign here')).metadata).toEqual(HINT);
    for (const e of [pgError('23505', 'duplicate key'), pgError('40P01', 'deadlock detected'), pgError('22P02', 'invalid input syntax'), new TypeError('x is undefined')]) {
      expect(toA2AError(e)).toMatchObject({ type: 'InternalError', unavailable: false, message: 'internal error' });
      expect(toA2AError(e).metadata).toBeUndefined();
    }
    // classified already: an AppError keeps its meaning whatever its cause
    const dup = toA2AError(new AppError('run.duplicate_message', 'dup', { details: { messageId: 'm' }, cause: pgError('53100', 'disk full') }));
    expect(dup).toMatchObject({ type: 'InvalidParams', unavailable: false });
  });
});
