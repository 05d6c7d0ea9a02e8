import type { Logger } from '@nestjs/common';

/**
 * A background task run every `intervalMs` in one process, never overlapping itself: a tick that
 * finds the previous one still running is skipped. A failure is logged as a warning (`what failed:
 * reason`) and the next tick tries again. The timer does not keep the process alive. Used by the
 * worker's retention and partition-maintenance jobs.
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
