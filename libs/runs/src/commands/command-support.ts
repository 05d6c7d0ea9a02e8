import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { newRunId } from '../run-id.js';
import { AppError } from '#libs/common';
import type { CanonicalMessage, RunEvent } from '#libs/contracts';
import type { DispatchRelay } from '../dispatch.relay.js';
import type { AppendResult } from '../event-log.repository.js';
import { storedBytes, type RunRecord } from '../run-record.js';
import type { RunNotifier } from '../run-notifier.js';
import type { StorageQuotas } from '../storage-quotas.service.js';
import type { CommandReads } from '../reads/command-reads.repository.js';
import type { RunState } from '../reads/run-rows.repository.js';
import { messageReused, runTerminal, threadMismatch } from '../run-errors.js';
import { isTerminal } from '../run-state.js';

/**
 * One `interaction.canceled` per interaction open on `run` (but `except`), for the append that
 * ends the run: every way a run ends (cancel, platform failure, expiry, a runtime's terminal
 * status) closes what is still open with these.
 */
export function cancelOpenInteractions(run: Pick<RunState, 'openInteractionId' | 'openInteractionIds'>, reason: string, except?: string): RunEvent[] {
  return (run.openInteractionIds ?? [])
    .filter((id) => id !== except)
    .map((id) => ({ type: 'interaction.canceled', payload: { interactionId: id, blocking: id === run.openInteractionId, reason } }));
}

/** A caller's message as the log records it (role forced to `user`). */
export function userMessage(message: CanonicalMessage): CanonicalMessage {
  return { ...message, role: 'user' };
}

/**
 * Admit a caller's input under the organization's storage quota (StorageQuotas.admit). When it
 * is refused (`org.storage_quota_exceeded`), `replay` says whether this very input was recorded
 * before (a retry: its earlier result is returned, nothing is written); otherwise the refusal
 * stands. Null: admitted, go on and write it.
 */
export async function admitInput<T>(admit: () => Promise<void>, replay: () => Promise<T | null>): Promise<T | null> {
  try {
    await admit();
    return null;
  } catch (e) {
    if (!(e instanceof AppError && e.code === 'org.storage_quota_exceeded')) throw e;
    const earlier = await replay();
    if (earlier !== null) return earlier;
    throw e;
  }
}

/**
 * Whether a recorded message carries what `sent` carries: its parts, metadata, extensions and
 * referenced tasks, compared as JSON values (key order, and absent versus empty, do not count).
 * The messageId and role are the key's; the task and contextId are checked by the callers.
 */
export function sameMessage(recorded: CanonicalMessage, sent: CanonicalMessage): boolean {
  const content = (m: CanonicalMessage) =>
    JSON.parse(
      JSON.stringify({
        parts: m.parts,
        metadata: m.metadata && Object.keys(m.metadata).length > 0 ? m.metadata : null,
        extensions: m.extensions?.length ? m.extensions : null,
        referenceTaskIds: m.referenceTaskIds?.length ? m.referenceTaskIds : null,
      }),
    ) as unknown;
  return isDeepStrictEqual(content(recorded), content(sent));
}

/** True for the sender of anonymous callers (null, or '' as the keys store it). */
export function isAnonymousSender(sender: string | null | undefined): boolean {
  return sender === null || sender === '';
}

/**
 * The retry check of anonymous callers (docs/architecture.md, invariant 3). Every anonymous caller
 * is the sender '' of the keys `(org, agent, owner, originMessageId)` and `(org, agent, sender,
 * messageId)`, so a messageId one of them used is, for the next one, the same key: it is a retry
 * only when it is the same message — the same content (`sameMessage`), on the same run `runId`,
 * naming no contextId or the run's own (`threadId` vs `runThreadId`). Anything else is another
 * caller's message (or a client reusing an id for new content): `run.conflict` (messageReused),
 * never the recorded run or its content. Reads the recorded message (one statement), on the retry
 * path only. Authenticated senders are told apart by their keys and are not checked here.
 */
