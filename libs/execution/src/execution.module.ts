import { Module } from '@nestjs/common';
import { MetricsModule } from '#libs/metrics';
import { RunsModule } from '#libs/runs';
import { ExecutionLease } from './execution-lease.js';
import { ExecutionSlots } from './execution-slots.js';
import { RunExecutor } from './run-executor.js';
import { RunSweeper } from './run-sweeper.js';
import { TriggerReads } from './trigger-reads.js';
import { LostExecutionPolicy } from './lost-execution.policy.js';

/**
 * The lost-execution sweeper alone: the API imports it, so lost runs are detected even when no
 * worker is alive. Needs ConfigModule, DbModule and RuntimesModule (global).
 */
@Module({
  imports: [RunsModule, MetricsModule],
  providers: [RunSweeper, LostExecutionPolicy],
  exports: [RunSweeper, LostExecutionPolicy],
})
export class SweeperModule {}

/**
 * Execution: runs runtimes against runs (RunExecutor, with an execution's lease in ExecutionLease
 * and its trigger's reads in TriggerReads; RunExecutor constructs its ExecutionAdmission, which
 * calls back into it) and fails runs whose execution was lost (RunSweeper). Needs ConfigModule,
 * DbModule and RuntimesModule (global).
 */
@Module({
  imports: [RunsModule, MetricsModule, SweeperModule],
  providers: [RunExecutor, ExecutionSlots, ExecutionLease, TriggerReads],
  exports: [RunExecutor, SweeperModule],
})
export class ExecutionModule {}
