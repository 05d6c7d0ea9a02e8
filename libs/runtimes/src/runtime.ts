import type {
  ArtifactChunkInput,
  BlockedReason,
  CanonicalMessage,
  InteractionDecision,
  InteractionKind,
  InteractionRequestOptions,
  Part,
  RunLinkKind,
  RunStatus,
} from '#libs/contracts';
import type { RuntimeSecretUse } from './runtime-secrets.js';

/**
 * True for the error every RuntimeContext method rejects with once the run has ended (code
 * `run.terminal`, e.g. canceled meanwhile): a runtime should simply stop then.
 */
export function isRunTerminal(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'run.terminal';
}

/**
 * Why an execution's `RuntimeContext.signal` aborted (its `reason`): `canceled` — the run was
 * canceled or ended (tell an upstream or backend so, if it has a way); `stopping` — the worker
 * is shutting down (the run is handed on and resumed elsewhere: do not cancel upstream work);
 * `fenced` — a newer execution took the run over (docs/architecture.md "The fence"): stop at once,
 * with no further effect, and leave upstream work to the newer execution.
 */
export class ExecutionAborted extends Error {
  constructor(readonly why: 'canceled' | 'stopping' | 'fenced') {
    super(`the execution was aborted (${why})`);
    this.name = 'ExecutionAborted';
  }
}

/**
 * True when `signal` aborted because the run was canceled or ended (not because the worker is
 * stopping or the execution was fenced): what a runtime should pass on to its backend or upstream.
 * A signal aborted without an ExecutionAborted reason counts as a cancellation.
 */
export function abortedByCancel(signal: AbortSignal): boolean {
  return signal.aborted && !(signal.reason instanceof ExecutionAborted && signal.reason.why !== 'canceled');
}

/** Statuses a runtime may move its run to (canceled is the caller's, never the runtime's). */
export type RuntimeSettableStatus = 'working' | 'completed' | 'failed' | 'rejected';

/** An agent message a runtime emits; the messageId is assigned by the platform when omitted. */
export interface AgentMessageInput {
  parts: Part[];
  messageId?: string;
  metadata?: Record<string, unknown>;
}

/** How a runtime opens an InteractionRequest beyond its prompt message; `state` comes back in `RuntimeContext.trigger`. */
export type InteractionRequestInput = InteractionRequestOptions;

/** An InteractionRequest as it closed, as the execution it triggers sees it. */
export interface ClosedInteraction {
  id: string;
  kind: InteractionKind;
  blocking: boolean;
  /** resolved | rejected | expired */
  status: string;
  decision?: InteractionDecision;
  optionId?: string;
  state?: unknown;
}

/** A delegation a runtime asks for: a published agent of the same organization and its input. */
export interface DelegationInput {
  /** The agent's slug. */
  agent: string;
  message: AgentMessageInput;
  kind?: RunLinkKind;
  /** Default true: when the child settles this run executes again (trigger `link_settled`). */
  await?: boolean;
  /** Handed back in `RuntimeContext.trigger` when the child settles (JSON). */
  state?: unknown;
}

/** A settled child run as the awaiting parent's execution sees it. */
export interface LinkOutcome {
  linkId: string;
  childRunId: string;
  kind: RunLinkKind;
  status: RunStatus;
  state?: unknown;
}

/** What a child run produced: its final status, status message, agent messages and artifacts. */
export interface ChildRunResult {
  runId: string;
  status: RunStatus;
  blockedReason: BlockedReason | null;
  statusMessage: CanonicalMessage | null;
  /** The child's agent messages, oldest first. */
  messages: CanonicalMessage[];
  artifacts: Array<{ artifactId: string; name?: string; description?: string; parts: Part[]; metadata?: Record<string, unknown> }>;
}

/**
 * Why this execution runs: the run was created or got more input; a blocking interaction was
 * answered or expired (with outcome `continue`); a child run it awaits settled; or a lost
 * execution is resumed.
 */
