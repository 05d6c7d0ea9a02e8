import { createRequire } from 'node:module';
import { Samples } from './stats.js';

// autocannon is CommonJS and ships no types (no @types/autocannon installed): load it through
// createRequire and describe the small part of its programmatic API used here.
const require = createRequire(import.meta.url);

interface AutocannonHistogram {
  average: number;
  mean: number;
  stddev: number;
  min: number;
  max: number;
  total: number;
  p50: number;
  p90: number;
  p99: number;
  p99_9: number;
}
interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (req: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
}
interface AutocannonOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  requests?: AutocannonRequest[];
  connections?: number;
  duration?: number;
  pipelining?: number;
  timeout?: number;
  overallRate?: number;
  verifyBody?: (body: string) => boolean;
  title?: string;
}
interface AutocannonResult {
  requests: AutocannonHistogram;
  latency: AutocannonHistogram;
  throughput: AutocannonHistogram;
  duration: number;
  errors: number;
  timeouts: number;
  mismatches: number;
  non2xx: number;
  statusCodeStats?: Record<string, { count: number }>;
}
interface AutocannonInstance extends Promise<AutocannonResult> {
  stop(): void;
  /** Per response; `responseTimeMs` is a float from process.hrtime (the HDR histogram in the result is integer ms). */
  on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTimeMs: number) => void): this;
}
type Autocannon = (opts: AutocannonOptions) => AutocannonInstance;
const autocannon = require('autocannon') as Autocannon;

export type JsonBody = string | Record<string, unknown> | unknown[];

export interface LoadOptions {
  /** Row label in the results table. */
  name: string;
  /** Full URL (scheme, host, port, path). */
  url: string;
  /** Default: 'POST' when a body/bodyFactory is given, else 'GET'. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  /** Fixed body (objects are JSON.stringify'd once). */
  body?: JsonBody;
  /** Called for EVERY request (e.g. a fresh messageId per SendMessage). Takes precedence over `body`. */
  bodyFactory?: () => JsonBody;
  /** Concurrent keep-alive connections. Default 32. */
  connections?: number;
  /** Measured run length. Default 10. */
  durationSeconds?: number;
  /** Separate unmeasured run before the measured one (same options). Default 0 (none). */
  warmupSeconds?: number;
  /** Default 1 (no pipelining). */
  pipelining?: number;
  /**
   * Fixed offered load: at most this many requests per second over all connections (autocannon's
   * `overallRate`); default none (closed loop, every connection sends as soon as answered).
   */
  overallRate?: number;
  /** Per-request timeout, seconds. Default 10. */
  timeoutSeconds?: number;
  /**
   * Application-level check on every response body; failures are counted in `mismatches`.
   * Needed for JSON-RPC, whose errors come back as HTTP 200 (`non2xx` does not see them).
   */
  verifyBody?: (body: string) => boolean;
}

export interface LoadResult {
  name: string;
  /** Completed responses in the measured window (all status codes). */
  requests: number;
  /**
   * Good answers per second of the measured duration: responses that were not non-2xx and, with
   * `verifyBody`, passed it (a refused — 429, 503 — or wrong answer does not count).
   */
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  avgMs: number;
  maxMs: number;
  /** Connection errors incl. timeouts. */
  errors: number;
  timeouts: number;
  non2xx: number;
  /** Responses rejected by `verifyBody` (e.g. JSON-RPC error objects). */
  mismatches: number;
  durationSeconds: number;
  connections: number;
  statusCodes: Record<string, number>;
}

const DEFAULT_JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json' };

function serialise(body: JsonBody): string {
  return typeof body === 'string' ? body : JSON.stringify(body);
}

