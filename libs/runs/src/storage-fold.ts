import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { PeriodicJob } from './periodic-task.js';
import { STORAGE_FOLD_BATCH, StorageQuotaRepository } from './storage-quota.repository.js';

/**
 * Runs `StorageQuotaRepository.fold` every ORG_STORAGE_FOLD_MS (0: never) in the process that has
 * it (workers): the append statement's quota check sums an organization's `org_storage` rows, so
 * they are kept few. A tick that folded a full batch folds again at once.
 */
@Injectable()
export class StorageFoldJob extends PeriodicJob {
  constructor(repo: StorageQuotaRepository, @Inject(APP_CONFIG) config: AppConfig) {
    super(
      'org_storage fold',
      async () => {
        for (let i = 0; i < 50 && (await repo.fold()) === STORAGE_FOLD_BATCH; i++);
      },
      config.ORG_STORAGE_FOLD_MS,
    );
  }
}
