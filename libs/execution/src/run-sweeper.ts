import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AppError } from '#libs/common';
import { CancelRunHandler, RuntimeOperations, SweeperReads } from '#libs/runs';
import { LostExecutionPolicy } from './lost-execution.policy.js';

/** Candidates read per query, and at most per sweep. */
const PAGE = 100;
const MAX_PER_SWEEP = 5_000;

/**
 * Fails runs whose execution was lost — or resumes them when their runtime is resumable
 * (LostExecutionPolicy). Only active runs that are not blocked on their caller
 * (a run waiting for an answer needs no execution) and whose dispatch is not waiting in the
 * outbox are considered:
 * - the execution lease for the run's current trigger expired (its executor died while running:
 *   detected within 2 × EXECUTION_HEARTBEAT_MS);
 * - or the run has been unchanged for RUN_STALE_AFTER_MS with no live lease (its execution was
 *   claimed by a worker that died before it wrote one). A dispatch not yet claimed is queued, not
 *   lost: if its job is gone (Redis lost it), the outbox relay enqueues it again.
 * Each pass also expires open interactions past their `expiresAt` and finishes cancel cascades
 * (active children of canceled or failed parents).
 * Runs in every API process and every worker, every `RUN_SWEEP_INTERVAL_MS` (keep it at most half
 * a heartbeat)
 * — so also when no worker is alive. Safe with many: failing is a guarded append, so a run is
 * failed once.
 */
@Injectable()
export class RunSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(RunSweeper.name);
  private timer?: NodeJS.Timeout;
  private sweeping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RuntimeOperations,
    private readonly reads: SweeperReads,
    private readonly cancel: CancelRunHandler,
    private readonly lost: LostExecutionPolicy,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.sweep(), this.config.RUN_SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  /** One pass; returns the ids of the runs it failed (resumed runs are not among them). */
  async sweep(now = new Date()): Promise<string[]> {
    if (this.sweeping) return [];
    this.sweeping = true;
    const failed: string[] = [];
    try {
      // page through every candidate (runs whose job is only queued stay candidates: paging keeps
      // them from hiding the rest), up to MAX_PER_SWEEP per pass
      const olderThan = new Date(now.getTime() - this.config.RUN_STALE_AFTER_MS);
      const candidates: Awaited<ReturnType<SweeperReads['staleCandidates']>> = [];
      for (let after: { updatedAt: Date; id: string } | undefined; candidates.length < MAX_PER_SWEEP; ) {
        const page = await this.reads.staleCandidates(olderThan, PAGE, after);
        candidates.push(...page);
        if (page.length < PAGE) break;
        const last = page.at(-1)!;
        after = { updatedAt: last.updatedAt, id: last.id };
      }
      for (const c of candidates) {
        // a run whose dispatch is still in the outbox is queued (not a candidate): its execution
        // has not started. Otherwise its execution was claimed by a worker; it is lost when that
        // execution's lease expired, or when the run has not moved for RUN_STALE_AFTER_MS and no
        // live lease says anything runs (a short execution, which writes no lease, ends well before)
        const trigger = await this.reads.lastTrigger(c.orgId, c.id);
        const leaseOfTrigger = trigger !== null && c.leaseTrigger === trigger;
        let why: string;
        if (leaseOfTrigger && c.leaseExpired) why = 'the execution was lost (its lease expired)';
        // a live lease of an older trigger is a live execution too (an a2a follower while a later
        // message was only forwarded upstream): resuming beside it would record everything twice
        else if (c.stale && !c.leaseLive) why = 'the execution was lost (no live execution)';
        else continue;
        // judged on the run as the candidate query saw it: one that moved since (the reads above can
        // take seconds during an outage) or now waits on its caller is left alone
        const outcome = await this.lost.handle(c.orgId, c.id, why, { lastSequence: c.lastSequence });
        if (outcome === 'failed') {
          failed.push(c.id);
          this.log.warn(`run ${c.id}: failed by the sweeper: ${why}`);
        }
      }
      await this.expireInteractions();
      await this.finishCascades();
    } catch (e) {
      this.log.warn(`sweep failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.sweeping = false;
    }
    return failed;
  }

  /** Expire open interactions whose `expiresAt` passed (each as its runtime declared). */
  private async expireInteractions(): Promise<void> {
    for (const ir of await this.reads.expiredInteractions(PAGE)) {
      try {
        if (await this.runs.expireInteraction(ir.orgId, ir.runId, ir.id)) this.log.log(`run ${ir.runId}: interaction ${ir.id} expired`);
      } catch (e) {
        this.log.warn(`run ${ir.runId}: expiring interaction ${ir.id} failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }

  /**
   * Cancel active children of canceled or failed parents (RunLink): a cascade the canceling
   * process did not finish (it died half way), or a parent failed by the platform.
   */
  private async finishCascades(): Promise<void> {
    for (const c of await this.reads.orphanedChildren(PAGE)) {
      try {
        await this.cancel.execute({ orgId: c.orgId, runId: c.runId, reason: `parent run ${c.parentRunId} was ${c.parentStatus}` });
      } catch (e) {
        if (!(e instanceof AppError && (e.code === 'run.not_cancelable' || e.code === 'run.not_found'))) {
          this.log.warn(`run ${c.runId}: cascading cancel failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }
  }
}
