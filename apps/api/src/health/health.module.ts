import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RegistryModule } from '#libs/registry';
import { HealthController } from './health.controller.js';
import { RedisHealth } from './redis.health.js';

/** Liveness and readiness routes of the API. */
@Module({
  imports: [TerminusModule.forRoot({ logger: false, errorLogStyle: 'pretty' }), RegistryModule],
  controllers: [HealthController],
  providers: [RedisHealth],
})
export class HealthModule {}
