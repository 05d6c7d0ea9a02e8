export * from './parts.schema.js';
export * from './run-events.schema.js';
export * from './jobs.schema.js';
export * from './agent-profile.schema.js';
export * from './runtime.schema.js';
export * from './admin.schema.js';
export * from './openapi-schemas.js';
export * from './run-archive.schema.js';
