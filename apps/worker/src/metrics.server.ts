import { createServer, type Server } from 'node:http';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { Metrics } from '#libs/metrics';

/**
 * The worker's `GET /metrics` (Prometheus text) on `WORKER_METRICS_PORT` (127.0.0.1 unless
 * `WORKER_METRICS_HOST` says otherwise); off when the port is unset. Wiring only.
 */
@Injectable()
export class WorkerMetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger(WorkerMetricsServer.name);
  private server?: Server;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {}

  /** The port it listens on (when started; 0 in the config picks a free one). */
  get port(): number | undefined {
    const a = this.server?.address();
    return typeof a === 'object' && a ? a.port : undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.WORKER_METRICS_PORT === undefined) return;
    this.server = createServer((req, res) => {
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
