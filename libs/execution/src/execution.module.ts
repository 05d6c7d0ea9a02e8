import { Module } from '@nestjs/common';
import { MetricsModule } from '#libs/metrics';
import { RunsModule } from '#libs/runs';
import { RunExecutor } from './run-executor.js';
import { RunSweeper } from './run-sweeper.js';

/**
 * Execution: runs runtimes against runs (RunExecutor) and fails runs whose execution was lost
 * (RunSweeper). Needs ConfigModule, DbModule and RuntimesModule (global).
 */
@Module({
  imports: [RunsModule, MetricsModule],
  providers: [RunExecutor, RunSweeper],
  exports: [RunExecutor, RunSweeper],
})
export class ExecutionModule {}
