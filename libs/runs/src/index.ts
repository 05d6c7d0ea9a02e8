/**
 * Runs — the core: the canonical Run, its event log (the one append path), the run state machine,
 * the commands that change runs, runtime operations, the read side (reads/: one reader per caller,
 * all projections of the log), the run errors (run-errors.ts), live follow of a log across
 * instances, and dispatch to workers through a transactional outbox.
 * Repositories and SQL stay private to this lib.
 */
export { RunsModule } from './runs.module.js';

// commands (one handler each)
export { CreateRunHandler, type CreateRunCommand, type CreateRunResult } from './commands/create-run.command.js';
export { RecordReplyHandler, type RecordReplyCommand, type RecordReplyResult, type RecordedReply } from './commands/record-reply.command.js';
export { ContinueRunHandler, type ContinueRunCommand } from './commands/continue-run.command.js';
export { RespondInteractionHandler, chooseOption, type RespondInteractionCommand } from './commands/respond-interaction.command.js';
export { CancelRunHandler, type CancelRunCommand } from './commands/cancel-run.command.js';

// runtime operations
export { MAX_LINK_DEPTH, RuntimeOperations, type AgentMessageDraft, type Delegation, type DelegationDraft, type InteractionDraft, type RuntimeOp, type RuntimeStatus } from './runtime-operations.service.js';

// reads (one reader per caller; all projections of the log, scoped by org) and the wait for settlement
export { RunViews, type RunDetail } from './reads/run-views.repository.js';
export { ExecutionReads, LATEST_OF_TYPE_SQL } from './reads/execution-reads.repository.js';
export { SweeperReads } from './reads/sweeper-reads.repository.js';
export { RunSettlement } from './reads/run-settlement.js';
export { foldRunView } from './reads/run-fold.js';
export { isUuid, RUN_VIEW_SQL, type InteractionRecord, type RunLinkRecord, type RunState, type RunView, type RunViewOptions, type RunListFilter, type StoredArtifact } from './reads/run-rows.repository.js';

// archives, retention, quotas
export { RunArchives, decodeArchiveCursor, encodeArchiveCursor } from './run-archive.service.js';
export type { ArchiveFilter } from './run-archive.repository.js';
export { RetentionJob, RunRetention, RunRetentionModule } from './run-retention.service.js';
export type { RetentionPolicy } from './run-retention.repository.js';
export { PartitionMaintenanceJob, RunEventPartitions } from './run-event-partitions.service.js';
export { RunCountsFoldJob } from './run-counts.js';
export { RunCountsRepository } from './run-counts.repository.js';
export { nextPeriod, periodStart, planPartitions, type EventPartition, type PartitionInterval } from './run-event-periods.js';
export { newRunId, runIdBound } from './run-id.js';
export { STORAGE_USAGE_TTL_MS, StorageQuotas, type StorageUsage } from './storage-quotas.service.js';
export { APPEND_SQL, appendParts, appendSql, type AppendParts } from './append-sql.js';
export type { RunRecord } from './run-record.js';

// state machine
export { ACTIVE_STATUSES, TERMINAL_STATUSES, canTransition, foldState, isSettled, isStatusEvent, isTerminal, statusUpdateSources, statusesLeadingTo } from './run-state.js';

// wake-ups, live follow, dispatch
export { RunNotifier, WAKEUP_PAYLOAD_MAX_BYTES, type CommittedEnvelopes, type WakeupListener, type WakeupState } from './run-notifier.js';
export { RunStreamHub } from './run-stream.js';
export { DispatchRelay } from './dispatch.relay.js';
export { RunExecutionQueue, bullConnection, type RunExecutionJob } from './run-execution.queue.js';
export { RELAYABLE_SQL, RunDispatchRepository } from './run-dispatch.repository.js';