export type RuntimeTrigger =
  | { kind: 'created' }
  | { kind: 'continued' }
  | { kind: 'interaction_responded'; interaction: ClosedInteraction }
  | { kind: 'interaction_expired'; interaction: ClosedInteraction }
  | { kind: 'link_settled'; link: LinkOutcome }
  /**
   * The previous execution was lost (its worker died) or handed on (its worker stopped) and this
   * runtime is `resumable`: pick up where the run is — read `savedState()` and `recorded()` and
   * reconcile, without repeating what the log holds. `attempt` counts resumptions of this run
   * from 1. `lost`: the trigger of the execution this one replaces (absent when the log holds none),
   * so a deterministic runtime can replay it (operations with an id the log holds are dropped).
   */
  | { kind: 'resumed'; attempt: number; lost?: Exclude<RuntimeTrigger, { kind: 'resumed' }> };

/**
 * How a runtime names one of its operations (all optional). `id` (at most 200 characters, unique
 * within the run): stored with the operation's event; when the run's log holds an operation with
 * this id already, the call does nothing (a resumed execution replaying what its lost predecessor
 * did records each operation once). Runtimes that replay give every operation a deterministic id.
 */
export interface OperationOptions {
  id?: string;
}

/** What the log holds of the run so far, as a resuming runtime reconciles against it. */
export interface RecordedRun {
  status: RunStatus;
  blockedReason: BlockedReason | null;
  /** Every messageId in the run's history (user and agent), oldest first. */
  messageIds: string[];
  /** The run's artifacts as the log assembled them (chunks appended), in creation order. */
  artifacts: Array<{ artifactId: string; parts: Part[]; complete: boolean }>;
  /** The ids of the operations the log holds (OperationOptions.id), oldest first. */
  operationIds: string[];
  /** The run's last sequence (its newest event). */
  lastSequence: number;
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
 * Errors: every method rejects with an `AppError` of code `run.terminal` (libs/runs run-errors.ts)
 * once the run has reached a terminal status (e.g. it was canceled meanwhile); runtimes should
 * simply stop then (the executor treats it as the end of the execution, not a failure).
 */
export interface RuntimeContext {
  readonly run: RuntimeRunView;
  /**
   * The user message that triggered this execution (creation, continuation, an answer); for an
   * expiry or a settled child, the run's newest user message.
   */
  readonly input: CanonicalMessage;
  /** Why this execution runs. */
  readonly trigger: RuntimeTrigger;
  /**
   * True when this execution replaces a lost one (trigger `resumed`): operations with an id the
   * log already holds are dropped (OperationOptions), `recorded()` says what the log holds.
   */
  readonly resumed: boolean;
  /**
   * The thread so far (A2A contextId): every message of this agent's runs in the thread, oldest
   * first — earlier runs' messages, then this run's, `input` included — at most the newest 100.
   * Read from the log on first call.
   */
  history(): Promise<CanonicalMessage[]>;
  /**
   * Aborted when the run is canceled, the worker shuts down, or a newer execution took the run
   * over; `signal.reason` (an ExecutionAborted) says which (`abortedByCancel`).
   */
  readonly signal: AbortSignal;
  /** Move the run to `status`, optionally with an agent message explaining it. */
  setStatus(status: RuntimeSettableStatus, message?: AgentMessageInput, op?: OperationOptions): Promise<void>;
  /**
   * Open an InteractionRequest; blocking (the default) blocks the run on its caller
   * (input-required / auth-required / confirmation) and should end the execution: the answer
   * triggers a new one. Resolves to the interaction's id.
   */
  requestInteraction(kind: InteractionKind, message?: AgentMessageInput, options?: InteractionRequestInput, op?: OperationOptions): Promise<string>;
  /**
   * Delegate to another published agent of the organization (a child run linked to this one).
   * With `await` (default) the execution should end: the child's settlement triggers a new one.
   * Errors: `agent.not_published`, `run.link_too_deep`.
   */
  delegate(input: DelegationInput): Promise<{ linkId: string; childRunId: string; childContextId: string }>;
  /** What a child run of this run produced (null: no such child). */
  childResult(childRunId: string): Promise<ChildRunResult | null>;
  /** Add an agent message to the run's history. */
  emitMessage(message: AgentMessageInput, op?: OperationOptions): Promise<void>;
  /**
   * Record this runtime's own state on the run (JSON, at most 16 KiB; an event the A2A view does
   * not show), e.g. the id of the upstream task it follows. Batched like the other operations.
   * Errors: `run.runtime_state_too_large`.
   */
  saveState(state: unknown): Promise<void>;
  /** The state saved last on this run by any execution (null when none). Reads the log. */
  savedState(): Promise<unknown>;
  /**
   * The A2A extensions (URIs) the request that created the run activated (A2A v1.0 §4.6,
   * negotiated by the platform: declared by the agent and requested by the client). Read from the
   * run's `run.created` event on first call.
   */
  extensions(): Promise<string[]>;
  /** What the log holds of this run now (pending operations are committed first). */
  recorded(): Promise<RecordedRun>;
  /** Create an artifact or append a chunk to it. */
  emitArtifact(chunk: ArtifactChunkInput, op?: OperationOptions): Promise<void>;
  /**
   * Commit what is pending now (operations made back to back are committed together; a runtime
   * streaming from elsewhere calls this when its input pauses, so readers see each step at once).
   */
  flush?(): Promise<void>;
  /** Wait `ms` milliseconds; resolves early (without error) when `signal` aborts. */
  sleep(ms: number): Promise<void>;
  /** Resolve when the run is canceled (or the worker shuts down). */
  waitUntilCanceled(): Promise<void>;
}

/** Card fields a runtime can suggest when a revision leaves them out (e.g. from an upstream card). */
export interface RuntimeCardDefaults {
  name?: string;
  description?: string;
  version?: string;
  skills?: Array<{ id: string; name: string; description: string; tags: string[]; examples?: string[]; inputModes?: string[]; outputModes?: string[] }>;
  defaultInputModes?: string[];
  defaultOutputModes?: string[];
}

/**
 * A runtime executes runs of revisions whose `runtime.kind` it owns.
 * `directReply` lets the API answer a message without creating a task (A2A: SendMessage may
 * return a Message); it must be pure and fast because it runs on the request path.
 */
export interface AgentRuntime<Config = unknown> {
  readonly kind: string;
  /**
   * True when an execution lost with its worker may simply run again (trigger `resumed`, at most
   * EXECUTION_MAX_RESUMPTIONS times per run): the runtime reconciles from its saved state and the
   * log (`ctx.recorded()`, operation ids) instead of repeating output. Otherwise (the default) a
   * lost execution fails its run ("the execution was lost"). See also `canResume`.
   */
  readonly resumable?: boolean;
  /**
   * For a `resumable` runtime: false when executions under this revision config must not be
   * resumed after all (e.g. an `http` backend that declares it cannot resume). Default: true.
   */
  canResume?(config: Config): boolean;
  /** Validate a revision's runtime config at draft/publish time. Throws a zod error when invalid. */
  parseConfig(raw: unknown): Config;
  /**
   * Optional check at publish time (may do I/O, e.g. fetch an upstream agent's card): throws an
   * `AppError` with a readable reason to refuse publishing, or returns defaults for the card the
   * revision does not declare itself (identity and skills). `scope.orgId`: the revision's
   * organization, whose runtime secrets it may resolve (RuntimeSecrets).
   */
  prepare?(config: Config, scope?: { orgId: string }): Promise<RuntimeCardDefaults | void>;
  /**
   * The secrets `config` references (RuntimeSecretRef, with their path in the config): the
   * registry checks them at draft (a `secretEnv` must lie in the organization's namespace) and at
   * publish (a `secret` must exist). A runtime that references secrets must declare them here.
   */
  secretRefs?(config: Config): RuntimeSecretUse[];
  /**
   * Non-null: answer `input` with this message only — no task, nothing executes; the platform
   * records the exchange (a run of kind `reply`, RecordReplyCommand) and answers retries of the
   * same messageId with the message recorded first.
   */
  directReply(config: Config, input: CanonicalMessage): AgentMessageInput | null;
  /** Execute one trigger of a run. Returns when the runtime has nothing more to do for now. */
  execute(config: Config, ctx: RuntimeContext): Promise<void>;
}

/** Whether executions of `runtime` under `config` are resumed when lost (AgentRuntime.resumable). */
export function isResumable<C>(runtime: AgentRuntime<C>, config: C): boolean {
  return runtime.resumable === true && (runtime.canResume?.(config) ?? true);
}
