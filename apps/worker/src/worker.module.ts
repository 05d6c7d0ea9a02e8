import { PushDeliveryModule } from '#libs/a2a';
import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, type AppConfig } from '#libs/config';
import { DbModule } from '#libs/db';
import { ExecutionModule } from '#libs/execution';
import { RunRetentionModule } from '#libs/runs';
import { RuntimesModule, type AgentRuntime } from '#libs/runtimes';
import { MetricsModule } from '#libs/metrics';
import { CardClaimsModule, RuntimeSecretsModule } from '#libs/registry';
import { WorkerMetricsServer } from './metrics.server.js';
import { RunExecutionProcessor } from './run-execution.processor.js';

/**
 * Root module of the worker app: wires BullMQ to the execution lib. RuntimeSecretsModule (global)
 * gives the runtimes the RUNTIME_SECRETS port: secrets are resolved per run's organization, never
 * read from arbitrary environment variables.
 */
@Module({})
export class WorkerModule {
  /** `runtimes`: runtime kinds of this deployment beyond the built-in ones (the API needs the same list). */
  static forRoot(overrides: Partial<Record<keyof AppConfig, string>> = {}, opts: { runtimes?: AgentRuntime[] } = {}): DynamicModule {
    return {
      module: WorkerModule,
      imports: [ConfigModule.forRoot(overrides), DbModule, MetricsModule, RuntimeSecretsModule, CardClaimsModule, RuntimesModule.forRoot({ runtimes: opts.runtimes }), ExecutionModule, PushDeliveryModule, RunRetentionModule],
      providers: [RunExecutionProcessor, WorkerMetricsServer],
    };
  }
}
