import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { RunExecutionQueue, RunQueries, RuntimeOperations } from '#libs/runs';

/** BullMQ job states in which an execution is still going to happen or happening. */
const LIVE_JOB_STATES = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/**
 * Fails runs whose execution was lost: active, not blocked on the caller, unchanged for
 * RUN_STALE_AFTER_MS, and whose current `run.execute` job is no longer live in BullMQ (the job
 * was lost with Redis, or failed because its worker died). A run held by a live job (e.g. a
 * long-running agent) is left alone however old. Safe with several workers: failing is a guarded
 * append, so a run is failed once.
 */
@Injectable()
export class RunSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunSweeper.name);
  private timer?: NodeJS.Timeout;
  private sweeping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RuntimeOperations,
    private readonly runRepo: RunQueries,
    private readonly queue: RunExecutionQueue,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.sweep(), this.config.RUN_SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  /** One pass; returns the ids of the runs it failed. */
  async sweep(now = new Date()): Promise<string[]> {
    if (this.sweeping) return [];
    this.sweeping = true;
    const failed: string[] = [];
    try {
      const candidates = await this.runRepo.staleCandidates(new Date(now.getTime() - this.config.RUN_STALE_AFTER_MS));
      for (const c of candidates) {
        const trigger = await this.runRepo.lastUserMessage(c.orgId, c.id);
        const state = trigger ? await this.queue.jobState(c.id, trigger.sequence) : 'unknown';
        if (LIVE_JOB_STATES.has(state)) continue;
        const run = await this.runs.failRun(c.orgId, c.id, 'the execution was lost (no live job)');
        if (run) {
          failed.push(c.id);
          this.log.warn(`run ${c.id}: failed by the sweeper (job state: ${state})`);
        }
      }
    } catch (e) {
      this.log.warn(`sweep failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.sweeping = false;
    }
    return failed;
  }
}
