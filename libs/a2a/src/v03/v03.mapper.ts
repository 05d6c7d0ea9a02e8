import { fromV03PushConfig, V03PushNotificationConfigSchema } from '../push/push-schemas.js';
import { parsePushConfig } from '../push/push-parse.js';
import type { CanonicalMessage, Part } from '#libs/contracts';
import { type RunView, type StoredArtifact } from '#libs/runs';
import { deriveTaskState, type A2ATaskState } from '../task-state.js';
import type { InboundMessage, SendOptions, SendOutcome } from '../a2a.types.js';
import { isPlainObject } from '../proto-json.helpers.js';
import { isoTimestamp } from '../v1/v1.mapper.js';
import { DATA_PART_COMPAT_FLAG, type V03MessageSendParams } from './v03.schemas.js';

/** A2A v0.3 wire shapes (spec/v0.3/a2a.json), `kind`-tagged. */
export type V03Part =
  | { kind: 'text'; text: string; metadata?: Record<string, unknown> }
  | { kind: 'file'; file: { bytes: string; mimeType?: string; name?: string } | { uri: string; mimeType?: string; name?: string }; metadata?: Record<string, unknown> }
  | { kind: 'data'; data: Record<string, unknown>; metadata?: Record<string, unknown> };

export type V03TaskState = 'submitted' | 'working' | 'input-required' | 'completed' | 'canceled' | 'failed' | 'rejected' | 'auth-required';

export interface V03Message {
  kind: 'message';
  messageId: string;
  role: 'user' | 'agent';
  parts: V03Part[];
  contextId?: string;
  taskId?: string;
  metadata?: Record<string, unknown>;
  extensions?: string[];
  referenceTaskIds?: string[];
}

export interface V03Artifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: V03Part[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
}

export interface V03Task {
  kind: 'task';
  id: string;
  contextId: string;
  status: { state: V03TaskState; message?: V03Message; timestamp?: string };
  history?: V03Message[];
  artifacts?: V03Artifact[];
  metadata?: Record<string, unknown>;
}

const V03_STATE: Record<A2ATaskState, V03TaskState> = {
  TASK_STATE_SUBMITTED: 'submitted',
  TASK_STATE_WORKING: 'working',
  TASK_STATE_INPUT_REQUIRED: 'input-required',
  TASK_STATE_COMPLETED: 'completed',
  TASK_STATE_CANCELED: 'canceled',
  TASK_STATE_FAILED: 'failed',
  TASK_STATE_REJECTED: 'rejected',
  TASK_STATE_AUTH_REQUIRED: 'auth-required',
};

/** v1.0 TaskState name → v0.3 kebab-case state. */
export function toV03State(state: A2ATaskState): V03TaskState {
  return V03_STATE[state];
}

/**
 * Canonical Part → v0.3 part. raw/url become a FilePart; a `data` value that is not a JSON object
 * is wrapped as `{ value }` and flagged (`data_part_compat`), as `@a2a-js/sdk` does, because a
 * v0.3 DataPart holds an object only.
 */
export function toV03Part(p: Part): V03Part {
  const metadata = p.metadata && Object.keys(p.metadata).length > 0 ? { ...p.metadata } : undefined;
  const withMeta = <T extends V03Part>(part: T): T => (metadata ? { ...part, metadata } : part);
  if (p.text !== undefined) return withMeta({ kind: 'text', text: p.text });
  if (p.raw !== undefined || p.url !== undefined) {
    const meta = { ...(p.mediaType ? { mimeType: p.mediaType } : {}), ...(p.filename ? { name: p.filename } : {}) };
    const file = p.raw !== undefined ? { bytes: p.raw, ...meta } : { uri: p.url!, ...meta };
    return withMeta({ kind: 'file', file });
  }
  if (isPlainObject(p.data)) return withMeta({ kind: 'data', data: p.data });
  return { kind: 'data', data: { value: p.data ?? null }, metadata: { ...metadata, [DATA_PART_COMPAT_FLAG]: true } };
}

export function toV03Message(m: CanonicalMessage, ids: { contextId?: string; taskId?: string }): V03Message {
  const out: V03Message = { kind: 'message', messageId: m.messageId, role: m.role, parts: m.parts.map(toV03Part) };
  if (ids.contextId) out.contextId = ids.contextId;
  if (ids.taskId) out.taskId = ids.taskId;
  if (m.metadata && Object.keys(m.metadata).length > 0) out.metadata = m.metadata;
  if (m.extensions?.length) out.extensions = m.extensions;
  if (m.referenceTaskIds?.length) out.referenceTaskIds = m.referenceTaskIds;
  return out;
}

function toV03Artifact(a: StoredArtifact): V03Artifact {
  const out: V03Artifact = { artifactId: a.artifactId, parts: a.parts.map(toV03Part) };
  if (a.name) out.name = a.name;
  if (a.description) out.description = a.description;
  if (a.metadata && Object.keys(a.metadata).length > 0) out.metadata = a.metadata;
  if (a.extensions?.length) out.extensions = a.extensions;
  return out;
}

/** RunView → v0.3 Task (`kind: 'task'`). */
export function toV03Task(view: RunView): V03Task {
  const { run } = view;
  const ids = { contextId: run.threadId, taskId: run.id };
  const status: V03Task['status'] = { state: toV03State(deriveTaskState(run.status, run.blockedReason)) };
  if (view.statusMessage) status.message = toV03Message(view.statusMessage, ids);
  status.timestamp = isoTimestamp(run.statusAt);
  const task: V03Task = { kind: 'task', id: run.id, contextId: run.threadId, status };
  if (view.history.length > 0) task.history = view.history.map((m) => toV03Message(m, ids));
  if (view.artifacts.length > 0) task.artifacts = view.artifacts.map(toV03Artifact);
  if (run.metadata && Object.keys(run.metadata).length > 0) task.metadata = run.metadata;
  return task;
}

/** `message/send` result: a Task or a Message, each with its `kind`. */
export function toV03SendResult(outcome: SendOutcome): V03Task | V03Message {
  if (outcome.kind === 'task') return toV03Task(outcome.view);
  return toV03Message(outcome.message, { contextId: outcome.contextId });
}

/**
 * Parsed v0.3 MessageSendParams → the version-neutral inputs of A2AOperations.sendMessage.
 * `blocking` absent means blocking, as the v0.3 reference servers did (`blocking !== false`).
 */
export function fromV03MessageSendParams(p: V03MessageSendParams): { inbound: InboundMessage; options: SendOptions } {
  const m = p.message;
  const message: CanonicalMessage = { messageId: m.messageId, role: 'user', parts: m.parts };
  if (m.metadata) message.metadata = m.metadata;
  if (m.extensions?.length) message.extensions = m.extensions;
  if (m.referenceTaskIds?.length) message.referenceTaskIds = m.referenceTaskIds;
  const c = p.configuration;
  const options: SendOptions = { returnImmediately: c?.blocking === false };
  if (c?.historyLength !== undefined) options.historyLength = c.historyLength;
  if (c?.pushNotificationConfig !== undefined) options.pushNotificationConfig = fromV03PushConfig(parsePushConfig(V03PushNotificationConfigSchema, c.pushNotificationConfig));
  options.version = '0.3';
  if (c?.acceptedOutputModes?.length) options.acceptedOutputModes = c.acceptedOutputModes;
  if (p.metadata) options.metadata = p.metadata;
  return { inbound: { message, taskId: m.taskId, contextId: m.contextId }, options };
}
