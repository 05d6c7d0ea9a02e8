export * from './errors.js';
export * from './unavailable.js';
export * from './listen-error.js';
export * from './cache.js';
export * from './end-of-turn.js';
