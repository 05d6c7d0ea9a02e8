import type { CanonicalMessage } from '#libs/contracts';
import type { Negotiated } from '#libs/extensions';
import type { PushConfigInput } from '#libs/push';
import type { RunView } from '#libs/runs';

/** A2A protocol versions served (Major.Minor, A2A v1.0 §3.6). */
export type A2AProtocolVersion = '1.0' | '0.3';

/**
 * A user message as a version-specific mapper hands it to A2AOperations: the canonical message
 * plus the A2A addressing fields (`taskId` continues a task, `contextId` names the thread).
 */
export interface InboundMessage {
  message: CanonicalMessage;
  taskId?: string;
  contextId?: string;
}

/** Send options, already translated from the version's configuration object. */
export interface SendOptions {
  /** false: wait until the task is terminal or interrupted (v1.0 default; v0.3 `blocking`). */
  returnImmediately: boolean;
  /** Most recent messages to return in the task's history; undefined = all, 0 = none. */
  historyLength?: number;
  /** Push notifications for this task (set with the task, delivered from its first event). */
  pushNotificationConfig?: PushConfigInput;
  /** Who sends: the new task's owner; push configs are scoped to it. Absent: anonymous. */
  caller?: A2ACaller;
  /** The protocol version of the call (the shape of push payloads). */
  version?: A2AProtocolVersion;
  /** The extensions the request activated (A2A-Extensions), with the plugins that act on it. */
  extensions?: Negotiated;
  /** Media types the caller accepts for response parts (advisory). */
  acceptedOutputModes?: string[];
  /** SendMessageRequest.metadata: stored on a new task as its metadata. */
  metadata?: Record<string, unknown>;
}

/**
 * What SendMessage produced: a task (the run's read model, history already limited), or a direct
 * reply message that created no task (its exchange is a run of kind `reply`). `contextId` of a
 * reply is its thread (the caller's or a fresh one); `sequence` is the reply's event in that run's
 * log (the stream's event id).
 */
export type SendOutcome =
  | { kind: 'task'; view: RunView }
  | { kind: 'message'; message: CanonicalMessage; contextId: string; sequence: number };

/**
 * Who calls an A2A operation. `id`: the principal (`key:<api key id>`), null for an anonymous
 * caller of an agent without authentication. Tasks belong to the principal that created them;
 * `allTasks` (scope `admin` or `a2a:all-tasks`) sees every task of the agent.
 */
export interface A2ACaller {
  id: string | null;
  allTasks: boolean;
}

/** An anonymous caller (an agent without authentication). */
export const ANONYMOUS_CALLER: A2ACaller = Object.freeze({ id: null, allTasks: false });

/** Whether `caller` may see a task created by `createdBy` (its owner, or a caller who sees all). */
export function canSeeTask(caller: A2ACaller, createdBy: string | null): boolean {
  return caller.allTasks || caller.id === createdBy;
}
