import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import { RUN_EXECUTION_QUEUE, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ExecutionDeferred, ExecutionError, RunExecutor, bullConnection } from '#libs/execution';
import { ATTR, flushTracing, isTracing, withSpan, type SpanOptions } from '#libs/telemetry';

/**
 * BullMQ wiring for `run.execute`: hand each job's payload to RunExecutor and map its errors
 * (not retryable → UnrecoverableError). Stalled jobs (dead worker) are not replayed
 * (`maxStalledCount: 0`): replaying a runtime would duplicate its output, so the executor's
 * lost-run policy fails the run instead.
 *
 * Traces: each job runs in a `run.execute` span (kind consumer) whose parent is the `run.dispatch`
 * span the job carries (`trace`, written with the outbox row), so the execution and its appends
 * continue the trace of the request that dispatched it.
 */
@Injectable()
export class RunExecutionProcessor implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly log = new Logger(RunExecutionProcessor.name);
  private worker?: Worker<RunExecuteJob>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly executor: RunExecutor,
  ) {}

  onApplicationBootstrap(): void {
    this.worker = new Worker<RunExecuteJob>(RUN_EXECUTION_QUEUE, (job, token) => this.process(job, token), {
      connection: bullConnection(this.config.REDIS_URL),
      prefix: this.config.REDIS_PREFIX,
      concurrency: this.config.WORKER_CONCURRENCY,
      maxStalledCount: 0,
    });
    this.worker.on('failed', (job, err) => {
      // a stalled job (its worker died) or any failure the executor did not settle: fail the run (no-op when ended)
      if (job) void this.executor.lost(job.data, err.message);
    });
    this.worker.on('error', (err) => this.log.warn(`worker: ${err.message}`));
  }

  /**
   * Stop executing first (module destroy), while the database and Redis are still open: abort the
   * executions in progress, then let BullMQ wait for their jobs to return — at most
   * WORKER_SHUTDOWN_TIMEOUT_MS. An execution that ignores its abort signal does not keep the
   * process alive: its run's lease expires and the sweeper fails or resumes it.
   */
  async onModuleDestroy(): Promise<void> {
    this.executor.abortAll();
    if (!this.worker) return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.config.WORKER_SHUTDOWN_TIMEOUT_MS);
    });
    const closed = this.worker.close().then(
      () => 'closed' as const,
      (e: unknown) => {
        this.log.warn(`worker close: ${e instanceof Error ? e.message : String(e)}`);
        return 'closed' as const;
      },
    );
    const outcome = await Promise.race([closed, deadline]).finally(() => clearTimeout(timer));
    if (outcome === 'timeout') {
      this.log.warn(`stopping with ${this.executor.running} execution(s) still running after ${this.config.WORKER_SHUTDOWN_TIMEOUT_MS} ms; their runs are left to the lease sweeper`);
    }
  }

  /** The spans of the executions that just ended are exported before the process exits. */
  async onApplicationShutdown(): Promise<void> {
    await flushTracing();
  }

  /** Process one job as the BullMQ worker does (tests call it directly). */
  async process(job: Pick<Job<RunExecuteJob>, 'data'> & Partial<Pick<Job<RunExecuteJob>, 'moveToDelayed'>> & { timestamp?: number; id?: string }, token?: string): Promise<void> {
    // job ids are <runId>-<trigger sequence> (RunExecutionQueue.jobId)
    const seq = job.id ? Number(job.id.slice(job.id.lastIndexOf('-') + 1)) : NaN;
    const execute = () => this.executor.execute(job.data, { enqueuedAt: job.timestamp, triggerSequence: Number.isInteger(seq) ? seq : undefined });
    try {
      // a deferral is not a failure of the span: it is returned through it and thrown after
      const deferred = isTracing()
        ? await withSpan('run.execute', executeSpan(job), async (span) => {
            try {
              await execute();
              return null;
            } catch (e) {
              if (!(e instanceof ExecutionDeferred)) throw e;
              span?.setAttribute('aaas.deferred_ms', e.delayMs);
              return e;
            }
          })
        : await execute();
      if (deferred) throw deferred;
    } catch (e) {
      // the tenant is at its concurrency limit: back to the queue, delayed, without an attempt used
      if (e instanceof ExecutionDeferred && job.moveToDelayed && token) {
        await job.moveToDelayed(Date.now() + e.delayMs, token);
        throw new DelayedError();
      }
      if (e instanceof ExecutionError && !e.retryable) throw new UnrecoverableError(e.message);
      throw e;
    }
  }
}

/** The `run.execute` span of a job: a child of the dispatch it carries, with the run's ids. */
function executeSpan(job: { data: RunExecuteJob; id?: string }): SpanOptions {
  const { data } = job;
  return {
    kind: 'consumer',
    parent: data.trace,
    attributes: {
      [ATTR.ORG_ID]: data.orgId,
      [ATTR.RUN_ID]: data.runId,
      ...(data.context ? { [ATTR.AGENT_ID]: data.context.agentId } : {}),
      [ATTR.TRIGGER]: data.trigger,
      'messaging.system': 'bullmq',
      'messaging.operation.type': 'process',
      'messaging.destination.name': RUN_EXECUTION_QUEUE,
      ...(job.id ? { 'messaging.message.id': job.id } : {}),
    },
  };
}
