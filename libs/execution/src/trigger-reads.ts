import { Injectable } from '@nestjs/common';
import type { RunExecuteJob } from '#libs/contracts';
import { ExecutionReads } from '#libs/runs';
import type { ChildRunResult, ClosedInteraction, RecordedRun, RuntimeTrigger } from '#libs/runtimes';

/**
 * What an execution reads to hand its runtime, in the runtimes' shapes (libs/runtimes), folded from
 * ExecutionReads: the RuntimeTrigger it runs for (for a resumption, with the trigger of the lost
 * execution it replaces, rebuilt from the log), what the log holds of the run (RuntimeContext.recorded)
 * and what a child produced (RuntimeContext.childResult). Not retried here: RunExecutor calls each
 * through an outage (EXECUTION_OUTAGE_RETRY_MS).
 */
@Injectable()
export class TriggerReads {
  /** A resumed trigger → the sequence of the lost execution's trigger (its delegations' key). */
  private readonly lostSequences = new WeakMap<RuntimeTrigger, number>();

  constructor(private readonly reads: ExecutionReads) {}

  /**
   * The RuntimeTrigger of a job: for an answer or an expiry the closed interaction (with the
   * runtime's state), for a settled child the link and the child's status (with the state given
   * at delegation, read from the parent's `run.linked` event). Null when that is gone.
   */
  async triggerOf(job: RunExecuteJob, triggerSequence: number | null): Promise<RuntimeTrigger | null> {
    const { orgId, runId } = job;
    if (job.trigger === 'created') return { kind: 'created' };
    if (job.trigger === 'resumed') {
      const lost = triggerSequence !== null ? await this.lostTrigger(job, triggerSequence) : null;
      const t: RuntimeTrigger = { kind: 'resumed', attempt: job.attempt ?? 1, ...(lost && { lost: lost.trigger }) };
      if (lost) this.lostSequences.set(t, lost.sequence);
      return t;
    }
    if ((job.trigger === 'continued' || job.trigger === 'interaction_expired') && job.interactionId) {
      const ir = await this.reads.interaction(orgId, runId, job.interactionId);
      if (!ir) return null;
      const response = (ir.response ?? {}) as { decision?: ClosedInteraction['decision']; optionId?: string };
      const interaction: ClosedInteraction = {
        id: ir.id,
        kind: ir.kind,
        blocking: ir.blocking,
        status: ir.status,
        ...(response.decision && { decision: response.decision }),
        ...(response.optionId && { optionId: response.optionId }),
        ...(ir.request.state !== undefined && { state: ir.request.state }),
      };
      return { kind: job.trigger === 'continued' ? 'interaction_responded' : 'interaction_expired', interaction };
    }
    if (job.trigger === 'link_settled' && job.linkId) {
      const found = await this.reads.childLink(orgId, runId, job.linkId);
      if (!found) return null;
      const { link, state } = found;
      return { kind: 'link_settled', link: { linkId: link.id, childRunId: link.childRunId, kind: link.kind, status: link.other.status, ...(state !== undefined && { state }) } };
    }
    return { kind: 'continued' };
  }

  /** The sequence of the lost execution's trigger that the resumed `trigger` replaces (triggerOf), if it was found. */
  lostSequenceOf(trigger: RuntimeTrigger): number | undefined {
    return this.lostSequences.get(trigger);
  }

  /**
   * The trigger of the execution a resumption (at `resumedAt`) replaces, rebuilt from the log: the
   * newest trigger event before it (a user message: `created` for the run's first, else
   * `continued`; an answer; an expiry that continues; a settled child it awaits). Null when none
   * (or it is gone).
   */
  private async lostTrigger(job: RunExecuteJob, resumedAt: number): Promise<{ trigger: Exclude<RuntimeTrigger, { kind: 'resumed' }>; sequence: number } | null> {
    const e = await this.reads.triggerBefore(job.orgId, job.runId, resumedAt);
    if (!e) return null;
    const { orgId, runId } = job;
    const p = e.payload as { interactionId?: string; linkId?: string };
    let t: RuntimeTrigger | null;
    if (e.type === 'message.added') t = e.first ? { kind: 'created' } : { kind: 'continued' };
    else if (e.type === 'interaction.responded' && p.interactionId) t = await this.triggerOf({ orgId, runId, trigger: 'continued', interactionId: p.interactionId }, null);
    else if (e.type === 'interaction.expired' && p.interactionId) t = await this.triggerOf({ orgId, runId, trigger: 'interaction_expired', interactionId: p.interactionId }, null);
    else if (e.type === 'run.link_updated' && p.linkId) t = await this.triggerOf({ orgId, runId, trigger: 'link_settled', linkId: p.linkId }, null);
    else t = null;
    return t && t.kind !== 'resumed' ? { trigger: t, sequence: e.sequence } : null;
  }

  /** What the log holds of the run now (RuntimeContext.recorded). */
  async recorded(orgId: string, runId: string): Promise<RecordedRun> {
    const [view, operationIds] = await Promise.all([this.reads.view(orgId, runId), this.reads.operationIds(orgId, runId)]);
    return {
      status: view.run.status,
      blockedReason: view.run.blockedReason,
      messageIds: view.history.map((m) => m.messageId),
      artifacts: view.artifacts.map((a) => ({ artifactId: a.artifactId, parts: a.parts, complete: a.complete })),
      operationIds,
      lastSequence: view.run.lastSequence,
    };
  }

  /** What a child of `runId` produced (null when `childRunId` is not its child). */
  async childResult(orgId: string, runId: string, childRunId: string): Promise<ChildRunResult | null> {
    const children = await this.reads.children(orgId, runId);
    if (!children.some((l) => l.childRunId === childRunId)) return null;
    const view = await this.reads.view(orgId, childRunId);
    return {
      runId: childRunId,
      status: view.run.status,
      blockedReason: view.run.blockedReason,
      statusMessage: view.statusMessage,
      messages: view.history.filter((m) => m.role === 'agent'),
      artifacts: view.artifacts.map(({ complete: _c, extensions: _e, ...a }) => a),
    };
  }
}
