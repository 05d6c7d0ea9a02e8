import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { CanonicalMessage, Part, RunKind } from '#libs/contracts';
import type { ResolvedA2AAgent } from '#libs/registry';
import {
  CancelRunHandler,
  ContinueRunHandler,
  CreateRunHandler,
  RecordReplyHandler,
  RespondInteractionHandler,
  RunSettlement,
  foldRunView,
  RunViews,
  type RunRecord,
  type RunView,
} from '#libs/runs';
import { AppError } from '#libs/common';
import { Metrics } from '#libs/metrics';
import { RuntimeRegistry, type AgentMessageInput, type ParsedRuntime } from '#libs/runtimes';
import { A2AError } from './a2a.errors.js';
import { ExtensionRuleError } from '#libs/extensions';
import type { AdmittedPushConfig } from '#libs/push';
import { A2APushService } from './push/a2a-push.service.js';
import { ANONYMOUS_CALLER, canSeeTask, type A2ACaller, type InboundMessage, type SendOptions, type SendOutcome } from './a2a.types.js';
import { callerBound, isAnonymous, ownerFilter, requireVisibleRun, taskNotFound } from './task-visibility.js';
import { decodePageToken, encodePageToken, listFingerprint, taskStateFilter, type ListTasksPage, type ListTasksQuery } from './list-tasks.js';


/** True when `mediaType` is matched by one of `modes` (exact, `type/*` or `*\/*`; case-insensitive). */
export function mediaTypeAccepted(mediaType: string, modes: readonly string[]): boolean {
  const mt = mediaType.split(';')[0]!.trim().toLowerCase();
  const [type] = mt.split('/');
  return modes.some((m) => {
    const mode = m.split(';')[0]!.trim().toLowerCase();
    return mode === mt || mode === '*/*' || mode === '*' || (mode.endsWith('/*') && mode.slice(0, -2) === type);
  });
}

/**
 * The A2A operations over the canonical model (A2A v1.0 §3.1): a view, not a second data model.
 * Tasks are runs, contextIds are threads, messages and artifacts are the run's projections.
 * Every call is scoped by the resolved agent's organization and agent: a task of another agent
 * or organization is "not found" (§3.3.2: do not reveal existence).
 *
 * Errors: `A2AError`s for protocol errors raised here, and the AppErrors of the canonical model
 * (run.not_found, run.terminal, …) as they are thrown: each binding maps them once, at its edge,
 * through `toA2AError` (the table `A2A_ERROR_FOR_CODE` → `A2A_ERRORS`).
 */
@Injectable()
export class A2AOperations {
  private readonly blockingTimeoutMs: number;
  private readonly pageTokenSecret: string;

  constructor(
    private readonly createRun: CreateRunHandler,
    private readonly recordReply: RecordReplyHandler,
    private readonly continueRun: ContinueRunHandler,
    private readonly respondInteraction: RespondInteractionHandler,
    private readonly cancelRun: CancelRunHandler,
    private readonly runs: RunViews,
    private readonly settlement: RunSettlement,
    private readonly registry: RuntimeRegistry,
    private readonly push: A2APushService,
    private readonly metrics: Metrics,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.blockingTimeoutMs = config.A2A_BLOCKING_TIMEOUT_MS;
    this.pageTokenSecret = config.PAGE_TOKEN_SECRET;
  }

