import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { PeriodicJob } from './periodic-task.js';
import { FOLD_BATCH, RunCountsRepository } from './run-counts.repository.js';

/**
 * Runs `RunCountsRepository.fold` every RUN_COUNTS_FOLD_MS (0: never) in the process that has it
 * (workers); a tick that folded a full batch folds again at once.
 */
@Injectable()
export class RunCountsFoldJob extends PeriodicJob {
  constructor(repo: RunCountsRepository, @Inject(APP_CONFIG) config: AppConfig) {
    super(
      'run_counts fold',
      async () => {
        for (let i = 0; i < 50 && (await repo.fold()) === FOLD_BATCH; i++);
      },
      config.RUN_COUNTS_FOLD_MS,
    );
  }
}
