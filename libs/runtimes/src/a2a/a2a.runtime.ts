import { createHash } from 'node:crypto';
import { Role, TaskState, type AgentCard, type Message, type Part as SdkPart, type Task, type TaskStatus } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory, ServiceParameters, withA2AExtensions, type Client, type RequestOptions } from '@a2a-js/sdk/client';
import { z } from 'zod';
import { AppError, TtlLruCache } from '#libs/common';
import { A2ARuntimeConfigSchema, type A2ARuntimeConfig, type CanonicalMessage, type Part } from '#libs/contracts';
import { outboundFetch, refusedLiteral, ResponseTooLargeError, type OutboundPolicy } from '#libs/outbound';
import { DEFAULT_ANSWER_BUDGET, type AnswerBudget } from '../answer-budget.js';
import { refuseLiteralAddresses } from '../outbound-config.js';
import { isRunTerminal, type AgentMessageInput, type AgentRuntime, type RecordedRun, type RuntimeCardDefaults, type RuntimeContext } from '../runtime.js';
import { describeSecretRef, isSecretRefusal, NO_RUNTIME_SECRETS, secretRefOf, type RuntimeSecrets, type RuntimeSecretUse } from '../runtime-secrets.js';
import { UpstreamCardTrust } from './upstream-card-trust.js';

/** How long a fetched upstream card is reused (ms). */
const CARD_TTL_MS = 60_000;
/** Longest an upstream card fetch may take (ms), and its largest body (bytes). */
const CARD_TIMEOUT_MS = 5000;
const CARD_MAX_BYTES = 1024 * 1024;
/** An upstream silent this long (ms) gets what it sent so far committed. */
const PAUSE_MS = 20;
/** An upstream that never pauses still gets a commit every this many ms or events. */
const MAX_BATCH_MS = 250;
const MAX_BATCH_EVENTS = 100;
/** Longest a message forwarded to a followed upstream task may take (ms). */
const FORWARD_TIMEOUT_MS = 10_000;
/** Re-attachments after an upstream stream ended early, per execution. */
const MAX_REATTACH = 3;

/** What the runtime saves on a run: the upstream task it follows. */
interface UpstreamState {
  taskId: string;
  contextId: string;
}

/** An upstream answer the runtime cannot use: the run fails with this reason. */
class UpstreamError extends Error {}

/**
 * What one execution learned of the upstream's HTTP answers beyond what the SDK's errors say: the
 * last error status, and the answer refused for its size (the run fails with that reason, and the
 * upstream is not asked again).
 */
interface UpstreamIo {
  status: number;
  refused?: ResponseTooLargeError;
}

/** An upstream card as fetched: the SDK's (normalized) card and the JSON as served (what signatures cover). */
interface FetchedCard {
  card: AgentCard;
  raw: unknown;
}

/**
 * The `a2a` runtime: the agent fronts an upstream A2A agent, talked to with `@a2a-js/sdk`'s
 * client (v1.0, or v0.3 through the SDK's compatibility layer; JSON-RPC or HTTP+JSON) under the
 * outbound policy (public unicast only unless HTTP_RUNTIME_ALLOWED_CIDRS).
 *
 * - A new run sends its input as a new upstream task (upstream contextId = the run's thread, so
 *   a thread stays one upstream conversation); the upstream task id and context are saved on the
 *   run (`run.runtime_state_saved`) as soon as they are known.
 * - Every upstream event is mapped into the log: status (working / completed / failed / rejected;
 *   an upstream cancel we did not ask for fails the run), agent messages (ids prefixed with the
 *   upstream task id, so they are unique here), artifacts and their chunks.
 * - Upstream input-required / auth-required opens a blocking InteractionRequest; the answer is sent
 *   upstream on the same upstream task.
 * - Streaming when the upstream card says so (SendStreamingMessage, SubscribeToTask), otherwise
 *   SendMessage and GetTask every `pollIntervalMs`.
 * - Cancel: CancelTask upstream. Upstream errors, unreachable upstreams and `timeoutMs` fail the
 *   run with a readable reason.
 * - Resumable: an execution lost with its worker is resumed (trigger `resumed`) and re-attaches to
 *   the saved upstream task (GetTask, then SubscribeToTask or polling), reconciling against what
 *   the log holds (messages by id, artifacts by part count) so nothing is recorded twice.
 * - `requireSignedCard`: the upstream card's signatures are verified (UpstreamCardTrust) at publish
 *   and on every card fetch of an execution (the card is cached 60 s): a card that does not verify
 *   refuses the publish and fails the run (`runtime.upstream_card_unverified`) before anything is
 *   sent upstream.
 * - Every answer is read within `budget`: a JSON-RPC / HTTP+JSON answer (error bodies included)
 *   of at most RUNTIME_MAX_ANSWER_BYTES (refused from its Content-Length, else as it arrives), each
 *   SSE event of at most RUNTIME_MAX_EVENT_BYTES, the card of at most 1 MiB. An answer past its
 *   budget fails the run at once ("the upstream's answer exceeds N bytes"; no re-subscription: the
 *   upstream would send it again) and cancels the upstream task; the worker holds about the budget.
 */
