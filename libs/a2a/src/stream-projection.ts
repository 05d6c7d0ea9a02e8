import type { ArtifactChunk, BlockedReason, CanonicalMessage, RunStatus, SequencedOutputEnvelope } from '#libs/contracts';
import { foldState, isStatusEvent, isTerminal } from '#libs/runs';
import { deriveTaskState, type A2ATaskState } from './task-state.js';
import type { A2AProtocolVersion } from './a2a.types.js';
import { isoTimestamp, toV1Artifact, toV1Message, type V1Artifact, type V1Message, type V1Task, type V1TaskStatus } from './v1/v1.mapper.js';
import { toV03Message, toV03Part, toV03State, type V03Artifact, type V03Message, type V03Task } from './v03/v03.mapper.js';

/** A2A v1.0 `StreamResponse` (a2a.proto): a oneof, so exactly one member. */
export type V1StreamResponse =
  | { task: V1Task }
  | { message: V1Message }
  | { statusUpdate: { taskId: string; contextId: string; status: V1TaskStatus; metadata?: Record<string, unknown> } }
  | { artifactUpdate: { taskId: string; contextId: string; artifact: V1Artifact; append?: boolean; lastChunk?: boolean } };

/** A2A v0.3 stream result (spec 0.3 `SendStreamingMessageResponse.result`), `kind`-tagged. */
export type V03StreamResult =
  | V03Task
  | V03Message
  | { kind: 'status-update'; taskId: string; contextId: string; status: { state: string; message?: V03Message; timestamp?: string }; final: boolean; metadata?: Record<string, unknown> }
  | { kind: 'artifact-update'; taskId: string; contextId: string; artifact: V03Artifact; append?: boolean; lastChunk?: boolean };

export type StreamResult = V1StreamResponse | V03StreamResult;

/** The run state a projection carries from one envelope to the next. */
export interface ProjectionState {
  status: RunStatus;
  blockedReason: BlockedReason | null;
}

/**
 * A stream closes after a terminal state or input-required; auth-required keeps it open so an
 * out-of-band credential can resume the task on the same stream. Same rule as the official SDK
 * server (A2A v1.0 §3.1.2 / §3.1.6; v0.3 `final`).
 */
export function closesStream(state: A2ATaskState): boolean {
  return (
    state === 'TASK_STATE_COMPLETED' ||
    state === 'TASK_STATE_FAILED' ||
    state === 'TASK_STATE_CANCELED' ||
    state === 'TASK_STATE_REJECTED' ||
    state === 'TASK_STATE_INPUT_REQUIRED'
  );
}

/**
 * One log entry → at most one stream event, in the caller's protocol version. Pure.
 *
 * | event | stream event |
 * |---|---|
 * | `run.created`, user `message.added` | none (the Task snapshot / the caller's own input) |
 * | agent `message.added` | status update (current state) carrying the message |
 * | `run.status_changed` | status update |
 * | `interaction.requested` | status update: input-required / auth-required (blocking) or the current state, with the prompt (its message's `metadata.interaction` names it) |
 * | `interaction.responded` / `interaction.expired` (blocking, continue) | status update: working |
 * | other interaction closings | none (a status event follows, or nothing changed) |
 * | `run.execution_resumed`, `run.runtime_state_saved` | none (platform bookkeeping) |
 * | `run.linked` | status update (current state) with the delegation notice (`referenceTaskIds`), `metadata.runLink` |
 * | `run.link_updated` | status update (current state), `metadata.runLink.childState` |
 * | `artifact.updated` | artifact update with append / lastChunk |
 *
 * Returns the state after the event and whether the stream ends with it.
 */
