import { z } from 'zod';
import { compileSafeRegex, safeMatchLength } from './safe-regex.js';
import { budgetIssues, DEFAULT_SCRIPTED_LIMITS, matchedText, type ScriptedLimits } from './scripted-limits.js';
import { createHash } from 'node:crypto';
import {
  messageText,
  SCRIPTED_INPUT_PLACEHOLDER,
  SCRIPTED_RESULT_PLACEHOLDER,
  SUBSTATES_EXTENSION_URI,
  ScriptedRuntimeConfigSchema,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type Part,
  type ScriptedRule,
  type ScriptedRuntimeConfig,
  type ScriptedStep,
} from '#libs/contracts';
import { isRunTerminal, type AgentMessageInput, type AgentRuntime, type OperationOptions, type RuntimeContext, type RuntimeTrigger } from '../runtime.js';

type StepOf<T extends ScriptedStep['type']> = Extract<ScriptedStep, { type: T }>;

/** The rule used when no configured rule matches: working, echo the input, completed. */
function echoRule(input: CanonicalMessage): ScriptedRule {
  const hasText = input.parts.some((p) => p.text !== undefined);
  return {
    name: 'echo',
    match: {},
    steps: [
      { type: 'status', status: 'working' },
      hasText ? { type: 'message', text: SCRIPTED_INPUT_PLACEHOLDER } : { type: 'message', parts: input.parts },
      { type: 'status', status: 'completed' },
    ],
  };
}

/** Length of what `match` matched (`text`: the input's matched text), or null when a matcher fails. */
function matchScore(match: ScriptedRule['match'], input: CanonicalMessage, text: string): number | null {
  let score = 0;
  if (match.text !== undefined) {
    const length = safeMatchLength(compileSafeRegex(match.text, match.flags), text);
    if (length === null) return null;
    score += length;
  }
  if (match.messageIdPrefix !== undefined) {
    if (!input.messageId.startsWith(match.messageIdPrefix)) return null;
    score += match.messageIdPrefix.length;
  }
  return score;
}

/**
 * Pick the rule that answers `input`: among rules whose matchers all match, the one with the
 * longest match (regex match length plus prefix length; an empty match still counts); ties go to
 * the earlier rule. No match: the default echo rule, built for this input (echoes its text, or
 * its parts as they are when it has no text part). Patterns see the start of the input's text
 * that `limits` allow (`matchedText`): one message's matching costs at most `limits.matchBudget`.
 */
export function selectRule(config: ScriptedRuntimeConfig, input: CanonicalMessage, limits: ScriptedLimits = DEFAULT_SCRIPTED_LIMITS): ScriptedRule {
  const i = selectRuleIndex(config, input, limits);
  return i >= 0 ? config.rules[i]! : echoRule(input);
}

/** Index of the rule `selectRule` picks among `config.rules`, or -1 for the echo rule. */
function selectRuleIndex(config: ScriptedRuntimeConfig, input: CanonicalMessage, limits: ScriptedLimits): number {
  const text = matchedText(config, input, limits);
  let best = -1;
  let bestScore = -1;
  config.rules.forEach((rule, i) => {
    const score = matchScore(rule.match, input, text);
    if (score !== null && score > bestScore) {
      best = i;
      bestScore = score;
    }
  });
  return best;
}

/** Where a step sits in the config: [rule, step, branch key, step, branch key, step, ...]. */
type StepPath = Array<string | number>;

/** A step to run and its path (interactions and delegations resume from their path). */
interface Queued {
  step: ScriptedStep;
  path: StepPath;
}

/** The trigger a scripted execution plays (a resumed one plays its lost predecessor's). */
type PlayedTrigger = Exclude<RuntimeTrigger, { kind: 'resumed' }>;

/**
 * Where the operations of one execution are named from: the trigger it plays, identified within
 * the run (the user message for a creation or new input, the interaction, the link). A resumed
 * execution plays the same trigger, so it computes the same operation ids.
 */
