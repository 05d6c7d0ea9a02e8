import { Global, Module } from '@nestjs/common';
import { Metrics } from './metrics.js';

/** One Metrics registry per process, injectable everywhere (global). */
@Global()
@Module({ providers: [Metrics], exports: [Metrics] })
export class MetricsModule {}
