import { Module } from '@nestjs/common';
import { MetricsModule } from '#libs/metrics';
import { CancelRunHandler } from './commands/cancel-run.command.js';
import { ContinueRunHandler } from './commands/continue-run.command.js';
import { CreateRunHandler } from './commands/create-run.command.js';
import { RecordReplyHandler } from './commands/record-reply.command.js';
import { RespondInteractionHandler } from './commands/respond-interaction.command.js';
import { DispatchRelay } from './dispatch.relay.js';
import { EventLogRepository } from './event-log.repository.js';
import { RunArchiveRepository } from './run-archive.repository.js';
import { RunArchives } from './run-archive.service.js';
import { RunRetentionRepository } from './run-retention.repository.js';
import { RunRetention } from './run-retention.service.js';
import { RunDispatchRepository } from './run-dispatch.repository.js';
import { RunLeaseRepository } from './run-lease.repository.js';
import { RunExecutionQueue } from './run-execution.queue.js';
import { RunNotifier } from './run-notifier.js';
import { CommandReads } from './reads/command-reads.repository.js';
import { ExecutionReads } from './reads/execution-reads.repository.js';
import { RunSettlement } from './reads/run-settlement.js';
import { RunViews } from './reads/run-views.repository.js';
import { SweeperReads } from './reads/sweeper-reads.repository.js';
import { RunStreamHub } from './run-stream.js';
import { RuntimeOperations } from './runtime-operations.service.js';
import { StorageQuotaRepository } from './storage-quota.repository.js';
import { StorageQuotas } from './storage-quotas.service.js';

const HANDLERS = [CreateRunHandler, RecordReplyHandler, ContinueRunHandler, RespondInteractionHandler, CancelRunHandler];

/**
 * Runs: the command handlers, runtime operations, the readers (one per caller: reads/), the event
 * log and its wake-ups, the outbox relay and the run-execution queue. Needs DbModule and ConfigModule (global).
 */
@Module({
  imports: [MetricsModule],
  providers: [
    EventLogRepository,
    CommandReads,
    RunDispatchRepository,
    RunLeaseRepository,
    RunNotifier,
    RunExecutionQueue,
    DispatchRelay,
    RunViews,
    RunSettlement,
    ExecutionReads,
    SweeperReads,
    RuntimeOperations,
    RunStreamHub,
    StorageQuotaRepository,
    StorageQuotas,
    RunArchiveRepository,
    RunArchives,
    RunRetentionRepository,
    RunRetention,
    ...HANDLERS,
  ],
  exports: [RunViews, RunSettlement, ExecutionReads, SweeperReads, RuntimeOperations, RunNotifier, RunExecutionQueue, DispatchRelay, RunStreamHub, StorageQuotas, RunArchives, RunRetention, ...HANDLERS],
})
export class RunsModule {}
