import { createServer, type Server } from 'node:http';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { DatabaseHealth } from '#libs/db';
import { Metrics } from '#libs/metrics';
import { CardClaimsReadiness } from '#libs/registry';
import { Redis } from 'ioredis';

/**
 * The worker's small HTTP port (`WORKER_METRICS_PORT` on `WORKER_METRICS_HOST`, 127.0.0.1 by
 * default; off when the port is unset): `GET /metrics` (Prometheus text), `GET /healthz`
 * (liveness) and `GET /readyz` (PostgreSQL reachable and migrated, Redis answering, and
 * `pushClaims`: this worker can read push secrets whenever a served card claims
 * `pushNotifications` — it delivers them; 503 with the failing checks). Wiring only.
 */
@Injectable()
export class WorkerMetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger(WorkerMetricsServer.name);
  private server?: Server;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: Metrics,
    private readonly db: DatabaseHealth,
    private readonly claims: CardClaimsReadiness,
  ) {}

  private async readiness(): Promise<{ ok: boolean; body: Record<string, unknown> }> {
    const [schema, redis, push] = await Promise.all([this.db.status(), pingRedis(this.config.REDIS_URL), this.pushClaims()]);
    const checks = {
      postgresql: schema.reachable ? { status: 'up' } : { status: 'down', message: schema.error },
      migrations: schema.reachable && schema.pending.length === 0 ? { status: 'up' } : { status: 'down', pending: schema.pending },
      redis: redis.up ? { status: 'up' } : { status: 'down', message: redis.error },
      pushClaims: push,
    };
    const ok = Object.values(checks).every((c) => c.status === 'up');
    return { ok, body: { status: ok ? 'ok' : 'error', details: checks } };
  }

  /** Down when a served card claims push notifications and this worker cannot read push secrets (signing is the API's). */
  private async pushClaims(): Promise<Record<string, unknown>> {
    try {
      const unserved = (await this.claims.unserved()).filter((c) => c.capability === 'pushNotifications');
      return unserved.length === 0 ? { status: 'up' } : { status: 'down', unserved };
    } catch (e) {
      return { status: 'down', message: e instanceof Error ? e.message : String(e) };
    }
  }

  /** The port it listens on (when started; 0 in the config picks a free one). */
  get port(): number | undefined {
    const a = this.server?.address();
    return typeof a === 'object' && a ? a.port : undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.WORKER_METRICS_PORT === undefined) return;
    this.server = createServer((req, res) => {
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
      if (req.method === 'GET' && req.url === '/healthz') return json(200, { status: 'ok', details: { process: { status: 'up', uptimeSeconds: Math.round(process.uptime()) } } });
      if (req.method === 'GET' && req.url === '/readyz') {
        this.readiness().then(({ ok, body }) => json(ok ? 200 : 503, body), () => json(503, { status: 'error' }));
        return;
      }
      if (req.method !== 'GET' || req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      this.metrics.expose().then(
        ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
        () => res.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.config.WORKER_METRICS_PORT, this.config.WORKER_METRICS_HOST, () => resolve());
    });
    this.log.log(`metrics on http://${this.config.WORKER_METRICS_HOST}:${this.port}/metrics`);
  }

  async onApplicationShutdown(): Promise<void> {
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
  }
}

/** One PING on a short-lived connection that never queues (answers within ~1 s whatever Redis does). */
async function pingRedis(url: string): Promise<{ up: boolean; error?: string }> {
  const client = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 1_000, commandTimeout: 1_000, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return { up: (await client.ping()) === 'PONG' };
  } catch (e) {
    return { up: false, error: e instanceof Error ? e.message : String(e) };
  } finally {
    client.disconnect();
  }
}
