import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { RUN_EXECUTION_QUEUE, RunExecuteJobSchema, type CanonicalMessage, type RunExecuteJob } from '#libs/contracts';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AppError } from '#libs/common';
import { RunNotifier, RunRepository, RunService, bullConnection, isTerminal } from '#libs/runs';
import { defaultRuntimeRegistry, type AgentRuntime } from '#libs/runtimes';
import { BatchingRuntimeContext } from './batching-runtime-context.js';

/** How often a held execution re-checks its run for cancellation when no wake-up arrives (ms). */
const CANCEL_POLL_MS = 2_000;

/**
 * BullMQ processor for `run.execute`: parse the job, run the revision's runtime against a
 * RuntimeContext whose every method goes through RunService (the append path), map errors.
 * A run canceled meanwhile aborts the runtime's signal (cancellation channel, with a poll as the
 * safety net). Stalled jobs (dead worker) are not
 * retried (`maxStalledCount: 0`): replaying a runtime would duplicate its output, so the run is
 * failed instead, here on `failed` or later by the sweeper.
 */
@Injectable()
export class RunExecutionProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunExecutionProcessor.name);
  private readonly registry = defaultRuntimeRegistry();
  private readonly configs = new Map<string, { runtime: AgentRuntime; config: unknown }>();
  /** Executions in progress, by run id (a run may have more than one): a cancellation aborts them. */
  private readonly inFlight = new Map<string, Set<AbortController>>();
  private stopCancelListener?: () => void;
  private worker?: Worker<RunExecuteJob>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RunService,
    private readonly runRepo: RunRepository,
    private readonly notifier: RunNotifier,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // one subscription for every cancellation, instead of one per executing run
    this.stopCancelListener = await this.notifier.onCanceled((runId) => this.inFlight.get(runId)?.forEach((c) => c.abort()));
    this.worker = new Worker<RunExecuteJob>(RUN_EXECUTION_QUEUE, (job) => this.process(job), {
      connection: bullConnection(this.config.REDIS_URL),
      prefix: this.config.REDIS_PREFIX,
      concurrency: this.config.WORKER_CONCURRENCY,
      maxStalledCount: 0,
    });
    this.worker.on('failed', (job, err) => {
      if (!job) return;
      const data = RunExecuteJobSchema.safeParse(job.data);
      if (!data.success) return;
      this.log.warn(`run ${data.data.runId}: job failed: ${err.message}`);
      void this.runs.failRun(data.data.orgId, data.data.runId, 'the execution was lost').catch(() => undefined);
    });
    this.worker.on('error', (err) => this.log.warn(`worker: ${err.message}`));
  }

  /** Stop executing first (module destroy), while the database and Redis are still open. */
  async onModuleDestroy(): Promise<void> {
    this.stopCancelListener?.();
    for (const set of this.inFlight.values()) for (const c of set) c.abort();
    await this.worker?.close();
  }

  /** Exposed for tests: process one job payload as the BullMQ worker would. */
  async process(job: Pick<Job<RunExecuteJob>, 'data'>): Promise<void> {
    const parsed = RunExecuteJobSchema.safeParse(job.data);
    if (!parsed.success) throw new UnrecoverableError(`invalid run.execute payload: ${parsed.error.message}`);
    const { orgId, runId, inputMessageId } = parsed.data;

    // the job usually carries the run's identity and input; otherwise read them (one query)
    let run: { threadId: string; agentId: string; revisionId: string };
    let input: CanonicalMessage;
    if (parsed.data.context) {
      ({ input, ...run } = parsed.data.context);
    } else {
      const found = await this.runRepo.executionInput(orgId, runId, inputMessageId);
      if (!found || isTerminal(found.run.status)) return;
      if (!found.message) throw new UnrecoverableError(`run ${runId}: input message ${inputMessageId} not found`);
      run = found.run;
      input = found.message;
    }

    let entry = this.configs.get(run.revisionId);
    if (!entry) {
      const raw = await this.runRepo.revisionRuntime(orgId, run.revisionId);
      try {
        entry = this.registry.parse(raw);
      } catch (e) {
        await this.runs.failRun(orgId, runId, 'the agent revision has an invalid runtime');
        throw new UnrecoverableError(`run ${runId}: ${e instanceof Error ? e.message : String(e)}`);
      }
      this.configs.set(run.revisionId, entry);
    }

    const abort = new AbortController();
    const running = this.inFlight.get(runId) ?? new Set<AbortController>();
    running.add(abort);
    this.inFlight.set(runId, running);
    // safety net for a lost cancellation signal (long-running executions only)
    const poll = setInterval(() => {
      void this.runs
        .getRun(orgId, runId)
        .then((now) => (!now || isTerminal(now.status)) && abort.abort())
        .catch(() => undefined);
    }, CANCEL_POLL_MS);
    const ctx = new BatchingRuntimeContext(this.runs, { orgId, runId, threadId: run.threadId, agentId: run.agentId, revisionId: run.revisionId }, input, abort.signal);
    try {
      await entry.runtime.execute(entry.config, ctx);
      await ctx.flush();
    } catch (e) {
      if (e instanceof AppError && e.code === 'run.terminal') return;
      // keep what the runtime produced before it failed
      await ctx.flush().catch(() => undefined);
      const reason = e instanceof Error ? e.message : String(e);
      this.log.error(`run ${runId}: runtime failed: ${reason}`);
      await this.runs.failRun(orgId, runId, 'the agent runtime failed');
      if (e instanceof AppError && !e.retryable) throw new UnrecoverableError(reason);
      throw e;
    } finally {
      clearInterval(poll);
      running.delete(abort);
      if (running.size === 0 && this.inFlight.get(runId) === running) this.inFlight.delete(runId);
    }
  }
}
