/**
 * Metrics — the process's Prometheus registry (prom-client) and the named series every lib
 * records into. Bounded labels only (never an id).
 */
export { Metrics } from './metrics.js';
export { MetricsModule } from './metrics.module.js';
