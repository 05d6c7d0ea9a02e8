import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { AppError, ERROR_CODES, RETRY_AFTER_SECONDS, invalidRequest, isDependencyUnavailable, serviceUnavailable } from '#libs/common';
import { edgeErrorFor, sendEdgeError } from './edge-errors.js';

/**
 * Admin API error shape: `{ error: { code, message, details }, requestId }` with the HTTP status
 * of the code (libs/common/src/errors.ts). Unknown errors become `internal` (500) and are logged;
 * their message, stack and SQL never reach the client. A2A controllers answer their own errors
 * in protocol form and never reach this filter.
 */
@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  private readonly log = new Logger('HTTP');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const req = http.getRequest<FastifyRequest>();
    // readiness (terminus) answers 503 with its own report of each check
    if (exception instanceof HttpException && exception.getStatus() === 503 && typeof exception.getResponse() === 'object') {
      void reply.status(503).header('content-type', 'application/json; charset=utf-8').send(exception.getResponse());
      return;
    }
    // Fastify's own errors (body too large, content type, timeouts) in the surface's shape
    const edge =
      exception instanceof HttpException
        ? edgeErrorFor({ statusCode: exception.getStatus() })
        : typeof exception === 'object' && exception !== null
          ? edgeErrorFor(exception as { code?: string; statusCode?: number })
          : null;
    if (edge && !(exception instanceof AppError)) {
      void sendEdgeError(req, reply, edge.status, edge.a2a, edge.admin);
      return;
    }
    const { status, body } = toErrorBody(exception, this.log);
    if (status === 503) void reply.header('retry-after', String(RETRY_AFTER_SECONDS));
    void reply.status(status).header('content-type', 'application/json; charset=utf-8').send({ ...body, requestId: req.id });
  }
}

export function toErrorBody(exception: unknown, log?: Logger): { status: number; body: { error: { code: string; message: string; details?: unknown } } } {
  let err: AppError;
  if (exception instanceof AppError) err = exception;
  else if (exception instanceof ZodError) err = invalidRequest(exception.issues);
  else if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const code = status === 404 ? 'route.not_found' : status === 415 ? 'request.unsupported_media_type' : status === 400 ? 'request.invalid' : status === 413 ? 'request.too_large' : status === 401 ? 'auth.missing_credentials' : status === 403 ? 'auth.forbidden' : 'internal';
    const response = exception.getResponse();
    const details = typeof response === 'object' && response && 'issues' in response ? { issues: (response as { issues: unknown }).issues } : undefined;
    return { status, body: { error: { code, message: status >= 500 ? 'internal error' : exception.message, ...(details ? { details } : {}) } } };
  } else if (isDependencyUnavailable(exception)) {
    log?.warn(`database unavailable: ${exception instanceof Error ? exception.message : String(exception)}`);
    err = serviceUnavailable(exception);
  } else {
    log?.error(exception instanceof Error ? exception.stack ?? exception.message : String(exception));
    err = new AppError('internal', 'internal error');
  }
  if (err.code === 'internal' && exception instanceof AppError) log?.error(err.stack ?? err.message);
  const status = ERROR_CODES[err.code].httpStatus;
  return { status, body: { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } } };
}
