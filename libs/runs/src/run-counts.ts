import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { PeriodicTask } from './periodic-task.js';
import { FOLD_BATCH, RunCountsRepository } from './run-counts.repository.js';

/**
 * Runs `RunCountsRepository.fold` every RUN_COUNTS_FOLD_MS (0: never) in the process that has it
 * (workers); a tick that folded a full batch folds again at once.
 */
@Injectable()
export class RunCountsFoldJob implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunCountsFoldJob.name);
  private readonly task: PeriodicTask;

  constructor(
    repo: RunCountsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.task = new PeriodicTask(
      'run_counts fold',
      async () => {
        for (let i = 0; i < 50 && (await repo.fold()) === FOLD_BATCH; i++);
      },
      this.log,
    );
  }

  onApplicationBootstrap(): void {
    this.task.start(this.config.RUN_COUNTS_FOLD_MS);
  }

  onModuleDestroy(): void {
    this.task.stop();
  }
}