export class A2ARuntime implements AgentRuntime<A2ARuntimeConfig> {
  readonly kind = 'a2a';
  readonly resumable = true;
  // by organization and URL: a card fetched with one organization's credentials is never another's
  private readonly cards = new TtlLruCache<string, FetchedCard>(500, CARD_TTL_MS);
  private readonly trust: UpstreamCardTrust;

  /**
   * `secrets`: the credentials' source, asked for the run's organization only (the default refuses
   * all); `budget`: the most bytes read of one answer and of one streamed event.
   */
  constructor(
    private readonly policy: OutboundPolicy,
    private readonly secrets: RuntimeSecrets = NO_RUNTIME_SECRETS,
    private readonly budget: AnswerBudget = DEFAULT_ANSWER_BUDGET,
  ) {
    this.trust = new UpstreamCardTrust(policy);
  }

  /** Throws a ZodError for an invalid config, including a literal address the guard refuses. */
  parseConfig(raw: unknown): A2ARuntimeConfig {
    const config = refuseLiteralAddresses(A2ARuntimeConfigSchema.parse(raw), ['cardUrl', 'url'], this.policy);
    for (const [i, url] of (config.requireSignedCard?.jwksUrls ?? []).entries()) {
      const why = refusedLiteral(new URL(url), this.policy);
      if (why) throw new z.ZodError([{ code: 'custom', path: ['requireSignedCard', 'jwksUrls', i], message: `refused: ${why} (HTTP_RUNTIME_ALLOWED_CIDRS opens it)`, input: url }]);
    }
    return config;
  }

  /** The credentials' secret, when there are credentials. */
  secretRefs(config: A2ARuntimeConfig): RuntimeSecretUse[] {
    if (!config.credentials) return [];
    const ref = secretRefOf(config.credentials);
    return [{ path: ['credentials', 'secret' in ref ? 'secret' : 'secretEnv'], ref }];
  }

  directReply(): AgentMessageInput | null {
    return null;
  }

  /**
   * Publish-time check: with `cardUrl`, the upstream card must be readable (else
   * `runtime.upstream_unreachable` with the reason) and, with `requireSignedCard`, signed by a
   * trusted key (else `runtime.upstream_card_unverified`, each signature's reason in the message
   * and `details.checks`); its identity and skills are the defaults of our card. The card is
   * fetched with the credentials of `scope.orgId` (their refusal passes through).
   */
  async prepare(config: A2ARuntimeConfig, scope?: { orgId: string }): Promise<RuntimeCardDefaults | void> {
    if (!config.cardUrl) return;
    const headers = config.credentials ? await this.credentialHeaders(config, scope?.orgId) : {};
    let fetched: FetchedCard;
    try {
      fetched = await this.fetchCard(config, headers, true, scope?.orgId);
    } catch (e) {
      throw new AppError('runtime.upstream_unreachable', `the upstream agent card at ${config.cardUrl} could not be read: ${describe(e)}`, { details: { cardUrl: config.cardUrl } });
    }
    if (config.requireSignedCard) await this.trust.requireVerified(fetched.raw, config.requireSignedCard, config.cardUrl);
    const card = fetched.card;
    return {
      ...(card.name && { name: card.name }),
      ...(card.description && { description: card.description }),
      ...(card.version && { version: card.version }),
      skills: (card.skills ?? []).map((s) => ({
        id: s.id,
        name: s.name,
        description: s.description || s.name,
        tags: s.tags?.length ? s.tags : [s.id],
        ...(s.examples?.length && { examples: s.examples }),
        ...(s.inputModes?.length && { inputModes: s.inputModes }),
        ...(s.outputModes?.length && { outputModes: s.outputModes }),
      })),
      ...(card.defaultInputModes?.length && { defaultInputModes: card.defaultInputModes }),
      ...(card.defaultOutputModes?.length && { defaultOutputModes: card.defaultOutputModes }),
    };
  }

