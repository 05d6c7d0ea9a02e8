import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { RUN_EXECUTION_QUEUE, RunExecuteBatchSchema, type RunDispatchItem, type RunExecuteBatch, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ExecutionError, RunExecutor, bullConnection, type ExecutionWrapper, type RunExecutionJob } from '#libs/execution';
import { ATTR, flushTracing, isTracing, withSpan, type SpanOptions } from '#libs/telemetry';

/**
 * BullMQ wiring for `run.execute-batch`: hand each job's dispatches to RunExecutor.executeBatch
 * and map its errors (not retryable → UnrecoverableError). Stalled jobs (dead worker) are not
 * replayed (`maxStalledCount: 0`): replaying a runtime would duplicate its output; the executor
 * requeues the dispatches that never started and hands the others to the lost-run policy.
 * A job enqueued by an earlier version (one `run.execute` payload, id `<runId>-<sequence>`) is
 * a batch of one.
 *
 * Traces: each dispatch runs in a `run.execute` span (kind consumer) whose parent is the
 * `run.dispatch` span the dispatch carries (`trace`, written with the outbox row), so the
 * execution and its appends continue the trace of the request that dispatched it.
 */
@Injectable()
export class RunExecutionProcessor implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly log = new Logger(RunExecutionProcessor.name);
  private worker?: Worker<RunExecuteBatch>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly executor: RunExecutor,
  ) {}

  onApplicationBootstrap(): void {
    this.worker = new Worker<RunExecuteBatch>(RUN_EXECUTION_QUEUE, (job) => this.process(job), {
      connection: bullConnection(this.config.REDIS_URL),
      prefix: this.config.REDIS_PREFIX,
      // a batch job stays active while its dispatches run or wait parked for a slot (the executor
      // bounds both); the spare jobs keep taking new batches meanwhile, so a newcomer organization's
      // dispatch is seen at once instead of queuing unseen behind waiting ones
      concurrency: this.executor.jobConcurrency,
      maxStalledCount: 0,
    });
    this.worker.on('failed', (job, err) => {
      // a stalled job (its worker died) or a batch that failed as a whole: unstarted dispatches go
      // back to the queue, the others to the lost-run policy (a no-op for runs that ended)
      if (job) void this.executor.lostBatch(dispatchesOf(job), err.message);
    });
    this.worker.on('error', (err) => this.log.warn(`worker: ${err.message}`));
    // back-pressure: while the executor's parking is full, take no more jobs (the backlog waits in the queue)
    const worker = this.worker;
    this.executor.setIntake({
      pause: () => void worker.pause(true).catch(() => undefined),
      resume: () => {
        if (worker.isPaused()) worker.resume();
      },
      limit: (jobs) => {
        worker.concurrency = jobs;
      },
    });
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
  async process(job: Pick<Job<RunExecuteBatch | RunExecuteJob>, 'data'> & { timestamp?: number; id?: string }): Promise<void> {
    try {
      await this.executor.executeBatch(dispatchesOf(job), { enqueuedAt: job.timestamp, around: isTracing() ? traced : undefined });
    } catch (e) {
      if (e instanceof ExecutionError && !e.retryable) throw new UnrecoverableError(e.message);
      throw e;
    }
  }
}

/** The dispatches of a job: a batch, or (a job of an earlier version) one payload whose id names its trigger. */
function dispatchesOf(job: { data: unknown; id?: string }): RunExecutionJob[] {
  const batch = RunExecuteBatchSchema.safeParse(job.data);
  if (batch.success) return batch.data.dispatches.map((d: RunDispatchItem) => d as RunExecutionJob);
  // job ids of single jobs are <runId>-<trigger sequence>
  const seq = job.id ? Number(job.id.slice(job.id.lastIndexOf('-') + 1)) : NaN;
  return [{ triggerSequence: Number.isInteger(seq) && seq > 0 ? seq : 1, job: job.data as RunExecuteJob }];
}

/** Each execution in its `run.execute` span, a child of the dispatch's. */
const traced: ExecutionWrapper = (job, triggerSequence, run) => withSpan('run.execute', executeSpan(job, triggerSequence), () => run());

/** The `run.execute` span of a dispatch: a child of the dispatch span it carries, with the run's ids. */
function executeSpan(data: RunExecuteJob, triggerSequence: number): SpanOptions {
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
      'messaging.message.id': `${data.runId}-${triggerSequence}`,
    },
  };
}
