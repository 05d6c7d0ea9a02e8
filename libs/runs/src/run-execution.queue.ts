import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RUN_EXECUTE_JOB, RUN_EXECUTION_QUEUE, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';

/** BullMQ connection options for a Redis URL (shared by the queue and the worker). */
export function bullConnection(url: string): { url: string; maxRetriesPerRequest: null } {
  return { url, maxRetriesPerRequest: null };
}

/** A job as the relay enqueues it: the run.execute payload and the sequence of its trigger. */
export interface RunExecutionJob {
  triggerSequence: number;
  job: RunExecuteJob;
}

/**
 * The BullMQ queue `run-execution` that hands runs to workers. Only the dispatch relay adds to it
 * (from the outbox); job ids are deterministic (`<runId>-<trigger sequence>`), so adding a job
 * twice adds it once while BullMQ still holds it (completed jobs are kept for a while for that).
 */
@Injectable()
export class RunExecutionQueue implements OnApplicationShutdown {
  private readonly log = new Logger(RunExecutionQueue.name);
  readonly queue: Queue<RunExecuteJob>;
  private client?: Redis;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.queue = new Queue<RunExecuteJob>(RUN_EXECUTION_QUEUE, {
      connection: bullConnection(config.REDIS_URL),
      prefix: config.REDIS_PREFIX,
      // completed jobs stay long enough for a re-relayed dispatch to find its job id taken
      defaultJobOptions: { attempts: 1, removeOnComplete: { count: 10_000 }, removeOnFail: { count: 5_000 } },
    });
    this.queue.on('error', (e: Error) => this.log.warn(`run-execution queue: ${e.message}`));
    void (this.queue.getBackend() as unknown as { connection: { client: Promise<Redis> } }).connection.client.then(
      (c) => (this.client = c),
      () => undefined,
    );
  }

  /** Job id for a trigger; the sweeper uses it to ask BullMQ whether the job still lives. */
  static jobId(runId: string, triggerSequence: number): string {
    return `${runId}-${triggerSequence}`;
  }

  /** True while the queue's Redis connection is up (the relay does not try otherwise). */
  ready(): boolean {
    return this.client?.status === 'ready';
  }

  /** Enqueue jobs in one round trip (MULTI); idempotent per job id. */
  async addBulk(jobs: readonly RunExecutionJob[]): Promise<void> {
    await this.queue.addBulk(
      jobs.map(({ job, triggerSequence }) => ({
        name: RUN_EXECUTE_JOB as never,
        data: job as never,
        opts: { jobId: RunExecutionQueue.jobId(job.runId, triggerSequence) },
      })),
    );
  }

  /** BullMQ state of a trigger's job ('unknown' when BullMQ no longer holds it). */
  jobState(runId: string, triggerSequence: number): Promise<string> {
    return this.queue.getJobState(RunExecutionQueue.jobId(runId, triggerSequence));
  }

  /** Connections close last (application shutdown), after the apps have stopped using them. */
  async onApplicationShutdown(): Promise<void> {
    await this.queue.close().catch(() => undefined);
  }
}
