import { z } from 'zod';
import { ArtifactChunkSchema, CanonicalMessageSchema } from './parts.schema.js';

/** Canonical run status (the top level of the state machine; see libs/runs/src/run-state.ts). */
export const RunStatusSchema = z.enum(['submitted', 'working', 'completed', 'failed', 'canceled', 'rejected']);
export type RunStatus = z.infer<typeof RunStatusSchema>;

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

/**
 * Canonical run events: the payload of every row of the event log, discriminated by `type`.
 * Types are `<aggregate>.<past tense>` (house style).
 *
 * - `run.created`: first event of every run (sequence 1); carries the run's identity.
 * - `run.status_changed`: the run's status moved; `message` is an optional agent message that
 *   explains it (A2A TaskStatus.message).
 * Every event whose payload has a `message` adds that message to the run's history (the
 * `messages` projection), so a message is recorded exactly once.
 * - `message.added`: a user or agent message joined the run's history.
 * - `artifact.updated`: an artifact was created or a chunk appended.
 * - `interaction.requested`: the run is blocked on its caller (input, auth, confirmation).
 * - `interaction.resolved`: the caller answered (or the block was lifted by cancel/finish).
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
    }),
  }),
  z.object({ type: z.literal('message.added'), payload: z.object({ message: CanonicalMessageSchema }) }),
  z.object({ type: z.literal('artifact.updated'), payload: ArtifactChunkSchema }),
  z.object({
    type: z.literal('interaction.requested'),
    payload: z.object({
      interactionId: z.string(),
      kind: InteractionKindSchema,
      blockedReason: BlockedReasonSchema,
      /** Agent message that asks the question (A2A TaskStatus.message); joins the history. */
      message: CanonicalMessageSchema.optional(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  }),
  z.object({
    type: z.literal('interaction.resolved'),
    payload: z.object({
      interactionId: z.string(),
      /** answered: the caller replied; canceled: the run ended first. */
      resolution: z.enum(['answered', 'canceled']),
      /** messageId of the caller's answer, when it was a message. */
      messageId: z.string().optional(),
    }),
  }),
]);
export type RunEvent = z.infer<typeof RunEventSchema>;
export type RunEventType = RunEvent['type'];

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

/** Resume cursor: the last sequence a client has seen of one run. */
export interface RunCursor {
  runId: string;
  threadId: string;
  sequence: number;
}