export function projectEnvelope(
  env: SequencedOutputEnvelope,
  before: ProjectionState,
  version: A2AProtocolVersion,
): { result: StreamResult | null; state: ProjectionState; final: boolean } {
  const { event } = env;
  const ids = { taskId: env.runId, contextId: env.threadId };
  let state = before;
  let message: CanonicalMessage | undefined;
  let emitStatus = false;
  let metadata: Record<string, unknown> | undefined;

  switch (event.type) {
    case 'run.created':
      return { result: null, state, final: false };
    case 'message.added':
      if (event.payload.message.role !== 'agent') return { result: null, state, final: false };
      message = event.payload.message;
      emitStatus = true;
      break;
    case 'run.status_changed':
    case 'interaction.requested':
      state = foldState(event);
      message = event.payload.message;
      emitStatus = true;
      break;
    case 'interaction.responded':
    case 'interaction.expired':
      // a blocking interaction's answer (or expiry with outcome continue) resumes the task; an
      // expiry that fails the run is followed by its status change
      if (!isStatusEvent(event)) return { result: null, state, final: false };
      state = foldState(event);
      emitStatus = event.type === 'interaction.responded' || event.payload.outcome === 'continue';
      break;
    case 'interaction.canceled':
    case 'run.execution_resumed':
    case 'run.runtime_state_saved':
      return { result: null, state, final: false };
    case 'run.linked':
      message = event.payload.message;
      metadata = { runLink: { linkId: event.payload.linkId, kind: event.payload.kind, childTaskId: event.payload.childRunId, childContextId: event.payload.childThreadId, agent: event.payload.agentSlug } };
      emitStatus = true;
      break;
    case 'run.link_updated':
      metadata = {
        runLink: { linkId: event.payload.linkId, kind: event.payload.kind, childTaskId: event.payload.childRunId, childState: deriveTaskState(event.payload.status, event.payload.blockedReason) },
      };
      emitStatus = true;
      break;
    case 'artifact.updated':
      return { result: artifactUpdate(event.payload, ids, version), state, final: false };
  }

  const taskState = deriveTaskState(state.status, state.blockedReason);
  const final = closesStream(taskState) || isTerminal(state.status);
  if (!emitStatus) return { result: null, state, final };
  const timestamp = isoTimestamp(env.occurredAt);
  if (version === '1.0') {
    const status: V1TaskStatus = { state: taskState, timestamp };
    if (message) status.message = toV1Message(message, ids);
    return { result: { statusUpdate: { ...ids, status, ...(metadata && { metadata }) } }, state, final };
  }
  const status: { state: string; message?: V03Message; timestamp?: string } = { state: toV03State(taskState), timestamp };
  if (message) status.message = toV03Message(message, ids);
  return { result: { kind: 'status-update', ...ids, status, final, ...(metadata && { metadata }) }, state, final };
}

function artifactUpdate(chunk: ArtifactChunk, ids: { taskId: string; contextId: string }, version: A2AProtocolVersion): StreamResult {
  const stored = { ...chunk, complete: chunk.lastChunk };
  if (version === '1.0') {
    const u: Extract<V1StreamResponse, { artifactUpdate: unknown }>['artifactUpdate'] = { ...ids, artifact: toV1Artifact(stored) };
    if (chunk.append) u.append = true;
    if (chunk.lastChunk) u.lastChunk = true;
    return { artifactUpdate: u };
  }
  const artifact: V03Artifact = { artifactId: chunk.artifactId, parts: chunk.parts.map(toV03Part) };
  if (chunk.name) artifact.name = chunk.name;
  if (chunk.description) artifact.description = chunk.description;
  if (chunk.metadata) artifact.metadata = chunk.metadata;
  if (chunk.extensions?.length) artifact.extensions = chunk.extensions;
  return { kind: 'artifact-update', ...ids, artifact, append: chunk.append, lastChunk: chunk.lastChunk };
}

/** A projection as `projectSharedEnvelope` keeps it: for one version and one state before. */
interface SharedProjection {
  version: A2AProtocolVersion;
  status: RunStatus;
  blockedReason: BlockedReason | null;
  out: { result: StreamResult | null; state: ProjectionState; final: boolean };
}
const shared = new WeakMap<SequencedOutputEnvelope, SharedProjection[]>();

/**
 * `projectEnvelope`, computed once per envelope object, version and state before it: the streams
 * of one run in a process share their envelopes (RunStreamHub's ring), so the second and later
 * subscribers of a run get the first one's projection (the same result object: read-only) instead
 * of projecting again. The state before is part of the key, so a subscriber whose fold differs
 * (it cannot, for the same log, but the projection never assumes it) gets its own.
 */
export function projectSharedEnvelope(
  env: SequencedOutputEnvelope,
  before: ProjectionState,
  version: A2AProtocolVersion,
): { result: StreamResult | null; state: ProjectionState; final: boolean } {
  let list = shared.get(env);
  if (list) {
    for (const p of list) if (p.version === version && p.status === before.status && p.blockedReason === before.blockedReason) return p.out;
  } else {
    list = [];
    shared.set(env, list);
  }
  const out = projectEnvelope(env, before, version);
  list.push({ version, status: before.status, blockedReason: before.blockedReason, out });
  return out;
}

const resultJson = new WeakMap<object, string>();

/**
 * `JSON.stringify(result)`, once per result object: a shared projection's result is serialized
 * for its first stream and reused by the others (each frame wraps it in its own envelope).
 */
export function stringifyStreamResult(result: StreamResult): string {
  let json = resultJson.get(result);
  if (json === undefined) {
    json = JSON.stringify(result);
    resultJson.set(result, json);
  }
  return json;
}
