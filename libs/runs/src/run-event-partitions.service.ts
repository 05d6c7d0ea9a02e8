import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { Metrics } from '#libs/metrics';
import { PeriodicJob } from './periodic-task.js';
import { RunEventPartitionsRepository } from './run-event-partitions.repository.js';
import { planPartitions, type EventPartition } from './run-event-periods.js';

/**
 * Keeps `run_events` partitions created ahead (docs/architecture.md "The log's partitions"):
 * RUN_EVENTS_PARTITIONS_AHEAD periods of RUN_EVENTS_PARTITION_INTERVAL from the current one, under
 * a cluster-wide advisory lock, idempotently. A run created in a period that has no partition yet
 * makes it itself (EventLogRepository), so a late maintenance costs a slower creation, never a
 * failed one.
 */
@Injectable()
export class RunEventPartitions {
  private readonly log = new Logger(RunEventPartitions.name);

  constructor(
    private readonly repo: RunEventPartitionsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {}

  /** The installed pg_partman's version, or null: the worker says at boot whether maintenance could be handed to it (docs/deploy.md). */
  partmanVersion(): Promise<string | null> {
    return this.repo.partmanVersion();
  }

  /** The partitions of `run_events` ([from, to) run-id ranges; null bounds: the DEFAULT partition). */
  list(): Promise<EventPartition[]> {
    return this.repo.list();
  }

  /**
   * One maintenance step as of `now`: creates the missing partitions. Resolves to the names
   * created, or null when another process holds the maintenance lock.
   */
  async maintain(now = new Date()): Promise<string[] | null> {
    const interval = this.config.RUN_EVENTS_PARTITION_INTERVAL;
    const created = await this.repo.create((existing) => planPartitions(existing, now.getTime(), interval, this.config.RUN_EVENTS_PARTITIONS_AHEAD));
    if (created?.length) {
      this.metrics.runEventPartitionsCreated.inc(created.length);
      this.log.log(`created run_events partitions ${created.join(', ')}`);
    }
    return created;
  }
}

/**
 * Runs `RunEventPartitions.maintain` at boot and every RUN_EVENTS_PARTITION_MAINTENANCE_MS (0: at
 * boot only) in the process that has it (workers). A failure is logged; the next tick tries again.
 */
@Injectable()
export class PartitionMaintenanceJob extends PeriodicJob {
  constructor(
    private readonly partitions: RunEventPartitions,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    super('run_events partition maintenance', () => partitions.maintain(), config.RUN_EVENTS_PARTITION_MAINTENANCE_MS);
  }

  override onApplicationBootstrap(): void {
    void this.task.tick().then(async () => {
      const version = await this.partitions.partmanVersion().catch(() => null);
      if (version === null) return;
      // 4.x partitions integer and time columns only (it refuses a uuid control column, tested
      // with Debian 12's 4.7.2); 5.x decodes a UUIDv7's time (uuid7_time_encoder / _decoder)
      if (Number(version.split('.')[0]) >= 5) {
        this.log.log(`pg_partman ${version} is installed: the run periods' partitions can be handed over to it (docs/deploy.md "The log's partitions")`);
      } else {
        this.log.log(`pg_partman ${version} is installed, but it cannot partition by a run id (a uuid; pg_partman 5 can): the service keeps making the run periods' partitions (docs/deploy.md "The log's partitions")`);
      }
    });
    super.onApplicationBootstrap();
  }
}