  async execute(config: A2ARuntimeConfig, ctx: RuntimeContext): Promise<void> {
    let headers: Record<string, string>;
    try {
      // the run's organization only: a revision reaches its own org's secrets, never the worker's environment
      headers = await this.credentialHeaders(config, ctx.run.orgId);
    } catch (e) {
      if (!isSecretRefusal(e)) throw e;
      await ctx.setStatus('failed', { parts: [{ text: `The upstream agent is not configured (${describeSecretRef(secretRefOf(config.credentials!))}): ${e.message}. Nothing was sent.` }] });
      return;
    }
    let client: Client;
    let streaming: boolean;
    // the last HTTP error status the upstream answered (SDK errors do not always carry it), and a refusal for size
    const http: UpstreamIo = { status: 0 };
    try {
      const card = await this.card(config, headers, false, ctx.run.orgId);
      streaming = config.streaming ?? card.capabilities?.streaming ?? false;
      client = await this.factory(headers, http).createFromAgentCard(card);
    } catch (e) {
      if (e instanceof AppError && e.code === 'runtime.upstream_card_unverified') {
        // the card changed since publish (or its key left the anchors): nothing is sent upstream
        const text = `Refused by requireSignedCard (${e.code}): ${e.message}. Nothing was sent.`;
        await ctx.setStatus('failed', { parts: [{ text }], metadata: { error: { code: e.code, message: e.message } } }).catch(() => undefined);
        return;
      }
      await ctx.setStatus('failed', { parts: [{ text: `The upstream agent could not be reached: ${describe(e, http)}` }] }).catch(() => undefined);
      return;
    }
    await new UpstreamSession(client, config, ctx, streaming, http).run();
  }

  /**
   * `{ header: "scheme secret" }` with the secret of `orgId`, `{}` without credentials. Throws the
   * port's refusal (`isSecretRefusal`); without an org nothing is resolved (`runtime_secret.not_configured`).
   */
  private async credentialHeaders(config: A2ARuntimeConfig, orgId: string | undefined): Promise<Record<string, string>> {
    if (!config.credentials) return {};
    if (!orgId) throw new AppError('runtime_secret.not_configured', 'the credentials cannot be resolved without the revision\'s organization');
    const secret = await this.secrets.resolve(orgId, secretRefOf(config.credentials));
    return { [config.credentials.header]: config.credentials.scheme ? `${config.credentials.scheme} ${secret}` : secret };
  }

  /** The SDK's clients over the guarded fetch, every answer within the budget (a refusal is noted on `http`). */
  private factory(headers: Record<string, string>, http: UpstreamIo): ClientFactory {
    const guarded = outboundFetch(this.policy, headers, {
      maxBodyBytes: this.budget.maxAnswerBytes,
      maxEventBytes: this.budget.maxEventBytes,
      onRefused: (e) => (http.refused ??= e),
    });
    const fetchImpl: typeof fetch = async (input, init) => {
      const res = await guarded(input, init);
      if (!res.ok) http.status = res.status;
      return res;
    };
    return new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }), new RestTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
    });
  }

  /**
   * The upstream card (fetched, cached CARD_TTL_MS), or one made from `url` and its binding. With
   * `requireSignedCard` it is verified first (throws `runtime.upstream_card_unverified`; a card
   * that verified under the same anchors is not verified again within 60 s).
   */
  private async card(config: A2ARuntimeConfig, headers: Record<string, string>, fresh: boolean, orgId = ''): Promise<AgentCard> {
    if (config.url) return urlCard(config);
    const fetched = await this.fetchCard(config, headers, fresh, orgId);
    if (config.requireSignedCard) await this.trust.requireVerified(fetched.raw, config.requireSignedCard, config.cardUrl!);
    return fetched.card;
  }

  /** The card at `cardUrl`, as the SDK reads it and as served (cached CARD_TTL_MS by org and URL unless `fresh`). */
  private async fetchCard(config: A2ARuntimeConfig, headers: Record<string, string>, fresh: boolean, orgId = ''): Promise<FetchedCard> {
    const url = config.cardUrl!;
    const key = `${orgId} ${url}`;
    const hit = fresh ? undefined : this.cards.get(key);
    if (hit) return hit;
    const bounded = boundedFetch(outboundFetch(this.policy, headers, { maxBodyBytes: CARD_MAX_BYTES, maxEventBytes: CARD_MAX_BYTES }), CARD_TIMEOUT_MS, CARD_MAX_BYTES);
    // the JSON as served is kept: signatures cover it, not the SDK's normalized card
    let raw: unknown;
    const capturing = (async (input, init) => {
      const res = await bounded(input, init);
      if (!res.ok) return res;
      const body = await res.text();
      try {
        raw = JSON.parse(body);
      } catch {
        raw = undefined;
      }
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    }) as typeof fetch;
    const resolver = new DefaultAgentCardResolver({ fetchImpl: capturing, legacyCompat: { enabled: true } });
    const card = await resolver.resolve(url, '');
    if (!card || !Array.isArray(card.supportedInterfaces) || card.supportedInterfaces.length === 0) throw new UpstreamError('the card declares no interface');
    const fetched = { card, raw };
    this.cards.set(key, fetched);
    return fetched;
  }
}

