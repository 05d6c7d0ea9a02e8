import type {
  ArtifactChunkInput,
  CanonicalMessage,
  InteractionKind,
  Part,
} from '#libs/contracts';

/** Statuses a runtime may move its run to (canceled is the caller's, never the runtime's). */
export type RuntimeSettableStatus = 'working' | 'completed' | 'failed' | 'rejected';

/** An agent message a runtime emits; the messageId is assigned by the platform when omitted. */
export interface AgentMessageInput {
  parts: Part[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}

/** What a runtime sees of the run it executes. */
export interface RuntimeRunView {
  orgId: string;
  runId: string;
  threadId: string;
  agentId: string;
  revisionId: string;
}

/**
 * The only way a runtime acts on a run. Every method appends to the run's event log through the
 * append path (libs/runs), in order, each call one event with its own sequence. An implementation
 * may commit calls made back to back together (the worker does, up to the next wait, terminal
 * status or interaction); everything is committed by the time a wait starts or `execute` returns.
 *
 * Errors: every method rejects with `RunTerminalError` (code `run.terminal`) once the run has
 * reached a terminal status (e.g. it was canceled meanwhile); runtimes should simply stop then.
 */
export interface RuntimeContext {
  readonly run: RuntimeRunView;
  /** The user message that triggered this execution (creation or continuation). */
  readonly input: CanonicalMessage;
  /**
   * The thread so far (A2A contextId): every message of this agent's runs in the thread, oldest
   * first — earlier runs' messages, then this run's, `input` included — at most the newest 100.
   * Read from the log on first call.
   */
  history(): Promise<CanonicalMessage[]>;
  /** Aborted when the run is canceled or the worker shuts down. */
  readonly signal: AbortSignal;
  /** Move the run to `status`, optionally with an agent message explaining it. */
  setStatus(status: RuntimeSettableStatus, message?: AgentMessageInput): Promise<void>;
  /** Block the run on its caller (input-required / auth-required / confirmation). */
  requestInteraction(kind: InteractionKind, message?: AgentMessageInput): Promise<void>;
  /** Add an agent message to the run's history. */
  emitMessage(message: AgentMessageInput): Promise<void>;
  /** Create an artifact or append a chunk to it. */
  emitArtifact(chunk: ArtifactChunkInput): Promise<void>;
  /** Wait `ms` milliseconds; resolves early (without error) when `signal` aborts. */
  sleep(ms: number): Promise<void>;
  /** Resolve when the run is canceled (or the worker shuts down). */
  waitUntilCanceled(): Promise<void>;
}

/**
 * A runtime executes runs of revisions whose `runtime.kind` it owns.
 * `directReply` lets the API answer a message without creating a task (A2A: SendMessage may
 * return a Message); it must be pure and fast because it runs on the request path.
 */
export interface AgentRuntime<Config = unknown> {
  readonly kind: string;
  /** Validate a revision's runtime config at draft/publish time. Throws a zod error when invalid. */
  parseConfig(raw: unknown): Config;
  /** Non-null: answer `input` with this message only, and create no run. */
  directReply(config: Config, input: CanonicalMessage): AgentMessageInput | null;
  /** Execute one trigger of a run. Returns when the runtime has nothing more to do for now. */
  execute(config: Config, ctx: RuntimeContext): Promise<void>;
}
