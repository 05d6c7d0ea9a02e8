import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller.js';
import { RedisHealth } from './redis.health.js';

/** Liveness and readiness routes of the API. */
@Module({
  imports: [TerminusModule.forRoot({ logger: false, errorLogStyle: 'pretty' })],
  controllers: [HealthController],
  providers: [RedisHealth],
})
export class HealthModule {}
