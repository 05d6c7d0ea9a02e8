import { AppError } from '#libs/common';
import type { RunState, RunViews } from '#libs/runs';
import { canSeeTask, type A2ACaller } from './a2a.types.js';

/**
 * `run.not_found` (A2A TaskNotFound) for a task the caller may not see: said exactly as for a
 * task that does not exist, so a task's existence does not leak to other principals.
 */
export function taskNotFound(taskId: string): AppError {
  return new AppError('run.not_found', `run ${taskId} not found`, { details: { runId: taskId } });
}

/**
 * The task `taskId` of the agent when `caller` may see it (see canSeeTask). A direct reply's run
 * (kind `reply`: its A2A view is a Message) is no task. Errors: `run.not_found`.
 */
export async function requireVisibleRun(runs: RunViews, orgId: string, agentId: string, caller: A2ACaller, taskId: string): Promise<RunState> {
  const run = await runs.require(orgId, taskId, agentId);
  if (run.kind !== 'execution' || !canSeeTask(caller, run.createdBy)) throw taskNotFound(taskId);
  return run;
}

/** The owner filter of a caller's listings and searches: none for a caller who sees every task. */
export function ownerFilter(caller: A2ACaller): { createdBy?: string | null } {
  return caller.allTasks ? {} : { createdBy: caller.id };
}

/** A page-token fingerprint bound to the caller: a token one caller got is refused for another. */
export function callerBound(fingerprint: string, caller: A2ACaller): string {
  return caller.allTasks ? fingerprint : `${fingerprint}|${caller.id ?? ''}`;
}

/** An anonymous caller (an agent without authentication), who owns nothing it could list. */
export function isAnonymous(caller: A2ACaller): boolean {
  return !caller.allTasks && caller.id === null;
}
