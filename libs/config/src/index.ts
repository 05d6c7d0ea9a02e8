export * from './config.js';
export * from './config.module.js';
