export * from './errors.js';
export * from './unavailable.js';