  /**
   * SendMessage (§3.1.1).
   * - `taskId` given: more input for that task (ContinueRunCommand; answers an open interaction).
   *   Unknown task → TaskNotFound; terminal task → UnsupportedOperation (§3.1.1 "Messages sent to
   *   Tasks that are in a terminal state ... cannot accept further messages"); `contextId` not the
   *   task's → InvalidParams (§3.4.2 "MUST reject messages containing mismatching contextId").
   * - otherwise, when the runtime answers directly (`directReply`), the exchange is recorded
   *   (RecordReplyCommand: a run of kind `reply`, one statement) and its Message is returned — no
   *   task: GetTask on that run's id is TaskNotFound, ListTasks does not list it; else a task is
   *   created (CreateRunCommand, thread = `contextId` or new). A retry with the same messageId
   *   returns what the first call recorded (the same Message and contextId, or the same task);
   *   a reply's messageId reused with other content or another contextId → InvalidParams
   *   (`run.conflict`).
   * - Unless `returnImmediately`, waits until the task is terminal or interrupted
   *   (input/auth required), at most A2A_BLOCKING_TIMEOUT_MS, and returns it as it is then.
   * A push notification config is set on the task (A2APushService; PushNotificationNotSupported
   * when the agent does not offer push, §3.3.4); a part whose mediaType the
   * agent does not accept → ContentTypeNotSupported.
   */
  async sendMessage(agent: ResolvedA2AAgent, inbound: InboundMessage, options: SendOptions): Promise<SendOutcome> {
    if (options.pushNotificationConfig) this.push.require(agent);
    this.checkInputModes(agent, inbound.message.parts);
    // admission before effect: a config that would be refused refuses the message before its command
    const admitted = options.pushNotificationConfig ? await this.push.admit(agent, options.caller ?? ANONYMOUS_CALLER, inbound.taskId, options.pushNotificationConfig) : undefined;
    inbound = applyExtensions(inbound, options);
    const orgId = agent.org.id;
    const agentId = agent.agent.id;

    if (inbound.taskId !== undefined) {
      const run = await this.messageOnTask(orgId, agentId, inbound, options.caller ?? ANONYMOUS_CALLER);
      // a config sent with more input starts with that input's effects
      if (options.pushNotificationConfig) await this.setPushConfig(agent, run, options, run.lastSequence - 1, admitted);
      if (!options.returnImmediately) await this.settlement.awaitSettled(orgId, run.id, this.blockingTimeoutMs, run);
      return { kind: 'task', view: await this.runs.view(orgId, run.id, { historyLength: options.historyLength, agentId }) };
    }

    const creation = {
      orgId,
      agentId,
      revisionId: agent.revision.id,
      threadId: inbound.contextId,
      message: inbound.message,
      metadata: options.metadata,
      createdBy: options.caller?.id ?? null,
      ...(options.extensions?.activated.length ? { extensions: options.extensions.activated } : {}),
    };
    const reply = await this.directReply(agent, inbound.message);
    if (reply) {
      const recorded = await this.recordReply.execute({ ...creation, reply });
      if (recorded.reply) return { kind: 'message', message: recorded.reply.message, contextId: recorded.run.threadId, sequence: recorded.reply.sequence };
      // the messageId created a task before this agent's rules answered it directly: that task
      if (!options.returnImmediately) await this.settlement.awaitSettled(orgId, recorded.run.id, this.blockingTimeoutMs);
      return { kind: 'task', view: await this.runs.view(orgId, recorded.run.id, { historyLength: options.historyLength, agentId }) };
    }

    const { run, created, message: stored } = await this.createRun.execute(creation);
    // the messageId was answered directly before (the agent's rules changed since): that Message
    if (run.kind === 'reply') return replyOutcome(await this.runs.view(orgId, run.id, { agentId }));
    // the task's whole story (a retry of the same message sets the same config again: on the task
    // it found, which admission did not know, the checks are made again)
    if (options.pushNotificationConfig) await this.setPushConfig(agent, run, options, 0, created ? admitted : undefined);
    if (options.returnImmediately && created) {
      // The run was just created: its view is known without reading it back.
      const message: CanonicalMessage = { ...inbound.message, role: 'user' };
      const view: RunView = {
        run: { ...run, openInteractionId: null },
        statusMessage: null,
        history: options.historyLength === 0 ? [] : [message],
        artifacts: [],
      };
      return { kind: 'task', view };
    }
    if (!options.returnImmediately && stored) {
      // created: the answer folded from the log's envelopes the wake-ups carried (no read back), when they carried them all
      const log = await this.settlement.awaitSettledLog(orgId, run.id, this.blockingTimeoutMs, run);
      const view = log && foldRunView(run, [stored], log, { historyLength: options.historyLength });
      this.metrics.blockingAnswers.inc({ source: view ? 'log' : 'read' });
      if (view) return { kind: 'task', view };
    } else if (!options.returnImmediately) await this.settlement.awaitSettled(orgId, run.id, this.blockingTimeoutMs);
    return { kind: 'task', view: await this.runs.view(orgId, run.id, { historyLength: options.historyLength, agentId }) };
  }

  /** A push config sent with SendMessage, delivered after `fromSequence` of the task. */
  private async setPushConfig(agent: ResolvedA2AAgent, run: RunRecord, options: SendOptions, fromSequence: number, admitted: AdmittedPushConfig | undefined): Promise<void> {
    await this.push.create(agent, options.caller ?? ANONYMOUS_CALLER, run.id, options.pushNotificationConfig!, options.version ?? '1.0', Math.max(0, fromSequence), admitted);
  }

