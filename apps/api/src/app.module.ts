import { ExtensionsModule, type A2AExtensionPlugin } from '#libs/extensions';
import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, type AppConfig } from '#libs/config';
import { DbModule } from '#libs/db';
import { SweeperModule } from '#libs/execution';
import { MetricsModule } from '#libs/metrics';
import { RunsModule } from '#libs/runs';
import { RuntimesModule, type AgentRuntime } from '#libs/runtimes';
import { AdminModule } from './admin/admin.module.js';
import { A2AHttpModule } from './a2a/a2a.module.js';
import { HealthModule } from './health/health.module.js';
import { GrpcModule } from './grpc/grpc.module.js';

/** Root module of the API app. `overrides` are config values (tests and the demo use them). */
@Module({})
export class AppModule {
  static forRoot(overrides: Partial<Record<keyof AppConfig, string>> = {}, opts: { extensions?: ReadonlyArray<A2AExtensionPlugin<any>>; runtimes?: AgentRuntime[] } = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [ConfigModule.forRoot(overrides), DbModule, MetricsModule, RuntimesModule.forRoot({ runtimes: opts.runtimes }), ExtensionsModule.forRoot({ extensions: opts.extensions }), RunsModule, SweeperModule, AdminModule, A2AHttpModule, GrpcModule, HealthModule],
    };
  }
}
