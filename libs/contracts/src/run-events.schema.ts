import { z } from 'zod';
import { ArtifactChunkSchema, CanonicalMessageSchema } from './parts.schema.js';

/** Canonical run status (the top level of the state machine; see libs/runs/src/run-state.ts). */
export const RunStatusSchema = z.enum(['submitted', 'working', 'completed', 'failed', 'canceled', 'rejected']);
export type RunStatus = z.infer<typeof RunStatusSchema>;

/**
 * How a run answers its caller: `execution` (a runtime executes it after the message arrived; the
 * A2A view is a Task) or `reply` (the runtime answered the message directly when it arrived; the
 * run is recorded complete in one statement and its A2A view is a Message, never a Task).
 */
export const RunKindSchema = z.enum(['execution', 'reply']);
export type RunKind = z.infer<typeof RunKindSchema>;

/** Why a working run is waiting on its caller (the InteractionRequest overlay). */
export const BlockedReasonSchema = z.enum(['input_required', 'auth_required', 'confirmation_required']);
export type BlockedReason = z.infer<typeof BlockedReasonSchema>;

/** Kind of an InteractionRequest; each maps to exactly one BlockedReason. */
export const InteractionKindSchema = z.enum(['input', 'auth', 'confirmation']);
export type InteractionKind = z.infer<typeof InteractionKindSchema>;

export const BLOCKED_REASON_BY_KIND: Record<InteractionKind, BlockedReason> = {
  input: 'input_required',
  auth: 'auth_required',
  confirmation: 'confirmation_required',
};

/** One choice offered by an InteractionRequest (e.g. approve / reject of a confirmation). */
export const InteractionOptionSchema = z.strictObject({
  id: z.string().min(1).max(64),
  label: z.string().min(1).max(200),
  /** What choosing it means: approve and reject decide a confirmation; other is a plain choice. */
  kind: z.enum(['approve', 'reject', 'other']).default('other'),
});
export type InteractionOption = z.infer<typeof InteractionOptionSchema>;

/** What happens when an open InteractionRequest expires: the run fails, or continues without an answer. */
export const InteractionExpiryOutcomeSchema = z.enum(['fail', 'continue']);
export type InteractionExpiryOutcome = z.infer<typeof InteractionExpiryOutcomeSchema>;

/** How the caller decided an interaction: a plain answer, or the kind of the option chosen. */
export const InteractionDecisionSchema = z.enum(['answered', 'approved', 'rejected']);
export type InteractionDecision = z.infer<typeof InteractionDecisionSchema>;

/**
 * How an InteractionRequest is opened beyond its prompt message (all optional): runtimes give it
 * (RuntimeContext.requestInteraction) and the append path records it (`interaction.requested`).
 */
export interface InteractionRequestOptions {
  title?: string;
  description?: string;
  /** Choices (a confirmation without options offers approve / reject). */
  options?: Array<{ id: string; label: string; kind?: InteractionOption['kind'] }>;
  /** Default true: the run waits on its caller (A2A input-required / auth-required). */
  blocking?: boolean;
  /** Expires this many milliseconds from now; then `onExpire` (default `fail`). */
  expiresInMs?: number;
  onExpire?: InteractionExpiryOutcome;
  /** Handed back to the runtime when the interaction closes (JSON). */
  state?: unknown;
  metadata?: Record<string, unknown>;
}

/**
 * The id a runtime gives one of its operations (a step of a script, an operation of an http
 * backend) so that a resumed execution never records it twice: stored as `opId` in the payload of
 * the event the operation appended (`run.status_changed`, `message.added`, `artifact.updated`,
 * `interaction.requested`); an operation whose id the run's log holds already is dropped. Not shown
 * to A2A clients.
 */
export const OperationIdSchema = z.string().min(1).max(300);

/** Kind of a RunLink between a parent run and a child run. */
export const RunLinkKindSchema = z.enum(['delegation', 'subtask', 'handoff']);
export type RunLinkKind = z.infer<typeof RunLinkKindSchema>;

/**
 * Canonical run events: the payload of every row of the event log, discriminated by `type`.
 * Types are `<aggregate>.<past tense>` (house style).
 *
 * - `run.created`: first event of every run (sequence 1); carries the run's identity (and its
 *   kind when it is a direct reply: then the user's message and the `run.status_changed` to
 *   completed carrying the agent's reply follow in the same statement, and nothing after them).
 * - `run.status_changed`: the run's status moved; `message` is an optional agent message that
 *   explains it (A2A TaskStatus.message).
 * Every event whose payload has a `message` adds that message to the run's history (the
 * `messages` projection), so a message is recorded exactly once.
 * - `message.added`: a user or agent message joined the run's history.
 * - `artifact.updated`: an artifact was created or a chunk appended.
 * - `interaction.requested`: an InteractionRequest opened (input, auth, confirmation). A blocking
 *   one sets the run's `blockedReason` (at most one blocks at a time); a non-blocking one leaves
 *   the run as it is.
 * - `interaction.responded`: the caller answered; `message` is the answer (it joins the history);
 *   a blocking interaction's answer clears `blockedReason`.
 * - `interaction.expired`: nobody answered before `expiresAt`; `outcome` says what the runtime
 *   declared (`fail`: a `run.status_changed` to failed follows in the same append).
 * - `interaction.canceled`: the run ended (cancel, failure, completion) with it still open.
 * - `run.linked`: this run delegated to a child run (RunLink); `message` tells the caller, with
 *   the child's id in `referenceTaskIds`.
 * - `run.link_updated`: a linked child run changed status (written with the child's change, in
 *   the same statement).
 * - `run.execution_resumed`: the run's execution was lost (its worker died) or handed on (its
 *   worker stopped gracefully: `handedOn`) and, its runtime being resumable, a new execution was
 *   dispatched (trigger `resumed`, `attempt` counts every resumption from 1) instead of failing
 *   the run. No A2A output: the runtime reconciles what follows.
 * Events a runtime's operation appended may carry that operation's `opId` (OperationIdSchema).
 * - `run.runtime_state_saved`: the runtime recorded its own state for this run (e.g. the
 *   upstream task an `a2a` runtime follows), read back by later executions. No A2A output.
 */
