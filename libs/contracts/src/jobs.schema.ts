import { z } from 'zod';
import { CanonicalMessageSchema } from './parts.schema.js';

/** Queue that hands runs to the worker app. */
export const RUN_EXECUTION_QUEUE = 'run-execution';

/** At most this many activated extensions ride in a job's `context` (more: the worker reads them). */
export const JOB_INLINE_EXTENSIONS_MAX = 16;

/**
 * Job `run.execute`: execute (or continue) a run with its revision's runtime.
 * `trigger` says why: the run was created, a caller added input to it (an answer to an
 * InteractionRequest names it in `interactionId`), an interaction expired with outcome `continue`
 * (`interactionId`), or a child run the run awaits settled (`linkId`, `childRunId`).
 * A `resumed` job re-executes a run whose execution was lost (its runtime is resumable).
 * `inputMessageId` is the user message that triggered this execution; absent for the last ones
 * (the runtime then sees the run's newest user message).
 * `context` (optional) carries what the worker would otherwise read first: the run's identity and
 * the input message, as committed (small messages only), and — for a run created with its job —
 * the A2A extensions `run.created` recorded (`extensions`, [] for none; absent: the worker reads
 * them when a runtime asks). The log stays the truth: the runtime's first append is guarded, so a
 * run canceled meanwhile still stops it.
 */
export const RunExecuteJobSchema = z.object({
  orgId: z.string().uuid(),
  runId: z.string().uuid(),
  trigger: z.enum(['created', 'continued', 'interaction_expired', 'link_settled', 'resumed']),
  /** Trigger `resumed`: which resumption of a lost execution this is (1, 2, ...). */
  attempt: z.int().min(1).optional(),
  inputMessageId: z.string().optional(),
  interactionId: z.string().uuid().optional(),
  linkId: z.string().uuid().optional(),
  childRunId: z.string().uuid().optional(),
  context: z
    .object({
      threadId: z.string(),
      agentId: z.string().uuid(),
      revisionId: z.string().uuid(),
      input: CanonicalMessageSchema,
      extensions: z.array(z.string()).max(JOB_INLINE_EXTENSIONS_MAX).optional(),
    })
    .optional(),
  /** W3C Trace Context of the span that dispatched the job (only when the dispatcher traces). */
  trace: z.object({ traceparent: z.string().max(256), tracestate: z.string().max(512).optional() }).optional(),
});
export type RunExecuteJob = z.infer<typeof RunExecuteJobSchema>;

/** Largest input message (JSON bytes) carried inside a job; larger ones are read by the worker. */
export const JOB_INLINE_INPUT_MAX_BYTES = 16 * 1024;

/**
 * One dispatch inside a batch job: the outbox row it came from (`id`, absent for jobs enqueued
 * without one), the sequence of its trigger, when it was first enqueued (ms since the epoch: its
 * place in its organization's line) and its `run.execute` payload (parsed per dispatch).
 */
export const RunDispatchItemSchema = z.object({
  id: z.string().regex(/^\d{1,20}$/).optional(),
  triggerSequence: z.int().min(1),
  enqueuedAt: z.number().optional(),
  job: z.unknown(),
});
export type RunDispatchItem = z.infer<typeof RunDispatchItemSchema>;

/**
 * Job `run.execute-batch`: the dispatches the relay handed over together (one BullMQ job per
 * batch, at most DISPATCH_BATCH_MAX). The worker takes them together (one fairness round trip, one
 * claim statement) and executes the admitted ones concurrently; the rest go back delayed.
 */
export const RunExecuteBatchSchema = z.object({
  dispatches: z.array(RunDispatchItemSchema).min(1).max(1000),
});
export type RunExecuteBatch = z.infer<typeof RunExecuteBatchSchema>;
export const RUN_EXECUTE_BATCH_JOB = 'run.execute-batch';
