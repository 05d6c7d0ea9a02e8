import * as grpc from '@grpc/grpc-js';
import { A2AService } from '@a2a-js/sdk/server/grpc';
import type { LoadResult } from './load.js';
import { Samples, nowMs, percentile, round } from './stats.js';

export interface GrpcLoadOptions {
  /** Row label in the results table. */
  name: string;
  /** `host:port` of the gRPC server (plaintext). */
  address: string;
  /** Unary request factory, called for every call (a fresh messageId per SendMessage). */
  requestFactory: () => unknown;
  /** Accepts a response (e.g. "is a completed task"); a rejected one counts in `mismatches`. */
  verify: (response: unknown) => boolean;
  /** Request metadata of every call (e.g. `a2a-version: 1.0`). */
  metadata?: Record<string, string>;
  /** Calls in flight at any time (one channel, HTTP/2 multiplexed). Default 32. */
  concurrency?: number;
  /** Measured seconds. Default 10. */
  durationSeconds?: number;
  /** Per-call deadline, seconds. Default 10. */
  timeoutSeconds?: number;
  /** Stop after this many calls even if time is left (a smoke check: 1). */
  maxCalls?: number;
}

type UnaryFn = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

/**
 * A bounded closed-loop load of unary `lf.a2a.v1.A2AService/SendMessage` calls: `concurrency`
 * workers, each starting its next call when the previous one answers, for `durationSeconds`; one
 * `@grpc/grpc-js` channel (HTTP/2 multiplexes the calls). Latency is per call, float ms.
 * Returns the same row shape as `runLoad`: `errors` = UNAVAILABLE or DEADLINE_EXCEEDED (no answer),
 * `non2xx` = any other non-OK status, `statusCodes` keyed by gRPC status number.
 */
export async function runGrpcLoad(opts: GrpcLoadOptions): Promise<LoadResult> {
  const Client = grpc.makeGenericClientConstructor(A2AService as unknown as grpc.ServiceDefinition, 'A2AService');
  const client = new Client(opts.address, grpc.credentials.createInsecure()) as unknown as { sendMessage: UnaryFn; close(): void };
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  const concurrency = opts.concurrency ?? 32;
  const durationMs = (opts.durationSeconds ?? 10) * 1000;
  const timeoutMs = (opts.timeoutSeconds ?? 10) * 1000;
  const samples = new Samples();
  const statusCodes: Record<string, number> = {};
  let mismatches = 0;
  let refused = 0; // a non-OK status from the server
  let transport = 0; // UNAVAILABLE (no connection) or DEADLINE_EXCEEDED
  let timeouts = 0;

  const call = () =>
    new Promise<void>((resolve) => {
      const t0 = nowMs();
      client.sendMessage(opts.requestFactory(), md, { deadline: Date.now() + timeoutMs }, (err, res) => {
        samples.push(nowMs() - t0);
        const code = String(err ? err.code : grpc.status.OK);
        statusCodes[code] = (statusCodes[code] ?? 0) + 1;
        if (err) {
          if (err.code === grpc.status.DEADLINE_EXCEEDED) timeouts += 1;
          if (err.code === grpc.status.DEADLINE_EXCEEDED || err.code === grpc.status.UNAVAILABLE) transport += 1;
          else refused += 1;
        } else if (!opts.verify(res)) mismatches += 1;
        resolve();
      });
    });

  const start = nowMs();
  const end = start + durationMs;
  let started = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (nowMs() < end && (opts.maxCalls === undefined || started < opts.maxCalls)) {
        started += 1;
        await call();
      }
    }),
  );
  const measured = (nowMs() - start) / 1000;
  client.close();
  const lat = samples.sorted();
  const sum = lat.reduce((a, b) => a + b, 0);
  return {
    name: opts.name,
    requests: samples.length,
    rps: round(samples.length / measured, 1),
    p50Ms: round(percentile(lat, 50)),
    p90Ms: round(percentile(lat, 90)),
    p99Ms: round(percentile(lat, 99)),
    avgMs: round(lat.length ? sum / lat.length : Number.NaN),
    maxMs: round(lat.length ? lat[lat.length - 1]! : Number.NaN),
    errors: transport,
    timeouts,
    non2xx: refused,
    mismatches,
    durationSeconds: round(measured),
    connections: concurrency,
    statusCodes,
  };
}