function frameOf(t: PlayedTrigger, input: CanonicalMessage): string {
  switch (t.kind) {
    case 'interaction_responded':
    case 'interaction_expired':
      return `i:${t.interaction.id}`;
    case 'link_settled':
      return `l:${t.link.linkId}`;
    default:
      return `m:${input.messageId}`;
  }
}

/**
 * The operation id of a step (`<frame>/<path>`, `#<chunk>` for an artifact's chunks): stored with
 * its events, so a resumed execution records each step once.
 */
function stepId(frame: string, path: StepPath, chunk?: number): string {
  return `${frame}/${path.join('.')}${chunk === undefined ? '' : `#${chunk}`}`;
}

/** A stable UUID-shaped id derived from `key` (an artifact's id when its step names none). */
function stableUuid(key: string): string {
  const h = createHash('sha256').update(key).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
}

/** The runtime state the scripted runtime leaves on interactions and links. */
interface ScriptedState {
  scripted: { path: StepPath };
}

function pathOf(state: unknown): StepPath | null {
  const path = (state as Partial<ScriptedState> | undefined)?.scripted?.path;
  return Array.isArray(path) && path.length >= 2 ? path : null;
}

/**
 * The step lists from the rule down to the step at `path`, each with the index of the step taken
 * in it. Null when the path does not name a step of this config (e.g. a state from elsewhere).
 */
function levelsOf(config: ScriptedRuntimeConfig, path: StepPath): Array<{ list: ScriptedStep[]; prefix: StepPath; index: number }> | null {
  const rule = config.rules[path[0] as number];
  if (!rule || typeof path[1] !== 'number') return null;
  const levels = [{ list: rule.steps, prefix: [path[0]!] as StepPath, index: path[1] }];
  for (let d = 2; d < path.length; d += 2) {
    const up = levels.at(-1)!;
    const step = up.list[up.index];
    const list = step?.type === 'interaction' ? step.branches?.[String(path[d])] : undefined;
    if (!list || typeof path[d + 1] !== 'number') return null;
    levels.push({ list, prefix: [...up.prefix, up.index, path[d]!], index: path[d + 1] as number });
  }
  const last = levels.at(-1)!;
  return last.list[last.index] ? levels : null;
}

/** The step at `path` and the steps that follow it (innermost list first, then outwards). */
function resumeAt(config: ScriptedRuntimeConfig, path: StepPath): { step: ScriptedStep; after: Queued[] } | null {
  const levels = levelsOf(config, path);
  if (!levels) return null;
  const after: Queued[] = [];
  for (let l = levels.length - 1; l >= 0; l--) {
    const { list, prefix, index } = levels[l]!;
    for (let j = index + 1; j < list.length; j++) after.push({ step: list[j]!, path: [...prefix, j] });
  }
  const last = levels.at(-1)!;
  return { step: last.list[last.index]!, after };
}

/** Values `{{...}}` placeholders take in this execution. */
interface RenderVars {
  input: CanonicalMessage;
  result?: string;
}

function render(text: string, vars: RenderVars | CanonicalMessage): string {
  const v: RenderVars = 'input' in vars ? vars : { input: vars };
  // A replacer function, so `$&`-style patterns in the input are not interpreted.
  return text
    .replaceAll(SCRIPTED_INPUT_PLACEHOLDER, () => messageText(v.input.parts))
    .replaceAll(SCRIPTED_RESULT_PLACEHOLDER, () => v.result ?? '');
}

function agentMessage(step: { text?: string; parts?: Part[]; metadata?: Record<string, unknown> }, vars: RenderVars | CanonicalMessage): AgentMessageInput {
  return { parts: step.text !== undefined ? [{ text: render(step.text, vars) }] : (step.parts ?? []), ...(step.metadata && { metadata: step.metadata }) };
}

/** Split `length` items into `n` near-equal, non-empty slices (fewer when `length < n`). */
function slices(length: number, n: number): Array<[number, number]> {
  const count = Math.max(1, Math.min(n, length));
  return Array.from({ length: count }, (_, i) => [
    Math.floor((i * length) / count),
    Math.floor(((i + 1) * length) / count),
  ]);
}

