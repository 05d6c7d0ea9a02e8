import { createHash } from 'node:crypto';
import {
  HttpRuntimeConfigSchema,
  HttpRuntimeOperationSchema,
  HttpRuntimeResultSchema,
  type CanonicalMessage,
  type HttpRuntimeConfig,
  type HttpRuntimeOperation,
  type HttpRuntimeRequest,
  type RunStatus,
} from '#libs/contracts';
import { openOutboundStream, webhookHeaders, type OutboundPolicy } from '#libs/outbound';
import { refuseLiteralAddresses } from '../outbound-config.js';
import { backendFrames, CHUNK_END, FrameLimitError } from './backend-frames.js';
import { DEFAULT_ANSWER_BUDGET, type AnswerBudget } from '../answer-budget.js';
import { abortedByCancel, isRunTerminal, type AgentMessageInput, type AgentRuntime, type OperationOptions, type RuntimeContext } from '../runtime.js';
import { describeSecretRef, isSecretRefusal, NO_RUNTIME_SECRETS, secretRefOf, type RuntimeSecrets, type RuntimeSecretUse } from '../runtime-secrets.js';

/** A backend answer the runtime cannot use: the run fails with this reason. */
class BackendError extends Error {}

/**
 * A RuntimeContext call failed while an answer was applied (the run ended, the database did not
 * take it, a newer execution took the run over): the platform's failure, not the backend's, so
 * never a reason to POST the backend again. `execute` rethrows its cause (or stops, for a run that ended).
 */
class ContextFailure extends Error {
  constructor(readonly failure: unknown) {
    super('a runtime operation failed', { cause: failure });
  }
}

/** `fn`, a rejection of the RuntimeContext's wrapped as a ContextFailure (the backend's own, BackendError, as it is). */
async function onContext<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof BackendError ? e : new ContextFailure(e);
  }
}

/**
 * The `http` runtime: any backend, in any language, behind an agent. Each execution POSTs an
 * HttpRuntimeRequest (run ids, trigger, input, thread history) to `config.url`, signed with
 * Standard Webhooks (`webhook-id` stable for the execution, so a retried attempt is recognisable),
 * and applies the runtime operations the backend answers with, in order, as they arrive:
 * `application/x-ndjson` (one operation per line), `text/event-stream` (one per event's data), or
 * `application/json` (`{ "operations": [...] }`). The outbound guard applies (public unicast only,
 * unless HTTP_RUNTIME_ALLOWED_CIDRS). Failures before any operation was applied (connection
 * errors, 5xx) are retried `retries` times; afterwards, or for any other failure, the run fails with
 * a readable reason. Cancellation aborts the request and tells `cancelUrl`. A backend that ends
 * without a terminal status, an interaction or a delegation completes the run.
 *
 * Resumable (unless the config says `resumable: false`): an execution lost with its worker is
 * POSTed again with trigger `resumed` — the lost trigger, the run's last sequence and the ids of the
 * operations the log holds — under the lost execution's `webhook-id`; operations the backend sends
 * again are dropped by id (its `id`, `message:<messageId>`, or `<artifactId>#<n>` for the n-th chunk
 * of an artifact, per execution).
 *
 * Answers are read within `budget`: an `application/json` answer of at most RUNTIME_MAX_ANSWER_BYTES
 * (refused from its Content-Length, else as it arrives), each NDJSON line or SSE event of at most
 * RUNTIME_MAX_EVENT_BYTES; past either the run fails ("the backend's answer exceeds N bytes") and
 * the connection is closed. A 5xx answer retried is drained up to RUNTIME_MAX_ANSWER_BYTES, then cut.
 */
export class HttpRuntime implements AgentRuntime<HttpRuntimeConfig> {
  readonly kind = 'http';
  readonly resumable = true;

  /** A backend that declares it cannot resume (`resumable: false`) keeps its lost runs failed. */
  canResume(config: HttpRuntimeConfig): boolean {
    return config.resumable !== false;
  }

  /**
   * `secrets`: the signing key's source, asked for the run's organization only (the default refuses
   * all); `budget`: the most bytes read of a JSON answer and of one streamed operation.
   */
  constructor(
    private readonly policy: OutboundPolicy,
    private readonly secrets: RuntimeSecrets = NO_RUNTIME_SECRETS,
    private readonly budget: AnswerBudget = DEFAULT_ANSWER_BUDGET,
  ) {}

  /** Throws a ZodError for an invalid config, including a literal address the guard refuses. */
  parseConfig(raw: unknown): HttpRuntimeConfig {
    return refuseLiteralAddresses(HttpRuntimeConfigSchema.parse(raw), ['url', 'cancelUrl'], this.policy);
  }

  /** The signing key: `secret` or `secretEnv`. */
  secretRefs(config: HttpRuntimeConfig): RuntimeSecretUse[] {
    const ref = secretRefOf(config);
    return [{ path: ['secret' in ref ? 'secret' : 'secretEnv'], ref }];
  }

  directReply(): AgentMessageInput | null {
    return null;
  }

