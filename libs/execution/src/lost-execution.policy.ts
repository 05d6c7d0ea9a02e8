import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { Metrics } from '#libs/metrics';
import { ExecutionReads, RuntimeOperations, isTerminal } from '#libs/runs';
import { RuntimeRegistry, isResumable } from '#libs/runtimes';

/**
 * What happens to a run whose execution was lost (its worker died, its job stalled, its lease
 * expired). A run whose revision's runtime is resumable (AgentRuntime.resumable: `scripted`, which
 * replays its steps; `http`, which asks its backend again; `a2a`, which re-attaches to its upstream
 * task) gets a new execution (`run.execution_resumed`, trigger `resumed`), at most
 * EXECUTION_MAX_RESUMPTIONS times (hand-offs by a stopping worker do not count); past them, or for
 * any other runtime, the run is failed with `why`. Counted in `aaas_run_resumptions_total`. Safe
 * with many callers at once: the resumption is guarded by the run's last sequence and failing is a
 * guarded append.
 */
@Injectable()
export class LostExecutionPolicy {
  private readonly log = new Logger(LostExecutionPolicy.name);
  private readonly maxResumptions: number;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly reads: ExecutionReads,
    private readonly ops: RuntimeOperations,
    private readonly registry: RuntimeRegistry,
    private readonly metrics: Metrics,
  ) {
    this.maxResumptions = config.EXECUTION_MAX_RESUMPTIONS;
  }

  /**
   * Returns `resumed`, `failed`, or null when the run needed nothing (ended, blocked, moved on).
   * `handedOn`: the execution's worker is stopping gracefully and hands the run on (not a loss).
   * `lastSequence`: the verdict was made on the run at this sequence; if the run has moved since, or
   * waits on its caller, nothing happens (null) — failing is then guarded by that sequence.
   * `epoch`: the caller is the execution itself (handing its run on), with this fencing token; if a
   * newer execution holds the run, nothing happens (null). A resumption takes the run over
   * (RuntimeOperations.resumeExecution: the fencing token grows in the same statement).
   */
  async handle(orgId: string, runId: string, why: string, opts: { handedOn?: boolean; lastSequence?: number; epoch?: number } = {}): Promise<'resumed' | 'failed' | null> {
    const run = await this.reads.run(orgId, runId);
    if (!run || run.blockedReason || isTerminal(run.status)) return null;
    // judged at `lastSequence` (the sweeper's candidate): a run that moved since is not lost
    if (opts.lastSequence !== undefined && run.lastSequence !== opts.lastSequence) return null;
    let outcome: 'exhausted' | 'failed' = 'failed';
    if (await this.resumable(orgId, run.revisionId)) {
      const r = await this.ops.resumeExecution(orgId, runId, why, this.maxResumptions, opts);
      if (r?.outcome === 'resumed') {
        this.metrics.resumptions.inc({ outcome: opts.handedOn ? 'handed_on' : 'resumed' });
        this.log.warn(`run ${runId}: ${why}; resumed (attempt ${r.attempt})`);
        return 'resumed';
      }
      if (!r) return null;
      why = `${why} (after ${this.maxResumptions} resumptions)`;
      outcome = 'exhausted';
    }
    const failed = await this.ops.failRun(orgId, runId, why, { expectedSequence: opts.lastSequence, epoch: opts.epoch });
    if (!failed) return null;
    this.metrics.resumptions.inc({ outcome });
    return 'failed';
  }

  /** Whether the revision's runtime is resumable (one that does not parse is not). */
  private async resumable(orgId: string, revisionId: string): Promise<boolean> {
    let loaded = false;
    try {
      const { runtime, config } = await this.registry.parseRevision(revisionId, async () => {
        const raw = await this.reads.revisionRuntime(orgId, revisionId);
        loaded = true;
        return raw;
      });
      return isResumable(runtime, config);
    } catch (e) {
      // a read that failed goes to the caller, as before; a config that does not parse is not resumable
      if (!loaded) throw e;
      return false;
    }
  }
}
