import { hostname } from 'node:os';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { isDependencyUnavailable } from '#libs/common';
import type { RunExecuteJob } from '#libs/contracts';
import { RuntimeOperations, isTerminal } from '#libs/runs';
import { Metrics } from '#libs/metrics';
import { ExecutionAborted } from '#libs/runtimes';
import { ExecutionSlots } from './execution-slots.js';

/**
 * The lease of one execution, and the executor's check of the fence at its heartbeat
 * (docs/architecture.md "Leases", "The fence"): `heartbeat` renews the run's lease with the
 * execution's fencing token (RuntimeOperations.heartbeat, refused by the lease statement when the
 * run's epoch is newer) and keeps its slot; `fenced` is the one way a fenced execution is aborted,
 * whether its heartbeat found the newer epoch or one of its writes was refused
 * (BatchingRuntimeContext's `onFenced`). The epoch itself comes from the dispatch's claim
 * (RunExecutor).
 */
@Injectable()
export class ExecutionLease {
  private readonly log = new Logger(ExecutionLease.name);
  /** Who holds a lease: this process (host:pid). */
  readonly owner = `${hostname()}:${process.pid}`;
  /** EXECUTION_HEARTBEAT_MS: how often a long execution renews its lease and slot (the lease lasts 1.5 of them). */
  private readonly heartbeatMs: number;
  /** RUN_STALE_AFTER_MS: a run unchanged this long with no live lease is taken for lost by a sweeper. */
  private readonly staleAfterMs: number;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly ops: RuntimeOperations,
    private readonly slots: ExecutionSlots,
    private readonly metrics: Metrics,
  ) {
    this.heartbeatMs = config.EXECUTION_HEARTBEAT_MS;
    this.staleAfterMs = config.RUN_STALE_AFTER_MS;
  }

  /**
   * Start the execution's heartbeat; returns its stop. An execution whose run waited long holds a
   * lease from its claim (`claimLease`, 1.5 heartbeats); one that runs longer than a quarter
   * heartbeat takes or renews it every heartbeat (the first a quarter in): if this process dies the lease expires and a sweeper resumes or fails the run
   * within 2 heartbeats. The heartbeat also keeps the slot and reads the run's status: the
   * safety net for a lost cancellation signal (a terminal or gone run aborts `abort`). Short
   * executions (most) never renew it. A renewal the database could not take is tried again
   * every second (not a heartbeat later): a short outage must not let the lease expire and the
   * sweeper declare this live execution lost. A heartbeat that finds a newer fencing token than
   * `epoch` (a takeover: docs/architecture.md "The fence") takes no lease and aborts the execution
   * as fenced: its backend request is aborted, its upstream call released, and its next write
   * would be refused anyway.
   */
  /**
   * The lease a claim takes for an execution of this process (RunDispatchRepository.claim): 1.5
   * heartbeats, on a run unchanged for half of RUN_STALE_AFTER_MS (one that could look stale
   * before the execution's first heartbeat, a quarter heartbeat in).
   */
  get claimLease(): { owner: string; ttlMs: number; idleForMs: number } {
    return { owner: this.owner, ttlMs: this.heartbeatMs * 1.5, idleForMs: this.staleAfterMs / 2 };
  }

  heartbeat(
    job: RunExecuteJob,
    agentId: string,
    triggerSequence: number | null,
    slot: { id: string; at: number },
    slotTtl: number,
    abort: AbortController,
    epoch: number | undefined,
  ): () => void {
    const { orgId, runId } = job;
    let ended = false;
    let again: NodeJS.Timeout | undefined;
    const renew = () => {
      clearTimeout(again);
      again = undefined;
      void this.ops
        .heartbeat(orgId, runId, this.owner, triggerSequence, this.heartbeatMs * 1.5, epoch)
        .then((r) => {
          if (!r || isTerminal(r.status)) abort.abort(new ExecutionAborted('canceled'));
          else if (epoch !== undefined && r.epoch !== epoch) this.fenced(runId, abort, `its heartbeat found epoch ${r.epoch}, it holds ${epoch}`);
        })
        .catch((e: unknown) => {
          if (!ended && isDependencyUnavailable(e)) again = setTimeout(renew, Math.min(1_000, this.heartbeatMs / 4));
        });
    };
    const beat = () => {
      slot.at = Date.now();
      void this.slots.acquire(orgId, agentId, slot.id, slotTtl);
      renew();
    };
    let poll: NodeJS.Timeout | undefined;
    const first = setTimeout(() => {
      beat();
      poll = setInterval(beat, this.heartbeatMs);
    }, Math.max(1, Math.floor(this.heartbeatMs / 4)));
    return () => {
      ended = true;
      clearTimeout(again);
      clearTimeout(first);
      clearInterval(poll);
    };
  }

  /**
   * A takeover fenced this execution (docs/architecture.md "The fence"): it is aborted (reason
   * `fenced`: its backend request and upstream call are released, nothing is told to cancel) and
   * counted, once.
   */
  fenced(runId: string, abort: AbortController, how: string): void {
    if (abort.signal.aborted) return;
    this.log.warn(`run ${runId}: a newer execution took it over (${how}); this one stops`);
    this.metrics.executionsStopped.inc({ reason: 'fenced' });
    abort.abort(new ExecutionAborted('fenced'));
  }
}
