import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, type AppConfig } from '#libs/config';
import { DbModule } from '#libs/db';
import { RunsModule } from '#libs/runs';
import { RunExecutionProcessor } from './run-execution.processor.js';
import { RunSweeper } from './run-sweeper.js';

/** Root module of the worker app: BullMQ processors only, over the shared libs. */
@Module({})
export class WorkerModule {
  static forRoot(overrides: Partial<Record<keyof AppConfig, string>> = {}): DynamicModule {
    return {
      module: WorkerModule,
      imports: [ConfigModule.forRoot(overrides), DbModule, RunsModule],
      providers: [RunExecutionProcessor, RunSweeper],
    };
  }
}