/** The card of a `url` config: its one interface, nothing else claimed. */
function urlCard(config: A2ARuntimeConfig): AgentCard {
  return {
    name: 'upstream',
    description: '',
    version: '',
    supportedInterfaces: [{ url: config.url, protocolBinding: config.protocolBinding, protocolVersion: config.protocolVersion, tenant: '' }],
    capabilities: { streaming: config.streaming ?? true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: [],
    defaultOutputModes: [],
    skills: [],
    signatures: [],
  } as unknown as AgentCard;
}

/** One execution's conversation with the upstream: what it follows and what the log holds. */
class UpstreamSession {
  private taskId: string | undefined;
  private contextId: string;
  /** Our run's status as this execution last left it. */
  private status: RecordedRun['status'] = 'submitted';
  /** Message ids the log holds (ours, i.e. upstream ids prefixed). */
  private readonly seen = new Set<string>();
  /** Parts each artifact has in the log. */
  private readonly parts = new Map<string, number>();
  private done = false;
  /** Upstream events received by this execution (streams and polls). */
  private received = 0;
  /** Our input went to an existing upstream task: its first snapshot still shows the old state. */
  private answering = false;
  private readonly signal: AbortSignal;
  private readonly deadline: AbortSignal;

  constructor(
    private readonly client: Client,
    private readonly config: A2ARuntimeConfig,
    private readonly ctx: RuntimeContext,
    private readonly streaming: boolean,
    private readonly http: UpstreamIo,
  ) {
    this.contextId = ctx.run.threadId;
    this.deadline = AbortSignal.timeout(config.timeoutMs);
    this.signal = AbortSignal.any([ctx.signal, this.deadline]);
  }

  async run(): Promise<void> {
    const { ctx } = this;
    try {
      const saved = ctx.trigger.kind === 'created' ? null : asState(await ctx.savedState());
      if (ctx.trigger.kind === 'created') this.seen.add(ctx.input.messageId);
      else await this.loadRecorded();
      if (saved) {
        this.taskId = saved.taskId;
        this.contextId = saved.contextId;
      }
      const k = ctx.trigger.kind;
      if (k === 'continued' && this.taskId) {
        // more input on a task another execution is following: hand it upstream and let that
        // execution mirror what follows (two followers would record the same events twice)
        await this.forward();
        return;
      }
      // nothing new to say upstream after a resumption, a settled link or an expiry: follow the
      // task (or, if it was never learned, send again); otherwise send (same task when known)
      const follow = (k === 'resumed' || k === 'link_settled' || k === 'interaction_expired') && this.taskId !== undefined;
      let step: () => Promise<void> = follow ? () => this.reattach() : () => this.send();
      // a stream that ends or breaks before the task did is followed again (GetTask, then
      // SubscribeToTask): at most MAX_REATTACH times, a little later each time
      for (let n = 0; ; n++) {
        const before = this.received;
        try {
          await step();
          if (this.done) break;
          if (n >= MAX_REATTACH) throw new UpstreamError('its stream kept ending before the task did');
        } catch (e) {
          // an answer refused for its size is not asked for again (the upstream would send it again)
          if (this.taskId === undefined || n >= MAX_REATTACH || e instanceof UpstreamError || this.http.refused || isRunTerminal(e) || this.signal.aborted) throw e;
        }
        step = () => this.reattach();
        // the budget is for streams that end without news: one that carried events starts afresh
        // (e.g. a proxy that cuts long SSE connections every minute)
        if (this.received > before) n = 0;
        await ctx.sleep(100 * (n + 1));
        this.signal.throwIfAborted();
      }
    } catch (e) {
      await this.settleError(e);
    }
  }

  /**
   * Send the input to the followed upstream task without following it (see `run`). A worker that
   * stops meanwhile does not cut it (the message would be lost, and nobody sends it again): it is
   * bounded by FORWARD_TIMEOUT_MS instead.
   */
  private async forward(): Promise<void> {
    const { ctx } = this;
    try {
      const options = await this.sendOptions();
      await this.client.sendMessage(this.request(true), { ...options, signal: AbortSignal.any([this.deadline, AbortSignal.timeout(FORWARD_TIMEOUT_MS)]) });
    } catch (e) {
      if (isRunTerminal(e)) throw e;
      // the task goes on; the caller learns that this message did not get through
      await ctx.emitMessage({ parts: [{ text: `The upstream agent did not take this message: ${describe(e, this.http)}` }] });
    }
  }

  /** SendMessage of the execution's input, on the followed upstream task when there is one. */
  private request(returnImmediately: boolean) {
    const { input } = this.ctx;
    const message: Message = {
      messageId: input.messageId,
      contextId: this.contextId,
      taskId: this.taskId ?? '',
      role: Role.ROLE_USER,
      parts: input.parts.map(toSdkPart),
      metadata: input.metadata,
      extensions: [],
      referenceTaskIds: [],
    };
    return { tenant: '', message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately }, metadata: undefined };
  }

  /**
   * Options of a call that carries our caller's input: the A2A extensions the caller activated on
   * our agent are requested from the upstream too (`A2A-Extensions`, A2A v1.0 §4.6; the SDK uses
   * `X-A2A-Extensions` for a v0.3 upstream), so their metadata in the message keeps its meaning.
   * An upstream that does not support one ignores it.
   */
  private async sendOptions(): Promise<RequestOptions> {
    const uris = await this.ctx.extensions();
    return uris.length > 0 ? { signal: this.signal, serviceParameters: ServiceParameters.create(withA2AExtensions(...uris)) } : { signal: this.signal };
  }

  /** Send the execution's input upstream (on the followed task when there is one). */
  private async send(): Promise<void> {
    this.answering = Boolean(this.taskId);
    const request = this.request(!this.streaming);
    const options = await this.sendOptions();
    if (this.streaming) {
      for await (const ev of this.paced((signal) => this.client.sendMessageStream(request, { ...options, signal }))) {
        await this.onEvent(ev.payload);
        if (this.done) return;
      }
      return;
    }
    const result = await this.client.sendMessage(request, options);
    if (isTask(result)) await this.onTask(result);
    else await this.onMessage(result as Message);
    await this.poll();
  }

  /** Follow the upstream task: its state now (GetTask), then its stream or polling. */
  private async reattach(): Promise<void> {
    const task = await this.client.getTask({ tenant: '', id: this.taskId!, historyLength: 100 }, { signal: this.signal });
    await this.onTask(task);
    if (this.done) return;
    if (!this.streaming) return this.poll();
    for await (const ev of this.paced((signal) => this.client.resubscribeTask({ tenant: '', id: this.taskId! }, { signal }))) {
      await this.onEvent(ev.payload);
      if (this.done) return;
    }
  }

  /**
   * The upstream's events as they come; what they produced is committed whenever the upstream
   * pauses for PAUSE_MS (a burst becomes one commit, a slow stream is mirrored live, and the
   * upstream task id is durable before any real wait), and at least every MAX_BATCH_MS or
   * MAX_BATCH_EVENTS events. Left early (done, or a failed commit), the upstream stream is
   * aborted at once rather than waited for.
   */
  private async *paced<T>(open: (signal: AbortSignal) => AsyncIterable<T>): AsyncGenerator<T> {
    const stop = new AbortController();
    const it = open(AbortSignal.any([this.signal, stop.signal]))[Symbol.asyncIterator]();
    let batch = 0;
    let batchStart = 0;
    try {
      for (;;) {
        const next = it.next();
        let timer: NodeJS.Timeout | undefined;
        const paused = new Promise<null>((resolve) => (timer = setTimeout(resolve, PAUSE_MS, null)));
        let r = await Promise.race([next, paused]);
        clearTimeout(timer);
        if (r === null) {
          await this.ctx.flush?.();
          batch = 0;
          r = await next;
        }
        if (r.done) return;
        this.received++;
        if (batch++ === 0) batchStart = Date.now();
        else if (batch >= MAX_BATCH_EVENTS || Date.now() - batchStart >= MAX_BATCH_MS) {
          await this.ctx.flush?.();
          batch = 0;
        }
        yield r.value;
      }
    } finally {
      stop.abort();
      void it.return?.().catch(() => undefined);
    }
  }

  private async poll(): Promise<void> {
    while (!this.done) {
      await this.ctx.sleep(this.config.pollIntervalMs);
      this.signal.throwIfAborted();
      await this.onTask(await this.client.getTask({ tenant: '', id: this.taskId!, historyLength: 100 }, { signal: this.signal }));
      this.received++;
    }
  }

  private async onEvent(p: { $case: string; value: unknown } | undefined): Promise<void> {
    if (!p) return;
    switch (p.$case) {
      case 'task':
        return this.onTask(p.value as Task);
      case 'message':
        return this.onMessage(p.value as Message);
      case 'statusUpdate': {
        const u = p.value as { taskId: string; contextId: string; status?: TaskStatus };
        await this.learn(u.taskId, u.contextId);
        this.answering = false;
        if (u.status) await this.onStatus(u.status);
        return;
      }
      case 'artifactUpdate': {
        const u = p.value as { taskId: string; contextId: string; artifact?: Task['artifacts'][number]; append: boolean; lastChunk: boolean };
        await this.learn(u.taskId, u.contextId);
        if (!u.artifact || u.artifact.parts.length === 0) return;
        const have = this.parts.get(u.artifact.artifactId) ?? 0;
        await this.ctx.emitArtifact(artifactChunk(u.artifact, u.artifact.parts, u.append && have > 0, u.lastChunk));
        this.parts.set(u.artifact.artifactId, (u.append ? have : 0) + u.artifact.parts.length);
        return;
      }
    }
  }

  /** The upstream answered with a Message and no task: that message is the run's answer. */
  private async onMessage(m: Message): Promise<void> {
    const id = this.ourId(m.messageId);
    await this.ctx.setStatus('completed', this.seen.has(id) ? undefined : toAgentMessage(m, id));
    this.done = true;
  }

  /** A whole upstream task (stream start, GetTask): record what the log lacks, then its status. */
  private async onTask(task: Task): Promise<void> {
    await this.learn(task.id, task.contextId);
    const terminal = isUpstreamTerminal(task.status?.state);
    const statusMessageId = task.status?.message?.messageId;
    for (const m of task.history ?? []) {
      if (m.role !== Role.ROLE_AGENT || m.messageId === statusMessageId) continue;
      const id = this.ourId(m.messageId);
      if (this.seen.has(id)) continue;
      await this.ctx.emitMessage(toAgentMessage(m, id));
      this.seen.add(id);
    }
    for (const a of task.artifacts ?? []) {
      const have = this.parts.get(a.artifactId) ?? 0;
      if (a.parts.length === have) continue;
      const append = have > 0 && a.parts.length > have;
      await this.ctx.emitArtifact(artifactChunk(a, append ? a.parts.slice(have) : a.parts, append, terminal));
      this.parts.set(a.artifactId, a.parts.length);
    }
    if (task.status) await this.onStatus(task.status, true);
    // a snapshot still showing the question we answered (an upstream slow to take the answer,
    // polled) is not a new question: keep waiting until the upstream moves on
    const state = task.status?.state;
    if (state !== TaskState.TASK_STATE_INPUT_REQUIRED && state !== TaskState.TASK_STATE_AUTH_REQUIRED) this.answering = false;
  }

  /**
   * Mirror an upstream status. `snapshot`: it comes from a whole task (stream start, GetTask); an
   * input-required / auth-required there whose question we already recorded is the question our
   * input just answered (the upstream has not moved yet), not a new one.
   */
  private async onStatus(s: TaskStatus, snapshot = false): Promise<void> {
    const m = s.message;
    const id = m ? this.ourId(m.messageId) : undefined;
    const known = id !== undefined && this.seen.has(id);
    const message = m && id && !known ? toAgentMessage(m, id) : undefined;
    if (id) this.seen.add(id);
    const interrupted = s.state === TaskState.TASK_STATE_INPUT_REQUIRED || s.state === TaskState.TASK_STATE_AUTH_REQUIRED;
    if (interrupted && snapshot && (known || this.answering)) return;
    switch (s.state) {
      case TaskState.TASK_STATE_SUBMITTED:
        // accepted, not started: nothing changes here (a message is just a message)
        if (message) await this.ctx.emitMessage(message);
        return;
      case TaskState.TASK_STATE_WORKING:
        if (message || this.status === 'submitted') {
          await this.ctx.setStatus('working', message);
          this.status = 'working';
        }
        return;
      case TaskState.TASK_STATE_COMPLETED:
        return this.end('completed', message);
      case TaskState.TASK_STATE_FAILED:
        return this.end('failed', message ?? { parts: [{ text: 'The upstream agent failed the task.' }] });
      case TaskState.TASK_STATE_REJECTED:
        return this.end('rejected', message);
      case TaskState.TASK_STATE_CANCELED:
        if (this.ctx.signal.aborted) {
          this.done = true;
          return;
        }
        return this.end('failed', { parts: [{ text: 'The upstream agent canceled its task.' }] });
      case TaskState.TASK_STATE_INPUT_REQUIRED:
      case TaskState.TASK_STATE_AUTH_REQUIRED: {
        const kind = s.state === TaskState.TASK_STATE_INPUT_REQUIRED ? 'input' : 'auth';
        await this.ctx.requestInteraction(kind, message ?? { parts: [{ text: kind === 'input' ? 'The agent needs more input.' : 'The agent needs authorization.' }] }, {
          state: { upstreamTaskId: this.taskId },
        });
        this.done = true;
        return;
      }
      default:
        return;
    }
  }

  private async end(status: 'completed' | 'failed' | 'rejected', message?: AgentMessageInput): Promise<void> {
    await this.ctx.setStatus(status, message);
    this.status = status;
    this.done = true;
  }

  /** The upstream task became known (or is the one followed): save it on the run, committed now. */
  private async learn(taskId: string, contextId: string): Promise<void> {
    if (!taskId || taskId === this.taskId) return;
    this.taskId = taskId;
    if (contextId) this.contextId = contextId;
    // committed at once: a follow-up message arriving meanwhile must find the task to send to
    // (else it would open a second upstream task), and a resumed execution the task to follow
    await this.ctx.saveState({ taskId, contextId: this.contextId } satisfies UpstreamState);
    await this.ctx.flush?.();
  }

  private async loadRecorded(): Promise<void> {
    const rec = await this.ctx.recorded();
    this.status = rec.status;
    for (const id of rec.messageIds) this.seen.add(id);
    for (const a of rec.artifacts) this.parts.set(a.artifactId, a.parts.length);
  }

  /** Our messageId for an upstream message (unique here even if the upstream reuses ids across tasks). */
  private ourId(upstreamId: string): string {
    // a Message with no upstream task is scoped by our run (message ids are unique per agent)
    const raw = `${this.taskId ?? `run-${this.ctx.run.runId}`}:${upstreamId}`;
    return raw.length <= 200 ? raw : createHash('sha256').update(raw).digest('hex');
  }

  /** Why the execution stopped early: canceled (tell the upstream), stopped, timed out, or failed. */
  private async settleError(e: unknown): Promise<void> {
    const { ctx } = this;
    const terminal = isRunTerminal(e);
    if (ctx.signal.aborted || terminal) {
      // our run was canceled (or ended): cancel upstream; a worker shutting down leaves it be
      const rec = terminal ? null : await ctx.recorded().catch((x: unknown) => (isRunTerminal(x) ? null : undefined));
      if (this.taskId && (rec === null || rec?.status === 'canceled')) {
        await this.client.cancelTask({ tenant: '', id: this.taskId, metadata: undefined }, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
      }
      return;
    }
    if (this.deadline.aborted) {
      if (this.taskId) await this.client.cancelTask({ tenant: '', id: this.taskId, metadata: undefined }, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
      await ctx.setStatus('failed', { parts: [{ text: `The upstream agent did not finish within ${this.config.timeoutMs} ms.` }] }).catch(() => undefined);
      return;
    }
    // we stop following a task whose answers we refuse: it is canceled upstream, as on a timeout
    if (this.http.refused && this.taskId) await this.client.cancelTask({ tenant: '', id: this.taskId, metadata: undefined }, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
    await ctx.setStatus('failed', { parts: [{ text: `The upstream agent failed: ${describe(e, this.http)}` }] }).catch(() => undefined);
  }
}

/**
 * A fetch for one-shot requests (the upstream card): it fails after `timeoutMs` (the whole exchange,
 * body included) and refuses a body larger than `maxBytes`, so a slow or huge answer cannot hold a
 * publish or an execution.
 */
function boundedFetch(inner: typeof fetch, timeoutMs: number, maxBytes: number): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const signal = init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await inner(input, { ...init, signal });
    } catch (e) {
      if (e instanceof ResponseTooLargeError) throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
      throw signal.aborted && !init.signal?.aborted ? new UpstreamError(`no answer within ${timeoutMs} ms`) : e;
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > maxBytes) throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body ?? []) {
        size += chunk.length;
        if (size > maxBytes) throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
        chunks.push(chunk);
      }
    } catch (e) {
      if (e instanceof UpstreamError) throw e;
      if (e instanceof ResponseTooLargeError) throw new UpstreamError(`the answer is larger than ${maxBytes} bytes`);
      throw signal.aborted ? new UpstreamError(`no answer within ${timeoutMs} ms`) : e;
    }
    return new Response(Buffer.concat(chunks), { status: res.status, statusText: res.statusText, headers: res.headers });
  }) as typeof fetch;
}