  /**
   * GetTask (§3.1.3). Unknown, not this agent's, not the caller's (see canSeeTask), or a direct
   * reply's run (its A2A view is a Message, not a Task) → TaskNotFound.
   */
  async getTask(agent: ResolvedA2AAgent, taskId: string, historyLength?: number, caller: A2ACaller = ANONYMOUS_CALLER): Promise<RunView> {
    const view = await this.runs.view(agent.org.id, taskId, { historyLength, agentId: agent.agent.id });
    if (!isTask(view.run) || !canSeeTask(caller, view.run.createdBy)) throw taskNotFound(taskId);
    return view;
  }

  /**
   * CancelTask (§3.1.5): the task as it is after the cancel. Unknown → TaskNotFound; already
   * terminal → TaskNotCancelable.
   */
  async cancelTask(agent: ResolvedA2AAgent, taskId: string, historyLength?: number, caller: A2ACaller = ANONYMOUS_CALLER): Promise<RunView> {
    await requireVisibleRun(this.runs, agent.org.id, agent.agent.id, caller, taskId);
    const run = await this.cancelRun.execute({ orgId: agent.org.id, runId: taskId, agentId: agent.agent.id });
    return await this.runs.view(agent.org.id, run.id, { historyLength, agentId: agent.agent.id });
  }

  /**
   * ListTasks (§3.1.4): this agent's tasks, newest status first (status timestamp, then id, both
   * descending), from the read models: one query for the page, one for the total, one for the
   * page's views (history / artifacts as asked). The page token is decoded before any query.
   * Errors: InvalidParams for a page token that is malformed, edited, or from a query with other
   * filters. A task whose status changes while a client pages moves to the front of the order
   * (it is then on no later page, or seen twice); tasks that keep their status are listed
   * exactly once.
   */
  async listTasks(agent: ResolvedA2AAgent, q: ListTasksQuery, caller: A2ACaller = ANONYMOUS_CALLER): Promise<ListTasksPage> {
    const orgId = agent.org.id;
    const fingerprint = callerBound(listFingerprint(agent.agent.id, q), caller);
    const before = q.pageToken !== undefined ? decodePageToken(q.pageToken, fingerprint, this.pageTokenSecret) : undefined;
    // an anonymous caller (an agent without authentication) lists only within a context it
    // names: the contextId is its capability, as a task id is for GetTask
    if (isAnonymous(caller) && q.contextId === undefined) return { views: [], nextPageToken: '', pageSize: q.pageSize, totalSize: 0 };
    const filter = {
      agentId: agent.agent.id,
      kind: TASK_KIND,
      threadId: q.contextId,
      ...(q.state !== undefined ? taskStateFilter(q.state) : {}),
      statusFrom: q.statusTimestampAfter,
      ...ownerFilter(caller),
    };
    const [rows, totalSize] = await Promise.all([this.runs.list(orgId, { ...filter, before, limit: q.pageSize }), this.runs.count(orgId, filter)]);
    const page = rows.slice(0, q.pageSize);
    const views = await this.runs.views(
      orgId,
      page.map((r) => r.id),
      // a page of a list: the read replica may serve it (the caller's own writes are still seen)
      { historyLength: q.historyLength, includeArtifacts: q.includeArtifacts, lagTolerant: true },
    );
    const last = page.at(-1);
    const nextPageToken = rows.length > q.pageSize && last ? encodePageToken(last, fingerprint, this.pageTokenSecret) : '';
    return { views, nextPageToken, pageSize: q.pageSize, totalSize };
  }

  /**
   * Full-text search over the caller's tasks of this agent (the task-search method extension):
   * newest status first, HMAC page tokens bound to the query and the caller (InvalidParams for
   * another's), Tasks in the call's version.
   */
  async searchTasks(agent: ResolvedA2AAgent, caller: A2ACaller, q: { query: string; pageSize: number; pageToken?: string; historyLength?: number }): Promise<{ views: RunView[]; nextPageToken: string }> {
    const fingerprint = callerBound(listFingerprint(agent.agent.id, { contextId: `search:${q.query}` }), caller);
    const before = q.pageToken ? decodePageToken(q.pageToken, fingerprint, this.pageTokenSecret) : undefined;
    // an anonymous caller owns nothing it could name: searching across anonymous tasks would
    // show other callers' tasks, so it finds nothing
    if (isAnonymous(caller)) return { views: [], nextPageToken: '' };
    const rows = await this.runs.search(agent.org.id, agent.agent.id, { query: q.query, kind: TASK_KIND, ...ownerFilter(caller), before, limit: q.pageSize });
    const page = rows.slice(0, q.pageSize);
    const views = await this.runs.views(agent.org.id, page.map((r) => r.id), { historyLength: q.historyLength, lagTolerant: true });
    const last = page.at(-1);
    return { views, nextPageToken: rows.length > q.pageSize && last ? encodePageToken(last, fingerprint, this.pageTokenSecret) : '' };
  }

