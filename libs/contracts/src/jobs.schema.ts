import { z } from 'zod';
import { CanonicalMessageSchema } from './parts.schema.js';

/** Queue that hands runs to the worker app. */
export const RUN_EXECUTION_QUEUE = 'run-execution';

/**
 * Job `run.execute`: execute (or continue) a run with its revision's runtime.
 * `trigger` says why: the run was created, or a caller added input to it.
 * `inputMessageId` is the user message that triggered this execution.
 * `context` (optional) carries what the worker would otherwise read first: the run's identity and
 * the input message, as committed (small messages only). The log stays the truth: the runtime's
 * first append is guarded, so a run canceled meanwhile still stops it.
 */
export const RunExecuteJobSchema = z.object({
  orgId: z.string().uuid(),
  runId: z.string().uuid(),
  trigger: z.enum(['created', 'continued']),
  inputMessageId: z.string(),
  context: z
    .object({
      threadId: z.string(),
      agentId: z.string().uuid(),
      revisionId: z.string().uuid(),
      input: CanonicalMessageSchema,
    })
    .optional(),
});
export type RunExecuteJob = z.infer<typeof RunExecuteJobSchema>;
export const RUN_EXECUTE_JOB = 'run.execute';

/** Largest input message (JSON bytes) carried inside a job; larger ones are read by the worker. */
export const JOB_INLINE_INPUT_MAX_BYTES = 16 * 1024;