/** Why an answer was refused, naming the setting that bounds it. */
function refusalReason(e: ResponseTooLargeError): string {
  return e.kind === 'answer'
    ? `the upstream's answer exceeds ${e.limit} bytes (RUNTIME_MAX_ANSWER_BYTES)`
    : `an event of the upstream's stream exceeds ${e.limit} bytes (RUNTIME_MAX_EVENT_BYTES)`;
}

function asState(raw: unknown): UpstreamState | null {
  const s = raw as Partial<UpstreamState> | null;
  return s && typeof s.taskId === 'string' && typeof s.contextId === 'string' ? { taskId: s.taskId, contextId: s.contextId } : null;
}

function isTask(r: unknown): r is Task {
  return typeof r === 'object' && r !== null && 'status' in r && 'id' in r;
}

function isUpstreamTerminal(state: TaskState | undefined): boolean {
  return state === TaskState.TASK_STATE_COMPLETED || state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_CANCELED || state === TaskState.TASK_STATE_REJECTED;
}

/**
 * A readable reason from an SDK, network or upstream error (`io`: the last error status seen, and
 * an answer refused for its size, which is the reason whatever the SDK made of it).
 */
function describe(e: unknown, io: UpstreamIo = { status: 0 }): string {
  if (io.refused) return refusalReason(io.refused);
  const httpStatus = io.status;
  if (!(e instanceof Error)) return String(e);
  const cause = (e as { cause?: unknown }).cause;
  let why = cause instanceof Error && cause.message && !e.message.includes(cause.message) ? `${e.message} (${cause.message})` : e.message;
  if (e.name && e.name !== 'Error' && e.name !== 'TypeError' && !why.includes(e.name)) why = `${e.name}: ${why}`;
  if (httpStatus && !why.includes(String(httpStatus))) why = `${why} (HTTP ${httpStatus})`;
  return why.length > 500 ? `${why.slice(0, 500)}…` : why;
}

