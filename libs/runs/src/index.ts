export * from './run-state.js';
export * from './event-log.repository.js';
export * from './run.repository.js';
export * from './run-notifier.js';
export * from './run-dispatcher.js';
export * from './run.service.js';
export * from './runs.module.js';
export * from './run-stream.js';