  async execute(config: HttpRuntimeConfig, ctx: RuntimeContext): Promise<void> {
    const ref = secretRefOf(config);
    let secret: string;
    try {
      // the run's organization only: a revision reaches its own org's secrets, never the worker's environment
      secret = await this.secrets.resolve(ctx.run.orgId, ref);
    } catch (e) {
      if (!isSecretRefusal(e)) throw e;
      await ctx.setStatus('failed', { parts: [{ text: `The agent's backend is not configured (${describeSecretRef(ref)}): ${e.message}. Nothing was sent.` }] });
      return;
    }
    const [history, extensions, recorded] = await Promise.all([ctx.history(), ctx.extensions(), ctx.resumed ? ctx.recorded() : null]);
    const t = ctx.trigger;
    const trigger = t.kind === 'resumed' && recorded ? { ...t, lastSequence: recorded.lastSequence, applied: recorded.operationIds } : t;
    const request: HttpRuntimeRequest = { run: { ...ctx.run }, trigger: trigger as HttpRuntimeRequest['trigger'], input: ctx.input, history, extensions };
    const body = JSON.stringify(request);
    // stable per execution: a resumed one answers its lost predecessor's trigger, under its id
    const played = t.kind === 'resumed' && t.lost ? t.lost : t;
    const key = createHash('sha256').update(`${ctx.input.messageId}|${JSON.stringify(played)}`).digest('hex').slice(0, 16);
    const webhookId = `run_${ctx.run.runId}_${key}`;
    const state: ApplyState = { applied: 0, ended: false, key, chunks: new Map(), ...(recorded && { recorded: { status: recorded.status, operationIds: recorded.operationIds } }) };
    for (let attempt = 0; ; attempt++) {
      const headers = { accept: 'application/x-ndjson, text/event-stream, application/json', ...webhookHeaders(secret, webhookId, body) };
      try {
        const res = await openOutboundStream(new URL(config.url), body, headers, { policy: this.policy, timeoutMs: config.timeoutMs, signal: ctx.signal });
        if (res.status >= 500 && state.applied === 0 && attempt < config.retries) {
          await drain(res.body, this.budget.maxAnswerBytes);
          await ctx.sleep(Math.min(2000, 200 * 2 ** attempt));
          continue;
        }
        if (res.status < 200 || res.status >= 300) {
          discard(res.body);
          throw new BackendError(`the backend answered HTTP ${res.status}`);
        }
        await this.consume(res.headers['content-type'] ?? '', res.headers['content-length'], res.body, ctx, state);
        break;
      } catch (e) {
        if (ctx.signal.aborted) {
          // the run was canceled: tell the backend (a stopping worker or a fenced execution does not:
          // the run goes on in another execution)
          if (config.cancelUrl && abortedByCancel(ctx.signal)) this.notifyCancel(config.cancelUrl, secret, ctx.run.runId);
          return;
        }
        if (e instanceof ContextFailure) {
          if (isRunTerminal(e.failure)) return;
          throw e.failure;
        }
        if (isRunTerminal(e)) return;
        const network = !(e instanceof BackendError);
        if (network && state.applied === 0 && attempt < config.retries) {
          await ctx.sleep(Math.min(2000, 200 * 2 ** attempt));
          continue;
        }
        await ctx.setStatus('failed', { parts: [{ text: `The agent's backend failed: ${e instanceof Error ? e.message : String(e)}` }] }).catch(() => undefined);
        return;
      }
    }
    if (!state.ended && !ctx.signal.aborted) await ctx.setStatus('completed');
  }

  /** Read the answer in its format (within the budget) and apply each operation as it arrives. */
  private async consume(contentType: string, contentLength: string | undefined, body: AsyncIterable<Buffer>, ctx: RuntimeContext, state: ApplyState): Promise<void> {
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    const apply = async (raw: string, where: string) => {
      if (raw.trim() === '') return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        throw new BackendError(`${where} is not JSON`);
      }
      const op = HttpRuntimeOperationSchema.safeParse(parsed);
      if (!op.success) throw new BackendError(`${where} is not a runtime operation: ${op.error.issues.map((i) => `${i.path.join('.') || '(op)'}: ${i.message}`).join('; ')}`);
      await onContext(() => applyOperation(op.data, ctx, state));
    };
    if (type === 'application/json') {
      const max = this.budget.maxAnswerBytes;
      // refused before a byte is read
      if (Number(contentLength) > max) {
        discard(body);
        throw tooLarge(max);
      }
      const text = await readAll(body, max);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new BackendError('the JSON answer is not JSON');
      }
      const result = HttpRuntimeResultSchema.safeParse(parsed);
      if (!result.success) throw new BackendError(`the JSON answer is not { operations: [...] }: ${result.error.issues[0]?.message ?? ''}`);
      for (const op of result.data.operations) await onContext(() => applyOperation(op, ctx, state));
      return;
    }
    if (type !== 'application/x-ndjson' && type !== 'text/event-stream') throw new BackendError(`the backend answered with Content-Type ${type || '(none)'}`);
    try {
      for await (const frame of backendFrames(body, type === 'text/event-stream' ? 'sse' : 'ndjson', this.budget.maxEventBytes)) {
        // what arrived is committed before waiting for more: readers follow the backend live
        if (frame === CHUNK_END) await onContext(async () => ctx.flush?.());
        else await apply(frame.text, frame.where);
      }
    } catch (e) {
      throw e instanceof FrameLimitError ? new BackendError(`${e.message} (RUNTIME_MAX_EVENT_BYTES)`) : e;
    }
  }

  /** Best effort: tell the backend the run was canceled (signed like the run request). */
  private notifyCancel(url: string, secret: string, runId: string): void {
    const body = JSON.stringify({ runId, canceled: true });
    void openOutboundStream(new URL(url), body, webhookHeaders(secret, `cancel_${runId}`, body), { policy: this.policy, timeoutMs: 10_000 })
      .then((r) => drain(r.body, this.budget.maxAnswerBytes))
      .catch(() => undefined);
  }
}

