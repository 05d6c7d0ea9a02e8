import { z } from 'zod';

/** Queue that hands runs to the worker app. */
export const RUN_EXECUTION_QUEUE = 'run-execution';

/**
 * Job `run.execute`: execute (or continue) a run with its revision's runtime.
 * `trigger` says why: the run was created, or a caller added input to it.
 * `inputMessageId` is the user message that triggered this execution.
 */
export const RunExecuteJobSchema = z.object({
  orgId: z.string().uuid(),
  runId: z.string().uuid(),
  trigger: z.enum(['created', 'continued']),
  inputMessageId: z.string(),
});
export type RunExecuteJob = z.infer<typeof RunExecuteJobSchema>;
export const RUN_EXECUTE_JOB = 'run.execute';

/** Job `run.sweep` (repeatable): fail runs whose execution was lost. */
export const RUN_SWEEP_JOB = 'run.sweep';
