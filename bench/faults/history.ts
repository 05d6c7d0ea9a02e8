/**
 * The fault suite's records: what the clients did and saw (the history) and what the database
 * holds at the end (the snapshot). Plain data, JSON-serialisable: the checker (checker.ts) reads
 * nothing else, so it can be fed hand-made histories in a unit test.
 */

/** How a client operation ended: acknowledged, refused (known to have had no effect), or in doubt. */
export type Outcome = 'ok' | 'fail' | 'unknown';

/** One attempt (one request) of an operation. */
export interface Attempt {
  /** `A` or `B`: the API process it was sent to. */
  api: string;
  binding: 'JSONRPC' | 'HTTP+JSON';
  outcome: Outcome;
  /** Task id in the answer (ok only). */
  taskId?: string;
  /** A2A task state in the answer (ok only), e.g. `TASK_STATE_COMPLETED`. */
  state?: string;
  /** What the answer showed of the task (ok answers that were a Task). */
  task?: TaskSeen;
  error?: string;
  /** ms since the start of the run. */
  at: number;
}

/**
 * One client operation, retried with the SAME messageId after an error (so a retry must have no
 * second effect). `kind`:
 * - `send`: SendMessage creating a task (blocking or returnImmediately);
 * - `followup`: a message continuing a task (the answer to its interaction);
 * - `cancel`: CancelTask;
 * - `push-config`: CreateTaskPushNotificationConfig on a running task.
 * Streams are recorded as StreamRecord.
 */
export interface Operation {
  id: number;
  client: number;
  kind: 'send' | 'followup' | 'cancel' | 'push-config';
  /** The agent it talks to (`faults`, `faults-http`, `faults-a2a`); absent: `faults`. */
  agent?: string;
  /** Client messageId (send, followup). */
  messageId?: string;
  /** The task it continues / cancels / configures; for `send`, the task the first ok answer named. */
  taskId?: string;
  /** ok when some attempt was acknowledged; fail when every attempt was refused; else unknown. */
  outcome: Outcome;
  attempts: Attempt[];
  /** ms since the start of the run. */
  invokedAt: number;
  completedAt: number;
  /** What the operation sent (e.g. `slow`, `ask`, `blocking`), for the report. */
  note?: string;
}

/**
 * A stream client's view of one task: SendStreamingMessage on one API, cut, resumed with
 * `Last-Event-ID` (the last id it saw) on the other API, again and again until the task ends.
 */
export interface StreamRecord {
  id: number;
  client: number;
  /** The agent it talks to; absent: `faults`. */
  agent?: string;
  messageId: string;
  /** Null when no stream ever returned the task. */
  taskId: string | null;
  /** SSE id of the Task snapshot that opened the stream (the sequence it reflects). */
  snapshotSequence: number | null;
  /** SSE ids of every event after the snapshot, in the order received, across all resumes. */
  seen: number[];
  /** Per entry of `seen`, what the frame showed (output.ts `frameDigest`; '?' when it was no event). */
  frames?: string[];
  /** The opening Task snapshot as the stream showed it. */
  snapshot?: TaskSeen;
  /** The status update that ended the stream (final), as shown: its SSE id, state and message. */
  finalSeen?: { sequence: number; state: string; statusMessage: MessageSeen | null };
  /** The stream delivered the event that ends it (terminal / input-required). */
  final: boolean;
  /** Number of connections used (1 = never cut). */
  connections: number;
  /** Per connection: the API, the Last-Event-ID it resumed from (null: the opening request), frames received, how it ended. */
  segments: Array<{ api: string; binding: 'JSONRPC' | 'HTTP+JSON'; after: number | null; frames: number; end: 'cut' | 'final' | 'closed' | 'error' | 'terminal-task'; error?: string }>;
}