function toSdkPart(p: Part): SdkPart {
  const content: SdkPart['content'] =
    p.text !== undefined
      ? { $case: 'text', value: p.text }
      : p.raw !== undefined
        ? { $case: 'raw', value: Buffer.from(p.raw, 'base64') }
        : p.url !== undefined
          ? { $case: 'url', value: p.url }
          : { $case: 'data', value: p.data };
  return { content, metadata: p.metadata, filename: p.filename ?? '', mediaType: p.mediaType ?? '' };
}

function fromSdkPart(p: SdkPart): Part {
  const c = p.content;
  const part: Part =
    c?.$case === 'raw'
      ? { raw: Buffer.from(c.value).toString('base64') }
      : c?.$case === 'url'
        ? { url: c.value }
        : c?.$case === 'data'
          ? { data: c.value ?? null }
          : { text: c?.$case === 'text' ? c.value : '' };
  if (p.mediaType) part.mediaType = p.mediaType;
  if (p.filename) part.filename = p.filename;
  if (p.metadata && Object.keys(p.metadata).length > 0) part.metadata = p.metadata;
  return part;
}

function toAgentMessage(m: Message, id: string): AgentMessageInput {
  const parts = m.parts.length > 0 ? m.parts.map(fromSdkPart) : [{ text: '' }];
  return { messageId: id, parts, ...(m.metadata && Object.keys(m.metadata).length > 0 && { metadata: m.metadata }) };
}

function artifactChunk(a: Task['artifacts'][number], parts: SdkPart[], append: boolean, lastChunk: boolean) {
  return {
    artifactId: a.artifactId,
    ...(a.name && { name: a.name }),
    ...(a.description && { description: a.description }),
    parts: parts.map(fromSdkPart),
    ...(a.metadata && Object.keys(a.metadata).length > 0 && { metadata: a.metadata }),
    append,
    lastChunk,
  };
}

/** The canonical message type this runtime maps to (re-exported for tests). */
export type { CanonicalMessage };