function fileMeta(c: { mediaType?: string; filename?: string }): Pick<Part, 'mediaType' | 'filename'> {
  return {
    ...(c.mediaType !== undefined && { mediaType: c.mediaType }),
    ...(c.filename !== undefined && { filename: c.filename }),
  };
}

/**
 * The chunks of an artifact step, with append/lastChunk set (`{{input}}` filled in text content).
 * `defaultId`: the artifact's id when the step names none (stable, so a replay continues it).
 */
function artifactChunks(step: StepOf<'artifact'>, input: CanonicalMessage, defaultId: string): ArtifactChunkInput[] {
  const { content, chunks = 1 } = step;
  let parts: Part[];
  if ('text' in content) {
    const chars = Array.from(render(content.text, input)); // code points: never split a surrogate pair
    parts = slices(chars.length, chunks).map(([a, b]) => ({ text: chars.slice(a, b).join('') }));
  } else if ('bytesBase64' in content) {
    const bytes = Buffer.from(content.bytesBase64, 'base64');
    parts = slices(bytes.length, chunks).map(([a, b]) => ({
      raw: bytes.subarray(a, b).toString('base64'),
      ...fileMeta(content),
    }));
  } else if ('url' in content) {
    parts = [{ url: content.url, ...fileMeta(content) }];
  } else {
    parts = [{ data: content.data }];
  }
  const artifactId = step.artifactId ?? defaultId;
  const { name, description } = step;
  return parts.map((part, i) => ({
    artifactId,
    ...(name !== undefined && { name }),
    ...(description !== undefined && { description }),
    parts: [part],
    append: i > 0,
    lastChunk: i === parts.length - 1,
  }));
}

/**
 * The `scripted` runtime: an embedded agent whose behaviour is a list of rules in the revision's
 * runtime config (see `ScriptedRuntimeConfigSchema`). Used for demos and contract tests.
 */
export class ScriptedRuntime implements AgentRuntime<ScriptedRuntimeConfig> {
  readonly kind = 'scripted';
  /**
   * Deterministic, so resumable: a resumed execution plays the trigger of the one it replaces
   * (`trigger.lost`) again, skips the steps before the last one the log holds (no waits), and
   * drops every operation already recorded (each step's events carry the step's id: `<frame>/<path>`,
   * `#<chunk>` for artifact chunks, `<frame>/end` for the closing `completed`).
   */
  readonly resumable = true;

  /** `limits`: what a revision's rules may cost (draft) and one message's matching (default: libs/config's defaults). */
  constructor(private readonly limits: ScriptedLimits = DEFAULT_SCRIPTED_LIMITS) {}

  /**
   * Throws a `ZodError` when `raw` is not a valid scripted config, including a `match.text` that
   * is not an RE2 pattern (the error names the rule and says what is unsupported) and a config
   * over the budgets of `limits` (the error names the field and the limit: `rules` for the number
   * of rules and their patterns' total RE2 program size, `rules.<i>.match.text` for a long pattern).
   * Applies to every parse, so a revision published before the budgets and over them no longer runs.
   */
  parseConfig(raw: unknown): ScriptedRuntimeConfig {
    const config = ScriptedRuntimeConfigSchema.parse(raw);
    const issues = budgetIssues(config, this.limits);
    if (issues.length > 0) throw new z.ZodError(issues);
    return config;
  }

  /**
   * The reply of the selected rule when it is a `reply` rule, else null (a run is needed). A
   * config without `reply` rules matches nothing here (its rules are matched by the execution).
   */
  directReply(config: ScriptedRuntimeConfig, input: CanonicalMessage): AgentMessageInput | null {
    if (!hasReplyRule(config)) return null;
    const [step] = selectRule(config, input, this.limits).steps;
    return step?.type === 'reply' ? agentMessage(step, input) : null;
  }