function toAutocannonOptions(opts: LoadOptions, durationSeconds: number): AutocannonOptions {
  const hasBody = opts.body !== undefined || opts.bodyFactory !== undefined;
  const method = opts.method ?? (hasBody ? 'POST' : 'GET');
  const headers = { ...(hasBody ? DEFAULT_JSON_HEADERS : {}), ...opts.headers };
  const ac: AutocannonOptions = {
    title: opts.name,
    url: opts.url,
    method,
    headers,
    connections: opts.connections ?? 32,
    duration: durationSeconds,
    pipelining: opts.pipelining ?? 1,
    timeout: opts.timeoutSeconds ?? 10,
  };
  if (opts.overallRate) ac.overallRate = opts.overallRate;
  if (opts.verifyBody) ac.verifyBody = opts.verifyBody;
  const factory = opts.bodyFactory;
  if (factory) {
    // A request with a setupRequest function is rebuilt for every send (autocannon's
    // RequestIterator), so each request gets a fresh body; Content-Length is recomputed.
    ac.requests = [
      {
        setupRequest: (req) => {
          req.body = serialise(factory());
          return req;
        },
      },
    ];
  } else if (opts.body !== undefined) {
    ac.body = serialise(opts.body);
  }
  return ac;
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Nearest-rank percentile of an ascending-sorted array. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/** Runs (optional warm-up, then) a measured autocannon load against one target. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const warmup = opts.warmupSeconds ?? 0;
  if (warmup > 0) {
    await autocannon(toAutocannonOptions(opts, warmup));
  }
  const duration = opts.durationSeconds ?? 10;
  // Latency percentiles are computed from every response time (float ms) rather than from
  // autocannon's integer-ms HDR histogram, which is too coarse for sub-millisecond targets.
  const samples = new Samples();
  const instance = autocannon(toAutocannonOptions(opts, duration));
  instance.on('response', (_client, _status, _bytes, ms) => samples.push(ms));
  const r = await instance;
  const lat = samples.sorted();
  const sum = lat.reduce((a, b) => a + b, 0);
  const hasSamples = lat.length > 0;
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = Number(v.count);
  const measured = r.duration > 0 ? r.duration : duration;
  return {
    name: opts.name,
    requests: r.requests.total,
    // autocannon runs verifyBody on every response, so a non-2xx one is a mismatch as well
    rps: round(Math.max(0, r.requests.total - (opts.verifyBody ? r.mismatches : r.non2xx)) / measured, 1),
    p50Ms: hasSamples ? round(percentile(lat, 50)) : r.latency.p50,
    p90Ms: hasSamples ? round(percentile(lat, 90)) : r.latency.p90,
    p99Ms: hasSamples ? round(percentile(lat, 99)) : r.latency.p99,
    avgMs: hasSamples ? round(sum / lat.length) : round(r.latency.average),
    maxMs: hasSamples ? round(lat[lat.length - 1]!) : r.latency.max,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    mismatches: r.mismatches,
    durationSeconds: round(measured),
    connections: opts.connections ?? 32,
    statusCodes,
  };
}

function fmtRatio(n: number, d: number): string {
  if (!Number.isFinite(n) || !Number.isFinite(d) || d === 0) return '-';
  return `${(n / d).toFixed(2)}x`;
}

/**
 * Prints one row per result plus, for each baseline, the ratios `rps/<baseline>` and
 * `p99/<baseline>` (values > 1 mean more throughput / higher latency than the baseline).
 * Returns the printed text.
 */
export function printTable(results: LoadResult[], baselineName: string | string[]): string {
  const baselines = (Array.isArray(baselineName) ? baselineName : [baselineName])
    .map((b) => results.find((r) => r.name === b))
    .filter((r): r is LoadResult => r !== undefined);

  const header = ['target', 'requests', 'rps', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'errors', 'non2xx', 'bad body'];
  for (const b of baselines) header.push(`rps/${b.name}`, `p50/${b.name}`, `p99/${b.name}`);

  const rows = results.map((r) => {
    const row = [
      r.name,
      String(r.requests),
      r.rps.toFixed(1),
      r.p50Ms.toFixed(2),
      r.p90Ms.toFixed(2),
      r.p99Ms.toFixed(2),
      r.maxMs.toFixed(1),
      String(r.errors),
      String(r.non2xx),
      String(r.mismatches),
    ];
    for (const b of baselines) {
      row.push(fmtRatio(r.rps, b.rps), fmtRatio(r.p50Ms, b.p50Ms), fmtRatio(r.p99Ms, b.p99Ms));
    }
    return row;
  });

  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const text = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
  console.log(text);
  return text;
}
