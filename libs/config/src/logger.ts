import type { LoggerService } from '@nestjs/common';
import { pino, type Logger } from 'pino';
import type { AppConfig } from './config.js';

/** Paths pino blanks out in every line (credentials never reach a log). */
export const LOG_REDACT = ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'authorization', 'apiKey', 'token', 'secret'];

/** The process's one JSON logger (pino), level LOG_LEVEL, credentials redacted. */
export function createLogger(config: Pick<AppConfig, 'LOG_LEVEL'>, name: string): Logger {
  return pino({ level: config.LOG_LEVEL, name, redact: LOG_REDACT });
}

/**
 * Nest's logger routed into pino, so Nest's own lines (bootstrap, exceptions, every
 * `new Logger(Context)`) are the same JSON as Fastify's request logs: `{ level, time, name,
 * context, msg }`.
 */
export class NestPinoLogger implements LoggerService {
  constructor(private readonly logger: Logger) {}

  private write(level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal', message: unknown, params: unknown[]): void {
    const context = typeof params.at(-1) === 'string' ? (params.at(-1) as string) : undefined;
    const extra = params.filter((p) => p !== context);
    const fields: Record<string, unknown> = context ? { context } : {};
    if (extra.length > 0 && typeof extra[0] === 'string' && extra[0].includes('\n    at ')) fields.stack = extra[0];
    if (message instanceof Error) this.logger[level]({ ...fields, err: message }, message.message);
    else if (typeof message === 'object' && message !== null) this.logger[level]({ ...fields, ...(message as object) });
    else this.logger[level](fields, String(message));
  }

  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }
}