/** What one answer did so far: operations applied, whether it ended the run, chunks per artifact. */
interface ApplyState {
  applied: number;
  ended: boolean;
  /** Names this execution (and the one resuming it) in the ids derived for its operations. */
  key: string;
  /** The index of the last chunk of each artifact in this answer (an artifact operation without id is named by it). */
  chunks: Map<string, number>;
  /** A resumed execution: what the log held when it started. */
  recorded?: { status: RunStatus; operationIds: string[] };
}

/**
 * The id an operation is recorded under: its own; for an artifact chunk without one
 * `<execution>:<artifactId>#<n>` (`<execution>`: the last part of the `webhook-id`), n its chunk index — 0 for a chunk that does not append, the next index for
 * one that does (after the artifact's last chunk in this answer, or, on a resumed execution, in the
 * log: a backend continuing an artifact goes on counting); for a message with a messageId
 * `message:<messageId>`. Other operations without an id have none (a replaying backend should give
 * ids).
 */
function operationId(op: HttpRuntimeOperation, state: ApplyState): OperationOptions {
  if (op.op === 'artifact') {
    if (op.id) return { id: op.id };
    let n = 0;
    if (op.append) {
      const last = state.chunks.get(op.artifactId) ?? lastRecordedChunk(`${state.key}:${op.artifactId}#`, state.recorded?.operationIds ?? []);
      n = last + 1;
    }
    state.chunks.set(op.artifactId, n);
    return { id: `${state.key}:${op.artifactId}#${n}` };
  }
  if (op.op === 'delegate') return {};
  if (op.id) return { id: op.id };
  return op.op === 'message' && op.message.messageId ? { id: `message:${op.message.messageId}` } : {};
}

/** One wire operation through the RuntimeContext (the append path). */
async function applyOperation(op: HttpRuntimeOperation, ctx: RuntimeContext, state: ApplyState): Promise<void> {
  if (state.ended) throw new BackendError(`an operation (${op.op}) came after the run ended`);
  const id = operationId(op, state);
  switch (op.op) {
    case 'status':
      // a replayed `working` (no id, no message) of a resumed run that is working already says nothing new
      if (!id.id && !op.message && state.recorded?.status === op.status && op.status === 'working') break;
      await ctx.setStatus(op.status, op.message, id);
      state.ended = op.status !== 'working';
      break;
    case 'message':
      await ctx.emitMessage(op.message, id);
      break;
    case 'artifact': {
      const { op: _op, id: _id, ...chunk } = op;
      await ctx.emitArtifact(chunk, id);
      break;
    }
    case 'interaction': {
      const { op: _op, id: _id, kind, message, ...opts } = op;
      await ctx.requestInteraction(kind, message, opts, id);
      state.ended = opts.blocking !== false;
      break;
    }
    case 'delegate':
      await ctx.delegate({ agent: op.agent, message: op.message, ...(op.kind && { kind: op.kind }), ...(op.state !== undefined && { state: op.state }) });
      state.ended = true;
      break;
  }
  state.applied++;
}

/** The highest chunk index among recorded operation ids `<prefix><n>`, -1 when none. */
function lastRecordedChunk(prefix: string, ids: readonly string[]): number {
  let last = -1;
  for (const id of ids) {
    if (!id.startsWith(prefix)) continue;
    const n = Number(id.slice(prefix.length));
    if (Number.isInteger(n) && n > last) last = n;
  }
  return last;
}

function tooLarge(max: number): BackendError {
  return new BackendError(`the backend's answer exceeds ${max} bytes (RUNTIME_MAX_ANSWER_BYTES)`);
}

/** The whole body as text; BackendError past `max` bytes (leaving the loop closes the body). */
async function readAll(body: AsyncIterable<Buffer>, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    size += c.length;
    if (size > max) throw tooLarge(max);
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Close a body without reading it (its connection goes with it). */
function discard(body: AsyncIterable<Buffer>): void {
  (body as { destroy?: () => void }).destroy?.();
}

/** Read and drop a body we do not use, so its connection ends cleanly; past `max` bytes it is cut instead. */
async function drain(body: AsyncIterable<Buffer>, max: number): Promise<void> {
  let size = 0;
  for await (const c of body) {
    if ((size += c.length) > max) return;
  }
}

/** The user message that triggered an execution (re-exported for tests of backends). */
export type { CanonicalMessage };
