import { fromV1PushConfig, V1PushConfigSchema } from '../push/push-schemas.js';
import { parsePushConfig } from '../push/push-parse.js';
import type { CanonicalMessage, Part } from '#libs/contracts';
import { type RunView, type StoredArtifact } from '#libs/runs';
import { deriveTaskState, type A2ATaskState } from '../task-state.js';
import type { InboundMessage, SendOptions, SendOutcome } from '../a2a.types.js';
import type { V1SendMessageRequest } from './v1.schemas.js';

/**
 * A2A v1.0 wire shapes (a2a.proto in ProtoJSON) produced by this adapter. Default values are
 * omitted, as ProtoJSON serializers (and the SDK) do: no empty arrays, no empty strings.
 */
export interface V1Message {
  messageId: string;
  contextId?: string;
  taskId?: string;
  role: 'ROLE_USER' | 'ROLE_AGENT';
  parts: Part[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
  referenceTaskIds?: string[];
}

export interface V1TaskStatus {
  state: A2ATaskState;
  message?: V1Message;
  /** ISO 8601, UTC, millisecond precision (§5.6.1). */
  timestamp?: string;
}

export interface V1Artifact {
  artifactId: string;
  name?: string;
  description?: string;
  parts: Part[];
  metadata?: Record<string, unknown>;
  extensions?: string[];
}

export interface V1Task {
  id: string;
  contextId?: string;
  status: V1TaskStatus;
  artifacts?: V1Artifact[];
  history?: V1Message[];
  metadata?: Record<string, unknown>;
}

/** `SendMessageResponse`: a oneof, so exactly one of `task` / `message`. */
export type V1SendMessageResponse = { task: V1Task } | { message: V1Message };

/** ISO-8601 UTC with milliseconds, whatever the database driver handed back. */
export function isoTimestamp(t: Date | string): string {
  return (t instanceof Date ? t : new Date(t)).toISOString();
}

/** Canonical message → v1.0 Message, addressed to its task / context. */
export function toV1Message(m: CanonicalMessage, ids: { contextId?: string; taskId?: string }): V1Message {
  const out: V1Message = {
    messageId: m.messageId,
    ...(ids.contextId ? { contextId: ids.contextId } : {}),
    ...(ids.taskId ? { taskId: ids.taskId } : {}),
    role: m.role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT',
    parts: m.parts,
  };
  if (m.metadata && Object.keys(m.metadata).length > 0) out.metadata = m.metadata;
  if (m.extensions?.length) out.extensions = m.extensions;
  if (m.referenceTaskIds?.length) out.referenceTaskIds = m.referenceTaskIds;
  return out;
}

export function toV1Artifact(a: StoredArtifact): V1Artifact {
  const out: V1Artifact = {
    artifactId: a.artifactId,
    ...(a.name ? { name: a.name } : {}),
    ...(a.description ? { description: a.description } : {}),
    parts: a.parts,
  };
  if (a.metadata && Object.keys(a.metadata).length > 0) out.metadata = a.metadata;
  if (a.extensions?.length) out.extensions = a.extensions;
  return out;
}

/**
 * RunView → v1.0 Task. The state is derived from (status, blockedReason); the status message is
 * the message of the newest status event; `history` is the view's (already limited) history.
 */
export function toV1Task(view: RunView): V1Task {
  const { run } = view;
  const ids = { contextId: run.threadId, taskId: run.id };
  const status: V1TaskStatus = { state: deriveTaskState(run.status, run.blockedReason) };
  if (view.statusMessage) status.message = toV1Message(view.statusMessage, ids);
  status.timestamp = isoTimestamp(run.statusAt);
  const task: V1Task = { id: run.id, contextId: run.threadId, status };
  if (view.artifacts.length > 0) task.artifacts = view.artifacts.map(toV1Artifact);
  if (view.history.length > 0) task.history = view.history.map((m) => toV1Message(m, ids));
  if (run.metadata && Object.keys(run.metadata).length > 0) task.metadata = run.metadata;
  return task;
}

export function toV1SendMessageResponse(outcome: SendOutcome): V1SendMessageResponse {
  if (outcome.kind === 'task') return { task: toV1Task(outcome.view) };
  return { message: toV1Message(outcome.message, { contextId: outcome.contextId }) };
}

/** Parsed v1.0 SendMessageRequest → the version-neutral inputs of A2AOperations.sendMessage. */
export function fromV1SendMessageRequest(req: V1SendMessageRequest): { inbound: InboundMessage; options: SendOptions } {
  const m = req.message;
  const message: CanonicalMessage = { messageId: m.messageId, role: 'user', parts: m.parts };
  if (m.metadata) message.metadata = m.metadata;
  if (m.extensions?.length) message.extensions = m.extensions;
  if (m.referenceTaskIds?.length) message.referenceTaskIds = m.referenceTaskIds;
  const c = req.configuration;
  const options: SendOptions = { returnImmediately: c?.returnImmediately ?? false };
  if (c?.historyLength !== undefined) options.historyLength = c.historyLength;
  if (c?.taskPushNotificationConfig !== undefined) options.pushNotificationConfig = fromV1PushConfig(parsePushConfig(V1PushConfigSchema, c.taskPushNotificationConfig));
  options.version = '1.0';
  if (c?.acceptedOutputModes?.length) options.acceptedOutputModes = c.acceptedOutputModes;
  if (req.metadata) options.metadata = req.metadata;
  return { inbound: { message, taskId: m.taskId, contextId: m.contextId }, options };
}
