import { Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';

/**
 * A background task run every `intervalMs` in one process, never overlapping itself: a tick that
 * finds the previous one still running is skipped. A failure is logged as a warning (`what failed:
 * reason`) and the next tick tries again. The timer does not keep the process alive. Used by the
 * worker's jobs (PeriodicJob): retention, partition maintenance, the fold of run_counts.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    private readonly what: string,
    private readonly run: () => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  /** Tick every `intervalMs` (0: never). */
  start(intervalMs: number): void {
    if (intervalMs === 0) return;
    this.timer = setInterval(() => void this.tick(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One run now, unless one is in progress; resolves when it ends (never rejects). */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.run();
    } catch (e) {
      this.log.warn(`${this.what} failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.running = false;
    }
  }
}

/**
 * A worker job: a PeriodicTask named `what` running `run` every `intervalMs` ms (0: never) from
 * application bootstrap until the module is destroyed, logging as the subclass.
 */
export abstract class PeriodicJob implements OnApplicationBootstrap, OnModuleDestroy {
  protected readonly log: Logger;
  protected readonly task: PeriodicTask;

  constructor(
    what: string,
    run: () => Promise<unknown>,
    private readonly intervalMs: number,
  ) {
    this.log = new Logger(new.target.name);
    this.task = new PeriodicTask(what, run, this.log);
  }

  onApplicationBootstrap(): void {
    this.task.start(this.intervalMs);
  }

  onModuleDestroy(): void {
    this.task.stop();
  }
}