export async function requireSameAnonymousMessage(
  runs: CommandReads,
  key: { orgId: string; agentId: string; runId: string; runThreadId: string },
  message: CanonicalMessage,
  threadId: string | undefined,
): Promise<void> {
  const recorded = await runs.recordedMessage(key.orgId, key.agentId, null, message.messageId);
  const same = recorded !== null && recorded.runId === key.runId && sameMessage(recorded.message, message) && (threadId === undefined || threadId === key.runThreadId);
  if (!same) throw messageReused(message.messageId);
}

/** A new run's first input, ready to write: its ids, the caller's message as the log records it, its size. */
export interface NewRunInput {
  runId: string;
  /** The thread the command named, else a new one. */
  threadId: string;
  /** The caller's message with role `user`. */
  message: CanonicalMessage;
  /** What the message takes of the organization's storage quota (storedBytes of its `message.added`). */
  bytes: number;
}

/**
 * The preparation every creation of a run opens with (CreateRunCommand, RecordReplyCommand): a new
 * run id, the thread, the user message and its stored bytes, admitted under the organization's
 * storage quota (admitInput). `retried`: when the quota refused it, what `replay` found this very
 * input recorded as before (the caller returns it, writing nothing); null otherwise.
 * Errors: `org.storage_quota_exceeded` when refused and not a retry.
 */
export async function prepareNewRun<T>(
  quotas: StorageQuotas,
  cmd: { orgId: string; threadId?: string; message: CanonicalMessage },
  replay: (message: CanonicalMessage) => Promise<T | null>,
): Promise<{ input: NewRunInput; retried: T | null }> {
  const message = userMessage(cmd.message);
  const input: NewRunInput = { runId: newRunId(), threadId: cmd.threadId ?? randomUUID(), message, bytes: storedBytes([{ type: 'message.added', payload: { message } }]) };
  const retried = await admitInput(() => quotas.admit(cmd.orgId, input.bytes), () => replay(message));
  return { input, retried };
}

/**
 * Why input to `run` was refused, in the order a caller needs to hear it: the thread it named is
 * not the run's, the run is terminal, or (for `blocked`) what the run is waiting for.
 */
export function refuseInput(run: RunState, requestedThreadId: string | undefined, blocked: () => AppError): AppError {
  if (requestedThreadId !== undefined && requestedThreadId !== run.threadId) {
    return threadMismatch(run, requestedThreadId);
  }
  if (isTerminal(run.status)) {
    return runTerminal(run, 'accepts no more input');
  }
  return blocked();
}

/**
 * Run the append of a caller's input; when it committed, wake the run's readers and hand its
 * dispatch to the relay. Null when the guard refused it or the messageId is already recorded
 * (the caller then says which: replay or refusal).
 */
export async function commitInput(append: () => Promise<AppendResult | null>, notifier: RunNotifier, relay: DispatchRelay): Promise<RunRecord | null> {
  try {
    const result = await append();
    if (!result) return null;
    publish(result, notifier, relay);
    return result.run;
  } catch (e) {
    if (e instanceof AppError && e.code === 'run.duplicate_message') return null;
    throw e;
  }
}

/**
 * After an append committed: wake the readers of the run (with its new state and the envelopes the
 * append wrote, so followers deliver them without reading the log) and of the parents it updated
 * (`run.link_updated`: the sequence only), and hand the dispatches it recorded to the relay (the
 * outbox rows are there already; this is the fast path).
 */
export function publish(result: AppendResult, notifier: RunNotifier, relay: DispatchRelay): void {
  notifier.notify(result.run.id, result.run.lastSequence, result.run, { orgId: result.run.orgId, envelopes: result.envelopes });
  for (const p of result.parents) notifier.notify(p.runId, p.lastSequence);
  if (result.dispatch) relay.relay(result.dispatch);
  for (const d of result.parentDispatches) relay.relay(d);
}
