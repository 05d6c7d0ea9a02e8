import { Injectable, Logger } from '@nestjs/common';
import { RunQueries, RuntimeOperations, isTerminal } from '#libs/runs';
import { RuntimeRegistry } from '#libs/runtimes';

/** Resumptions after a lost execution, per run at most; past them a lost execution fails the run (hand-offs by a stopping worker do not count). */
export const MAX_RESUMPTIONS = 3;

/**
 * What happens to a run whose execution was lost (its worker died, its job stalled, its lease
 * expired). A run whose revision's runtime is `resumable` (e.g. `a2a`, which re-attaches to its
 * upstream task) gets a new execution (`run.execution_resumed`, trigger `resumed`), at most
 * MAX_RESUMPTIONS times; any other run is failed with `why`. Safe with many callers at once: the
 * resumption is guarded by the run's last sequence and failing is a guarded append.
 */
@Injectable()
export class LostExecutionPolicy {
  private readonly log = new Logger(LostExecutionPolicy.name);

  constructor(
    private readonly queries: RunQueries,
    private readonly ops: RuntimeOperations,
    private readonly registry: RuntimeRegistry,
  ) {}

  /**
   * Returns `resumed`, `failed`, or null when the run needed nothing (ended, blocked, moved on).
   * `handedOn`: the execution's worker is stopping gracefully and hands the run on (not a loss).
   * `lastSequence`: the verdict was made on the run at this sequence; if the run has moved since, or
   * waits on its caller, nothing happens (null) — failing is then guarded by that sequence.
   */
  async handle(orgId: string, runId: string, why: string, opts: { handedOn?: boolean; lastSequence?: number } = {}): Promise<'resumed' | 'failed' | null> {
    const run = await this.queries.get(orgId, runId);
    if (!run || run.blockedReason || isTerminal(run.status)) return null;
    // judged at `lastSequence` (the sweeper's candidate): a run that moved since is not lost
    if (opts.lastSequence !== undefined && run.lastSequence !== opts.lastSequence) return null;
    if (await this.resumable(orgId, run.revisionId)) {
      const r = await this.ops.resumeExecution(orgId, runId, why, MAX_RESUMPTIONS, opts);
      if (r?.outcome === 'resumed') {
        this.log.warn(`run ${runId}: ${why}; resumed (attempt ${r.attempt})`);
        return 'resumed';
      }
      if (!r) return null;
      why = `${why} (after ${MAX_RESUMPTIONS} resumptions)`;
    }
    return (await this.ops.failRun(orgId, runId, why, { expectedSequence: opts.lastSequence })) ? 'failed' : null;
  }

  private async resumable(orgId: string, revisionId: string): Promise<boolean> {
    const raw = await this.queries.revisionRuntime(orgId, revisionId);
    try {
      return this.registry.parse(raw).runtime.resumable === true;
    } catch {
      return false;
    }
  }
}
