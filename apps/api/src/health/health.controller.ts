import { Controller, Get } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { DatabaseHealth } from '#libs/db';
import { CardClaimsReadiness } from '#libs/registry';
import { RedisHealth } from './redis.health.js';

/**
 * Health routes (`@nestjs/terminus`):
 * - `GET /healthz` liveness (the process answers);
 * - `GET /readyz` readiness, what routing traffic here needs: PostgreSQL reachable, every
 *   migration of this build applied, and `cardClaims`: this process can serve what every served
 *   Agent Card claims (a card declaring `signedAgentCard` needs SIGNING_KEY_ENCRYPTION_SECRET,
 *   `pushNotifications` PUSH_ENCRYPTION_SECRET or that one), so a card and the answers behind it
 *   never change with the instance a load balancer picks (down: `unserved` lists each capability
 *   and the setting it needs). Redis is reported (`redis.reachable`) but does not make the API
 *   unready: while it is down requests are still served (dispatches wait in the outbox, live streams
 *   fall back to polling), so a Redis outage must not take every API pod out of its Service;
 * - `GET /healthz/dependencies` every dependency, Redis included: 503 when any is down (for
 *   monitoring and alerts, not for probes).
 * 200 when the checks pass, 503 with the failing checks otherwise.
 */
@ApiTags('health')
@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly db: DatabaseHealth,
    private readonly redis: RedisHealth,
    private readonly claims: CardClaimsReadiness,
  ) {}

  @Get('healthz')
  @ApiOperation({ summary: 'Liveness: the process is up' })
  @HealthCheck()
  live() {
    return this.health.check([async () => this.indicators.check('process').up({ uptimeSeconds: Math.round(process.uptime()) })]);
  }

  @Get('readyz')
  @ApiOperation({ summary: 'Readiness: PostgreSQL reachable and migrated, and this process configured for what the served cards claim (Redis reported, not required)' })
  @HealthCheck()
  ready() {
    return this.health.check([...this.database(), () => this.cardClaims(), () => this.redisCheck(false)]);
  }

  /** Down when a served card claims a capability this process's configuration cannot serve. */
  private async cardClaims() {
    const check = this.indicators.check('cardClaims');
    let unserved;
    try {
      unserved = await this.claims.unserved();
    } catch (e) {
      return check.down({ message: e instanceof Error ? e.message : String(e) });
    }
    return unserved.length === 0 ? check.up() : check.down({ unserved });
  }

  @Get('healthz/dependencies')
  @ApiOperation({ summary: 'Every dependency, Redis included: 503 when any is down (monitoring, not probes)' })
  @HealthCheck()
  dependencies() {
    return this.health.check([...this.database(), () => this.redisCheck(true)]);
  }

  private database() {
    return [
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
    ];
  }

  /** `required`: a Redis that does not answer is a failed check; otherwise it is reported only. */
  private async redisCheck(required: boolean) {
    const r = await this.redis.ping();
    const check = this.indicators.check('redis');
    if (r.up) return check.up({ reachable: true });
    const detail = { reachable: false, message: r.error ?? 'no PONG' };
    return required ? check.down(detail) : check.up({ ...detail, impact: 'dispatches wait in the outbox; live streams poll' });
  }
}