/** A push config the clients set up, with the receiver path its deliveries go to. */
export interface PushConfigRecord {
  taskId: string;
  /** The config id the client gave (or null: the server's). */
  configId: string | null;
  /** Receiver path (unique per config). */
  path: string;
  /** Set inside SendMessage (every event of the task is owed) or created later on a running task (every event after its creation is owed). */
  createdWith: 'send' | 'later';
}

/** One request the push receiver got. */
export interface PushReceipt {
  path: string;
  taskId: string;
  sequence: number;
  webhookId: string;
  /** The receiver's answer (deliveries answered with a non-2xx do not count as received). */
  status: number;
  at: number;
  /** What the body showed (output.ts `frameDigest`), when it parsed. */
  digest?: string;
}

/** A message as a client saw it: its id, role and the text of its text parts (joined with `\n`). */
export interface MessageSeen {
  messageId: string;
  role: 'agent' | 'user';
  text: string;
}

/** A Task as an answer (or a stream's snapshot) showed it: what `acknowledged-tail` compares with the log. */
export interface TaskSeen {
  /** A2A state, e.g. `TASK_STATE_COMPLETED`. */
  state: string;
  statusMessage: MessageSeen | null;
  /** Its history, in order (every message of the task, the caller's included). */
  messages: MessageSeen[];
  /** Its artifacts in order, each as the text of its parts (joined with `\n`). */
  artifacts: Array<{ artifactId: string; text: string }>;
}

/**
 * One request the suite's own agents' backends received: the `http` backend (`key`: the
 * `webhook-id` header, stable per execution; `runId` and `trigger` from the body) or the upstream
 * A2A agent (`key`: the messageId it was sent, i.e. our run's originMessageId; `taskId`: its own
 * task). `one-call-per-execution` counts them.
 */
export interface BackendCall {
  backend: 'http' | 'a2a';
  key: string;
  runId?: string;
  /** `created`, `resumed`, ... (http: the body's trigger.kind; a2a: `new` or `continued`). */
  trigger?: string;
  taskId?: string;
  /** ms since the start of the load. */
  at: number;
}

/** A fault the nemesis injected (for the report). */
export interface FaultRecord {
  kind: string;
  target: string;
  startedAt: number;
  endedAt: number;
  note?: string;
}

export interface History {
  operations: Operation[];
  streams: StreamRecord[];
  pushConfigs: PushConfigRecord[];
  pushReceipts: PushReceipt[];
  /** Requests the suite's own backends received (absent: none recorded). */
  backendCalls?: BackendCall[];
  faults: FaultRecord[];
}

/** The database at the end (after the faults healed and the system settled). */
export interface DbSnapshot {
  runs: Array<{
    id: string;
    agentId: string;
    status: string;
    blockedReason: string | null;
    lastSequence: number;
    originMessageId: string;
    createdBy: string | null;
    /** The run holds an execution lease that expired (lease_expires_at < now()). */
    leaseExpired: boolean;
  }>;
  /** Every run_events row, any order. `createdAt`: ISO time of the append (database clock), when known. */
  events: Array<{ runId: string; sequence: number; type: string; payload: Record<string, unknown>; createdAt?: string }>;
  /** Every messages row (the projection of message.added). */
  messages: Array<{ runId: string; messageId: string; role: string; sequence: number }>;
  /** run_dispatches rows left (the outbox). */
  outbox: Array<{ runId: string; triggerSequence: number }>;
  pushConfigs: Array<{
    runId: string;
    configId: string;
    /** Path of its URL (matches PushConfigRecord.path). */
    path: string;
    status: string;
    cursor: number;
    deletedAt: string | null;
    leaseExpired: boolean;
    /**
     * ISO time of its insert (database clock, ms, the transaction's start like run_events.created_at):
     * where `push-delivered` places a config created on a running task in its run's log.
     */
    createdAt?: string;
  }>;
  /** The organization's agents (id → slug: which script a run follows). */
  agents?: Array<{ id: string; slug: string }>;
}

/** One broken property, with enough to find it. */
export interface Violation {
  property: string;
  message: string;
  runId?: string;
  operationId?: number;
}
