import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Queue } from 'bullmq';
import { RUN_EXECUTE_JOB, RUN_EXECUTION_QUEUE, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';

/** BullMQ connection options for a Redis URL (shared by the queue and the worker). */
export function bullConnection(url: string): { url: string; maxRetriesPerRequest: null } {
  return { url, maxRetriesPerRequest: null };
}

/**
 * Hands runs to the worker app: one `run.execute` job per trigger, with a deterministic job id
 * (`<runId>-<sequence of the triggering message>`) so a retried enqueue adds nothing.
 */
@Injectable()
export class RunDispatcher implements OnApplicationShutdown {
  readonly queue: Queue<RunExecuteJob>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.queue = new Queue<RunExecuteJob>(RUN_EXECUTION_QUEUE, {
      connection: bullConnection(config.REDIS_URL),
      prefix: config.REDIS_PREFIX,
      defaultJobOptions: { attempts: 1, removeOnComplete: 1000, removeOnFail: 5000 },
    });
  }

  /** Job id for a trigger; the sweeper uses it to ask BullMQ whether the job still lives. */
  static jobId(runId: string, triggerSequence: number): string {
    return `${runId}-${triggerSequence}`;
  }

  async dispatch(job: RunExecuteJob, triggerSequence: number): Promise<void> {
    await this.queue.add(RUN_EXECUTE_JOB as never, job as never, { jobId: RunDispatcher.jobId(job.runId, triggerSequence) });
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    await this.queue.close();
  }
}
