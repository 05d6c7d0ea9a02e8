import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { DatabaseHealth } from '#libs/db';
import { RedisHealth } from './redis.health.js';

/**
 * Health routes (`@nestjs/terminus`): `GET /healthz` liveness (the process answers), `GET /readyz`
 * readiness — PostgreSQL reachable, every migration of this build applied, Redis answering. 200
 * when ready, 503 with the failing checks otherwise (e.g. while Redis is down; requests are still
 * accepted then, their dispatches wait in the outbox).
 */
@ApiTags('health')
@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly db: DatabaseHealth,
    private readonly redis: RedisHealth,
  ) {}

  @Get('healthz')
  @ApiOperation({ summary: 'Liveness: the process is up' })
  @HealthCheck()
  live() {
    return this.health.check([async () => this.indicators.check('process').up({ uptimeSeconds: Math.round(process.uptime()) })]);
  }

  @Get('readyz')
  @ApiOperation({ summary: 'Readiness: PostgreSQL reachable and migrated, Redis answering' })
  @HealthCheck()
  ready() {
    return this.health.check([
      async () => {
        const s = await this.db.status();
        const check = this.indicators.check('postgresql');
        if (!s.reachable) return check.down({ message: s.error ?? 'unreachable' });
        return check.up();
      },
      async () => {
        const s = await this.db.status();
        const check = this.indicators.check('migrations');
        return s.pending.length === 0 ? check.up() : check.down({ pending: s.pending });
      },
      async () => {
        const r = await this.redis.ping();
        const check = this.indicators.check('redis');
        return r.up ? check.up() : check.down({ message: r.error ?? 'no PONG' });
      },
    ]);
  }
}