  /**
   * A message on an existing task. A2A answers an input-required / auth-required task with a
   * message on it (§3.1.1, §6.3). The message is RespondInteractionCommand when it names an open
   * interaction (`metadata.interactionId`, as the prompt's `metadata.interaction.id` gives it;
   * needed when several are open) or when the run is blocked on one (the blocking one is
   * answered); otherwise it is ContinueRunCommand. A confirmation's option is chosen by
   * `metadata.optionId`, a data part `{ optionId }`, or the option's id or label as text. If the
   * run changed between the read and the command (an interaction opened or closed meanwhile),
   * the mapping is made again from the new state, once.
   */
  private async messageOnTask(orgId: string, agentId: string, inbound: InboundMessage, caller: A2ACaller): Promise<RunRecord> {
    const runId = inbound.taskId!;
    const named = inbound.message.metadata?.interactionId;
    if (named !== undefined && typeof named !== 'string') {
      throw new A2AError('InvalidParams', 'message metadata.interactionId must be a string');
    }
    for (let attempt = 0; ; attempt++) {
      const run = await requireVisibleRun(this.runs, orgId, agentId, caller, runId);
      // the caller is the sender: a messageId is unique per caller (another caller's same id is its own message)
      const base = { orgId, agentId, runId, threadId: inbound.contextId, message: inbound.message, sentBy: caller.id };
      const interactionId = named ?? (run.blockedReason ? run.openInteractionId : null);
      try {
        return interactionId
          ? await this.respondInteraction.execute({ ...base, interactionId, ...(caller.id !== null && { submittedBy: caller.id }) })
          : await this.continueRun.execute(base);
      } catch (e) {
        const raced = named === undefined && e instanceof AppError && (e.code === 'run.awaiting_interaction' || e.code === 'interaction.not_open');
        if (!raced || attempt > 0) throw e;
      }
    }
  }

  /** ContentTypeNotSupported when a part declares a mediaType none of the agent's input modes accepts. */
  private checkInputModes(agent: ResolvedA2AAgent, parts: readonly Part[]): void {
    const modes = agent.revision.a2a.defaultInputModes;
    for (const p of parts) {
      if (p.mediaType && !mediaTypeAccepted(p.mediaType, modes)) {
        throw new A2AError('ContentTypeNotSupported', `media type ${p.mediaType} is not accepted; this agent accepts ${modes.join(', ')}`, {
          metadata: { mediaType: p.mediaType },
        });
      }
    }
  }

  /** The runtime's direct reply to a new message (no task), or null when a task is needed. */
  private async directReply(agent: ResolvedA2AAgent, message: CanonicalMessage): Promise<AgentMessageInput | null> {
    const { runtime, config } = await this.runtimeOf(agent);
    return runtime.directReply(config, message);
  }

  private async runtimeOf(agent: ResolvedA2AAgent): Promise<ParsedRuntime> {
    try {
      return await this.registry.parseRevision(agent.revision.id, () => agent.revision.runtime);
    } catch (e) {
      throw new A2AError('InternalError', 'the agent is misconfigured', { cause: e });
    }
  }
}

/** The run kind whose A2A view is a Task (a `reply` run's is a Message). */
const TASK_KIND: RunKind = 'execution';

/** Whether the run is an A2A Task (not a direct reply's run). */
export function isTask(run: Pick<RunRecord, 'kind'>): boolean {
  return run.kind === TASK_KIND;
}

/** SendMessage's answer for a direct reply's run: its reply Message (the status message), its thread and sequence. */
function replyOutcome(view: RunView): SendOutcome {
  if (!view.statusMessage) throw new A2AError('InternalError', `reply run ${view.run.id} has no reply`);
  return { kind: 'message', message: view.statusMessage, contextId: view.run.threadId, sequence: view.run.lastSequence };
}

/**
 * The message hooks of the extensions the request activated (profile extensions check or
 * transform the caller's message). A broken rule → `extension.rule` (A2A InvalidParams naming the
 * extension and the rule).
 */
function applyExtensions(inbound: InboundMessage, options: SendOptions): InboundMessage {
  let message = inbound.message;
  for (const { plugin, params } of options.extensions?.plugins ?? []) {
    if (!plugin.onMessage) continue;
    try {
      message = plugin.onMessage(message, params) ?? message;
    } catch (e) {
      if (e instanceof ExtensionRuleError) throw new AppError('extension.rule', e.message, { details: { extension: e.uri, rule: e.rule } });
      throw e;
    }
  }
  return message === inbound.message ? inbound : { ...inbound, message };
}
