export * from './config.js';
export * from './config.module.js';
export { createLogger, NestPinoLogger, LOG_REDACT } from './logger.js';
