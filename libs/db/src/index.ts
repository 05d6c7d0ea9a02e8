export * from './database.service.js';
export * from './db.module.js';
export { DatabaseHealth, checkSchema, shippedMigrations, type SchemaStatus } from './schema.health.js';
export { Prisma } from './generated/prisma/client.js';
export type { PrismaClient } from './generated/prisma/client.js';
export { currentReader, newReader, readerKeyOf, runAsReader, type ReaderState } from './read-routing.js';
