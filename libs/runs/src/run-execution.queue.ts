import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RUN_EXECUTE_BATCH_JOB, RUN_EXECUTION_QUEUE, type RunExecuteBatch, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';

/** BullMQ connection options for a Redis URL (shared by the queue and the worker). */
export function bullConnection(url: string): { url: string; maxRetriesPerRequest: null } {
  return { url, maxRetriesPerRequest: null };
}

/**
 * A dispatch as the relay enqueues it: the `run.execute` payload, the sequence of its trigger, its
 * outbox row (`id`; the worker claims it) and when it was first enqueued (ms since the epoch).
 */
export interface RunExecutionJob {
  id?: string;
  triggerSequence: number;
  enqueuedAt?: number;
  job: RunExecuteJob;
}

/**
 * The BullMQ queue `run-execution` that hands runs to workers, a batch of dispatches per job
 * (`run.execute-batch`, at most DISPATCH_BATCH_MAX). Only the dispatch relay and the workers (a
 * deferred or orphaned part of a batch) add to it. Exactly-once execution does not rest on job ids:
 * the worker claims each dispatch by deleting its outbox row (RunDispatchRepository.claim), so a
 * dispatch enqueued twice runs once. A batch of one keeps the job id `<runId>-<trigger sequence>`;
 * a larger batch is `<first runId>-<its trigger sequence>+<size>`. A completed job is removed at
 * once unless QUEUE_KEEP_COMPLETED_JOBS says to keep some (keeping them costs Redis commands per
 * job; the run's log tells what each execution did); failed ones are kept (the newest 5,000).
 */
@Injectable()
export class RunExecutionQueue implements OnApplicationShutdown {
  private readonly log = new Logger(RunExecutionQueue.name);
  readonly queue: Queue<RunExecuteBatch>;
  private client?: Redis;
  private readonly batchMax: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.batchMax = config.DISPATCH_BATCH_MAX;
    this.queue = new Queue<RunExecuteBatch>(RUN_EXECUTION_QUEUE, {
      connection: bullConnection(config.REDIS_URL),
      prefix: config.REDIS_PREFIX,
      defaultJobOptions: { attempts: 1, removeOnComplete: config.QUEUE_KEEP_COMPLETED_JOBS > 0 ? { count: config.QUEUE_KEEP_COMPLETED_JOBS } : true, removeOnFail: { count: 5_000 } },
    });
    this.queue.on('error', (e: Error) => this.log.warn(`run-execution queue: ${e.message}`));
    void (this.queue.getBackend() as unknown as { connection: { client: Promise<Redis> } }).connection.client.then(
      (c) => (this.client = c),
      () => undefined,
    );
  }

  /** Job id of a batch of one (tests and operators look a run's job up by it). */
  static jobId(runId: string, triggerSequence: number): string {
    return `${runId}-${triggerSequence}`;
  }

  /** True while the queue's Redis connection is up (the relay does not try otherwise). */
  ready(): boolean {
    return this.client?.status === 'ready';
  }

  /**
   * Enqueue dispatches in one round trip (MULTI), DISPATCH_BATCH_MAX per job. `delayMs`: the jobs
   * become available that much later (a deferral); with it or `fresh`, the jobs get ids of
   * BullMQ's choosing (a job id BullMQ still holds would make it ignore the add).
   */
  async addBulk(dispatches: readonly RunExecutionJob[], opts: { delayMs?: number; fresh?: boolean } = {}): Promise<void> {
    if (dispatches.length === 0) return;
    const now = Date.now();
    const jobs = [];
    for (let i = 0; i < dispatches.length; i += this.batchMax) {
      const part = dispatches.slice(i, i + this.batchMax).map((d) => ({ ...d, enqueuedAt: d.enqueuedAt ?? now }));
      const first = part[0]!;
      const id = RunExecutionQueue.jobId(first.job.runId, first.triggerSequence) + (part.length > 1 ? `+${part.length}` : '');
      jobs.push({
        name: RUN_EXECUTE_BATCH_JOB as never,
        data: { dispatches: part } as never,
        opts: opts.delayMs ? { delay: opts.delayMs } : opts.fresh ? {} : { jobId: id },
      });
    }
    await this.queue.addBulk(jobs);
  }

  /** Jobs waiting to be taken (waiting, delayed, prioritized): zero means the queue is idle. */
  async waiting(): Promise<number> {
    const c = await this.queue.getJobCounts('waiting', 'delayed', 'prioritized');
    return (c.waiting ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    await this.queue.close().catch(() => undefined);
  }
}