  /**
   * Run the steps of the rule selected for `ctx.input`, in order — or, when this execution is the
   * answer to (or expiry of) an `interaction` step or the settlement of a `delegate` step, resume
   * the script there (see ScriptedInteractionStep and the `delegate` step). Returns early when
   * `ctx.signal` aborts, after a blocking interaction or a delegation (the answer / settlement
   * triggers a new execution), after an input-/auth-required status step (the answer selects a
   * rule again), after a terminal status, and after `holdUntilCanceled`. Steps that end without
   * any of these finish with status `completed`, so no run is left working. A `reply` rule
   * reached here (a continuation) emits its message and completes.
   *
   * Errors: a ctx rejection with code `run.terminal` (the run ended meanwhile) ends the execution
   * quietly; any other error is rethrown.
   */
  async execute(config: ScriptedRuntimeConfig, ctx: RuntimeContext): Promise<void> {
    const vars: RenderVars = { input: ctx.input };
    const played: PlayedTrigger = ctx.trigger.kind === 'resumed' ? (ctx.trigger.lost ?? { kind: 'created' }) : ctx.trigger;
    const frame = frameOf(played, ctx.input);
    try {
      let queue = (await this.resumption(config, ctx, played, frame, vars)) ?? this.fresh(config, ctx.input);
      if (!queue) return;
      if (ctx.resumed) queue = await this.unplayed(queue, ctx, frame);
      for (const item of queue) {
        if (ctx.signal.aborted) return;
        if (await this.runStep(item, ctx, vars, frame)) return;
      }
      if (!ctx.signal.aborted) await ctx.setStatus('completed', undefined, { id: `${frame}/end` });
    } catch (e) {
      if (isRunTerminal(e)) return;
      throw e;
    }
  }

  /**
   * A resumed execution's queue: from the last step whose operation the log holds (that step runs
   * again: its recorded operations are dropped, e.g. the chunks of an artifact already appended),
   * so waits of steps done are not waited again. The whole queue when the log holds none of it.
   */
  private async unplayed(queue: Queued[], ctx: RuntimeContext, frame: string): Promise<Queued[]> {
    const recorded = new Set((await ctx.recorded()).operationIds);
    const prefix = `${frame}/`;
    if (![...recorded].some((id) => id.startsWith(prefix))) return queue;
    let last = -1;
    queue.forEach((item, i) => {
      const id = stepId(frame, item.path);
      if (recorded.has(id) || recorded.has(`${id}#0`)) last = i;
    });
    return last > 0 ? queue.slice(last) : queue;
  }

  private fresh(config: ScriptedRuntimeConfig, input: CanonicalMessage): Queued[] {
    const i = selectRuleIndex(config, input, this.limits);
    const rule = i >= 0 ? config.rules[i]! : echoRule(input);
    return rule.steps.map((step, j) => ({ step, path: [i, j] }));
  }

  /**
   * The steps to run when this execution resumes a step (an answered or expired interaction, a
   * settled child), or undefined when it does not (a fresh rule is selected). An empty list or
   * null: nothing more to run (null: the run was ended here).
   */
  private async resumption(config: ScriptedRuntimeConfig, ctx: RuntimeContext, t: PlayedTrigger, frame: string, vars: RenderVars): Promise<Queued[] | null | undefined> {
    if (t.kind === 'interaction_responded' || t.kind === 'interaction_expired') {
      const path = pathOf(t.interaction.state);
      const at = path && resumeAt(config, path);
      if (!path || !at || at.step.type !== 'interaction') return undefined;
      if (!t.interaction.blocking) return undefined;
      const branches = at.step.branches ?? {};
      const keys = t.kind === 'interaction_expired' ? ['expired'] : [t.interaction.optionId, t.interaction.decision, 'answered'];
      const key = keys.find((k): k is string => k !== undefined && branches[k] !== undefined);
      const branch = key ? branches[key]!.map((step, j) => ({ step, path: [...path, key, j] })) : [];
      return [...branch, ...at.after];
    }
    if (t.kind === 'link_settled') {
      const path = pathOf(t.link.state);
      const at = path && resumeAt(config, path);
      if (!path || !at || at.step.type !== 'delegate') return undefined;
      const step = at.step;
      const child = await ctx.childResult(t.link.childRunId);
      if (!child || child.status !== 'completed') {
        if ((step.onFailure ?? 'fail') === 'fail') {
          await ctx.setStatus('failed', { parts: [{ text: `The delegated task ${t.link.childRunId} (${step.agent}) ended ${child?.status ?? 'missing'}` }] }, { id: `${frame}/end` });
          return null;
        }
        return at.after;
      }
      vars.result = resultText(child);
      if (step.adopt ?? true) {
        for (const [i, a] of child.artifacts.entries()) {
          await ctx.emitArtifact({ ...a, metadata: { ...a.metadata, fromTaskId: child.runId }, append: false, lastChunk: true }, { id: `${frame}/adopt#${i}` });
        }
      }
      return at.after;
    }
    return undefined;
  }