export const RunEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('run.created'),
    payload: z.object({
      runId: z.string(),
      threadId: z.string(),
      agentId: z.string(),
      revisionId: z.string(),
      status: RunStatusSchema,
      /** Absent: `execution`. `reply`: a direct reply (see RunKindSchema). */
      kind: RunKindSchema.optional(),
      /** A2A extensions the creating request activated. */
      extensions: z.array(z.string()).optional(),
    }),
  }),
  z.object({
    type: z.literal('run.status_changed'),
    payload: z.object({
      status: RunStatusSchema,
      blockedReason: BlockedReasonSchema.nullable(),
      /** Agent message explaining the change (A2A TaskStatus.message); joins the history. */
      message: CanonicalMessageSchema.optional(),
      /** Operator-facing reason (e.g. why the platform failed the run). */
      reason: z.string().optional(),
      opId: OperationIdSchema.optional(),
    }),
  }),
  z.object({ type: z.literal('message.added'), payload: z.object({ message: CanonicalMessageSchema, opId: OperationIdSchema.optional() }) }),
  z.object({ type: z.literal('artifact.updated'), payload: ArtifactChunkSchema.extend({ opId: OperationIdSchema.optional() }) }),
  z.object({
    type: z.literal('interaction.requested'),
    payload: z.object({
      interactionId: z.string(),
      kind: InteractionKindSchema,
      /** Set when blocking: the run's overlay while the interaction is open. */
      blockedReason: BlockedReasonSchema.nullable(),
      blocking: z.boolean().default(true),
      /** The prompt as an agent message (A2A TaskStatus.message); joins the history. */
      message: CanonicalMessageSchema.optional(),
      title: z.string().optional(),
      description: z.string().optional(),
      options: z.array(InteractionOptionSchema).optional(),
      /** ISO-8601; absent = never expires. */
      expiresAt: z.string().optional(),
      onExpire: InteractionExpiryOutcomeSchema.optional(),
      /** Who opened it (the runtime kind). */
      origin: z.string().optional(),
      /** The runtime's own resume state, handed back when the interaction closes (opaque). */
      state: z.unknown().optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      opId: OperationIdSchema.optional(),
    }),
  }),
  z.object({
    type: z.literal('interaction.responded'),
    payload: z.object({
      interactionId: z.string(),
      blocking: z.boolean(),
      decision: InteractionDecisionSchema,
      optionId: z.string().optional(),
      /** The answer (role user); joins the history. */
      message: CanonicalMessageSchema,
      /** Who answered (API key id), when known. */
      submittedBy: z.string().optional(),
    }),
  }),
  z.object({
    type: z.literal('interaction.expired'),
    payload: z.object({ interactionId: z.string(), blocking: z.boolean(), outcome: InteractionExpiryOutcomeSchema }),
  }),
  z.object({
    type: z.literal('interaction.canceled'),
    payload: z.object({ interactionId: z.string(), blocking: z.boolean(), reason: z.string() }),
  }),
  z.object({
    type: z.literal('run.linked'),
    payload: z.object({
      linkId: z.string(),
      childRunId: z.string(),
      childThreadId: z.string(),
      agentId: z.string(),
      agentSlug: z.string(),
      kind: RunLinkKindSchema,
      /** The parent waits for the child: its settlement dispatches the parent again. */
      awaiting: z.boolean(),
      /** The runtime's resume state, handed back when the child settles (opaque). */
      state: z.unknown().optional(),
      message: CanonicalMessageSchema.optional(),
    }),
  }),
  z.object({
    type: z.literal('run.link_updated'),
    payload: z.object({
      linkId: z.string(),
      childRunId: z.string(),
      kind: RunLinkKindSchema,
      status: RunStatusSchema,
      blockedReason: BlockedReasonSchema.nullable(),
    }),
  }),  z.object({
    type: z.literal('run.execution_resumed'),
    payload: z.object({ reason: z.string(), attempt: z.int().min(1), handedOn: z.boolean().optional() }),
  }),
  z.object({
    type: z.literal('run.runtime_state_saved'),
    /** Opaque JSON the runtime chose (at most RUNTIME_STATE_MAX_BYTES). */
    payload: z.object({ state: z.unknown() }),
  }),
]);

/** Largest runtime state (JSON bytes) a runtime may save on a run. */
export const RUNTIME_STATE_MAX_BYTES = 16 * 1024;
export type RunEvent = z.infer<typeof RunEventSchema>;

/**
 * One entry of the event log as every projection sees it: the SSE stream, resume, push
 * delivery and read queries are all built from these.
 * `sequence` is gapless per run, starting at 1. `threadId` is the A2A contextId.
 */
export interface SequencedOutputEnvelope<E extends RunEvent = RunEvent> {
  runId: string;
  threadId: string;
  sequence: number;
  /** ISO-8601 time the event was committed (database clock). */
  occurredAt: string;
  event: E;
}
