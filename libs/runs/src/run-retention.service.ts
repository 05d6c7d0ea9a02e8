import { Inject, Injectable, Logger, Module, type OnModuleDestroy } from '@nestjs/common';
import { AppError } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { Metrics, MetricsModule } from '#libs/metrics';
import { archiveTargetFrom, type ArchiveTarget } from './run-archive-target.js';
import type { ArchiveRow } from './run-archive.repository.js';
import { encodeArchiveCursor } from './run-archive.service.js';
import { PartitionMaintenanceJob, RunEventPartitions } from './run-event-partitions.service.js';
import { PeriodicJob } from './periodic-task.js';
import { RunCountsFoldJob } from './run-counts.js';
import { RunCountsRepository } from './run-counts.repository.js';
import { StorageFoldJob } from './storage-fold.js';
import { StorageQuotaRepository } from './storage-quota.repository.js';
import { RunEventPartitionsRepository } from './run-event-partitions.repository.js';
import { RunRetentionRepository, type RetentionPolicy } from './run-retention.repository.js';

/** A pass stops after this many batches (the next pass goes on): bounds one pass's time. */
const MAX_BATCHES_PER_PASS = 200;

/**
 * Retention (docs/architecture.md "Retention"): an organization's policy (days to keep terminal
 * runs; null = forever), overridable per agent, and the passes that remove expired runs with
 * everything that belongs to them, in batches of RETENTION_BATCH_SIZE, one batch at a time across
 * the cluster. Runs that are not terminal, and children of a parent that is still active, stay.
 */
@Injectable()
export class RunRetention implements OnModuleDestroy {
  private readonly log = new Logger(RunRetention.name);
  /** Where batches are archived before removal (RETENTION_ARCHIVE_S3_URL or RETENTION_ARCHIVE_DIR), if anywhere. */
  private readonly target: ArchiveTarget | undefined;

  constructor(
    private readonly repo: RunRetentionRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {
    this.target = archiveTargetFrom(config);
  }

  onModuleDestroy(): void {
    this.target?.close();
  }

  /** The organization's policy: `{ retentionDays, agents: [{ agentId, retentionDays }] }`. */
  policy(orgId: string): Promise<RetentionPolicy> {
    return this.repo.policy(orgId);
  }

  /** Set the organization's default (`agentId` null) or an agent's override (days >= 1, or null = keep forever). */
  setPolicy(orgId: string, agentId: string | null, retentionDays: number | null): Promise<void> {
    return this.repo.set(orgId, agentId, retentionDays);
  }

  /** Drop an agent's override: it follows the organization's default again. */
  clearAgentPolicy(orgId: string, agentId: string): Promise<void> {
    return this.repo.clearAgent(orgId, agentId);
  }

  /**
   * One pass as of `now`: first the `run_events` partitions whose every run is removable are
   * dropped whole (their runs removed after), then batches until one removes fewer than a batch
   * (nothing left), another process holds the lock (`skipped`), or MAX_BATCHES_PER_PASS. Resolves
   * to the runs removed and the partitions dropped. Rejects with `archive.write_failed` when a
   * batch's archive could not be written (that batch's runs stay; counted in
   * `aaas_retention_archive_failures_total`; the next pass retries them), or with the database's error.
   */
  async pass(now = new Date()): Promise<{ removed: number; partitionsDropped: number; outcome: 'done' | 'skipped' }> {
    const limit = this.config.RETENTION_BATCH_SIZE;
    let removed = 0;
    let partitionsDropped = 0;
    try {
      const target = this.target;
      const archive = target ? (orgId: string, rows: ArchiveRow[]) => this.archive(target, orgId, rows) : undefined;
      // whole partitions first: their runs' logs go without a row deleted
      for (;;) {
        const dropped = await this.repo.dropExpiredPartition(now, limit, archive);
        if (dropped === 'locked') {
          this.metrics.retentionPasses.inc({ outcome: 'skipped' });
          return { removed, partitionsDropped, outcome: 'skipped' };
        }
        if (dropped === null) break;
        partitionsDropped++;
        const n = dropped.removed.reduce((sum, b) => sum + b.runs, 0);
        removed += n;
        this.metrics.retentionPartitionsDropped.inc();
        this.metrics.retentionRunsRemoved.inc(n);
        this.log.log(`retention dropped run_events partition ${dropped.partition} and removed its ${n} expired runs (${dropped.removed.map((b) => `${b.runs} of organization ${b.orgId}`).join(', ')})`);
      }
      for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
        const batch = await this.repo.removeExpired(now, limit, archive);
        if (batch === null) {
          this.metrics.retentionPasses.inc({ outcome: 'skipped' });
          return { removed, partitionsDropped, outcome: 'skipped' };
        }
        const n = batch.reduce((sum, b) => sum + b.runs, 0);
        removed += n;
        this.metrics.retentionRunsRemoved.inc(n);
        for (const b of batch) this.log.log(`retention removed ${b.runs} expired runs of organization ${b.orgId}`);
        if (n < limit) break;
      }
    } catch (e) {
      this.metrics.retentionPasses.inc({ outcome: 'failed' });
      if (e instanceof AppError && e.code === 'archive.write_failed') {
        this.metrics.retentionArchiveFailures.inc({ target: this.target!.kind });
        this.log.warn(`retention kept a batch: ${e.message} (the next pass retries)`);
      }
      throw e;
    }
    this.metrics.retentionPasses.inc({ outcome: 'done' });
    return { removed, partitionsDropped, outcome: 'done' };
  }

  /**
   * Write the runs about to be removed as one run archive (the export's lines, cursors included)
   * to the target, durably, before they go; rejects (`archive.write_failed`) when it could not.
   */
  private async archive(target: ArchiveTarget, orgId: string, rows: ArchiveRow[]): Promise<void> {
    const body = Buffer.from(rows.map((row) => `{"cursor":${JSON.stringify(encodeArchiveCursor(row))},${row.line.slice(1)}\n`).join(''), 'utf8');
    const where = await target.write(orgId, body);
    this.log.log(`retention archived ${rows.length} runs of organization ${orgId} to ${where}`);
  }
}

/** Runs `RunRetention.pass` every RETENTION_INTERVAL_MS (0: never) in the process that has it (workers). */
@Injectable()
export class RetentionJob extends PeriodicJob {
  constructor(retention: RunRetention, @Inject(APP_CONFIG) config: AppConfig) {
    super('retention pass', () => retention.pass(), config.RETENTION_INTERVAL_MS);
  }
}

/**
 * The retention job, `run_events` partition maintenance and the folds of `run_counts` and
 * `org_storage`, for workers (the API serves policies through RunsModule's RunRetention).
 */
@Module({
  imports: [MetricsModule],
  providers: [
    RunRetentionRepository,
    RunRetention,
    RetentionJob,
    RunEventPartitionsRepository,
    RunEventPartitions,
    PartitionMaintenanceJob,
    RunCountsRepository,
    RunCountsFoldJob,
    StorageQuotaRepository,
    StorageFoldJob,
  ],
  exports: [RunRetention, RunEventPartitions, RunCountsRepository],
})
export class RunRetentionModule {}