  /** Run one step; true when the execution ends with it. Its operations carry its id (`frame`, `path`). */
  private async runStep({ step, path }: Queued, ctx: RuntimeContext, vars: RenderVars, frame: string): Promise<boolean> {
    const op: OperationOptions = { id: stepId(frame, path) };
    switch (step.type) {
      case 'status': {
        const message = step.message !== undefined ? agentMessage({ text: step.message }, vars) : undefined;
        if (step.status === 'input-required' || step.status === 'auth-required') {
          await ctx.requestInteraction(step.status === 'input-required' ? 'input' : 'auth', message, {}, op);
          return true;
        }
        await ctx.setStatus(step.status, message, op);
        return step.status !== 'working';
      }
      case 'message':
      case 'reply':
        await ctx.emitMessage(agentMessage(step, vars), op);
        return false;
      case 'artifact':
        for (const [i, chunk] of artifactChunks(step, vars.input, stableUuid(`${ctx.run.runId}/${op.id!}`)).entries()) {
          if (ctx.signal.aborted) return true;
          await ctx.emitArtifact(chunk, { id: stepId(frame, path, i) });
        }
        return false;
      case 'wait':
        await ctx.sleep(step.ms);
        return false;
      case 'holdUntilCanceled':
        await ctx.waitUntilCanceled();
        return true;
      case 'interaction': {
        const state: ScriptedState = { scripted: { path } };
        await ctx.requestInteraction(step.kind, step.text !== undefined ? agentMessage({ text: step.text }, vars) : undefined, {
          ...(step.title !== undefined && { title: step.title }),
          ...(step.description !== undefined && { description: step.description }),
          ...(step.options && { options: step.options }),
          ...(step.blocking !== undefined && { blocking: step.blocking }),
          ...(step.expiresInMs !== undefined && { expiresInMs: step.expiresInMs }),
          ...(step.onExpire !== undefined && { onExpire: step.onExpire }),
          state,
        }, op);
        return step.blocking !== false;
      }
      case 'substate':
        await ctx.setStatus('working', { parts: [{ text: step.text !== undefined ? render(step.text, vars) : step.state }], metadata: { [SUBSTATES_EXTENSION_URI]: { state: step.state } } }, op);
        return false;
      case 'delegate': {
        const state: ScriptedState = { scripted: { path } };
        try {
          await ctx.delegate({ agent: step.agent, kind: step.kind ?? 'delegation', message: { parts: [{ text: render(step.text ?? SCRIPTED_INPUT_PLACEHOLDER, vars) }] }, state });
        } catch (e) {
          const code = (e as { code?: unknown }).code;
          if (code !== 'agent.not_published' && code !== 'run.link_too_deep') throw e;
          await ctx.setStatus('failed', { parts: [{ text: `Cannot delegate to ${step.agent}: ${(e as Error).message}` }] }, op);
        }
        return true;
      }
    }
  }
}

/** Whether any rule of `config` is a `reply` rule (its only step is `reply`). */
function hasReplyRule(config: ScriptedRuntimeConfig): boolean {
  return config.rules.some((r) => r.steps[0]?.type === 'reply');
}

/** A child's result as text: its status message, else its last agent message, else its text artifacts. */
function resultText(child: { statusMessage: CanonicalMessage | null; messages: CanonicalMessage[]; artifacts: Array<{ parts: Part[] }> }): string {
  const fromMessage = (m: CanonicalMessage | null | undefined) => (m ? messageText(m.parts) : '');
  return fromMessage(child.statusMessage) || fromMessage(child.messages.at(-1)) || child.artifacts.map((a) => messageText(a.parts)).join('\n');
}
