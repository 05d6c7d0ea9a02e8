import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '#libs/config';

/**
 * Readiness probe of Redis: one PING on a connection of its own that never queues commands while
 * disconnected, so a probe answers within `timeoutMs` whatever Redis does.
 */
@Injectable()
export class RedisHealth implements OnApplicationShutdown {
  private readonly client: Redis;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.client = new Redis(config.REDIS_URL, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 2_000 });
    // reconnect attempts are quiet: readiness reports the state, the log does not fill with stacks
    this.client.on('error', () => undefined);
  }

  async ping(timeoutMs = 1_000): Promise<{ up: boolean; error?: string }> {
    try {
      if (this.client.status === 'wait' || this.client.status === 'end') await this.client.connect().catch(() => undefined);
      let t: NodeJS.Timeout;
      const pong = await Promise.race([
        this.client.ping(),
        new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs))),
      ]).finally(() => clearTimeout(t));
      return { up: pong === 'PONG' };
    } catch (e) {
      return { up: false, error: e instanceof Error ? e.message : String(e) };
    }
  }

  onApplicationShutdown(): void {
    this.client.disconnect();
  }
}
