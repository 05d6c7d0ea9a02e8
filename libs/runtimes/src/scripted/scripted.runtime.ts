import { z } from 'zod';
import { compileSafeRegex, safeMatchLength } from './safe-regex.js';
import { randomUUID } from 'node:crypto';
import {
  messageText,
  SCRIPTED_INPUT_PLACEHOLDER,
  ScriptedRuntimeConfigSchema,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type Part,
  type ScriptedRule,
  type ScriptedRuntimeConfig,
  type ScriptedStep,
} from '#libs/contracts';
import type { AgentMessageInput, AgentRuntime, RuntimeContext } from '../runtime.js';

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

/** Length of what `match` matched in `input`, or null when a matcher fails. */
function matchScore(match: ScriptedRule['match'], input: CanonicalMessage): number | null {
  let score = 0;
  if (match.text !== undefined) {
    const length = safeMatchLength(compileSafeRegex(match.text, match.flags), messageText(input.parts));
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
 * its parts as they are when it has no text part).
 */
export function selectRule(config: ScriptedRuntimeConfig, input: CanonicalMessage): ScriptedRule {
  let best: ScriptedRule | undefined;
  let bestScore = -1;
  for (const rule of config.rules) {
    const score = matchScore(rule.match, input);
    if (score !== null && score > bestScore) {
      best = rule;
      bestScore = score;
    }
  }
  return best ?? echoRule(input);
}

function render(text: string, input: CanonicalMessage): string {
  // A replacer function, so `$&`-style patterns in the input are not interpreted.
  return text.replaceAll(SCRIPTED_INPUT_PLACEHOLDER, () => messageText(input.parts));
}

function agentMessage(step: { text?: string; parts?: Part[] }, input: CanonicalMessage): AgentMessageInput {
  return { parts: step.text !== undefined ? [{ text: render(step.text, input) }] : (step.parts ?? []) };
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

/** The chunks of an artifact step, with append/lastChunk set (`{{input}}` filled in text content). */
function artifactChunks(step: StepOf<'artifact'>, input: CanonicalMessage): ArtifactChunkInput[] {
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
  const artifactId = step.artifactId ?? randomUUID();
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

function isRunTerminal(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'run.terminal';
}

/**
 * The `scripted` runtime: an embedded agent whose behaviour is a list of rules in the revision's
 * runtime config (see `ScriptedRuntimeConfigSchema`). Used for demos and contract tests.
 */
export class ScriptedRuntime implements AgentRuntime<ScriptedRuntimeConfig> {
  readonly kind = 'scripted';

  /**
   * Throws a `ZodError` when `raw` is not a valid scripted config, including a `match.text` that
   * is not an RE2 pattern (the error names the rule and says what is unsupported).
   */
  parseConfig(raw: unknown): ScriptedRuntimeConfig {
    const config = ScriptedRuntimeConfigSchema.parse(raw);
    const issues: z.core.$ZodIssue[] = [];
    config.rules.forEach((rule, i) => {
      if (rule.match.text === undefined) return;
      try {
        compileSafeRegex(rule.match.text, rule.match.flags);
      } catch (e) {
        issues.push({ code: 'custom', path: ['rules', i, 'match', 'text'], message: e instanceof Error ? e.message : String(e), input: rule.match.text });
      }
    });
    if (issues.length > 0) throw new z.ZodError(issues);
    return config;
  }

  /** The reply of the selected rule when it is a `reply` rule, else null (a run is needed). */
  directReply(config: ScriptedRuntimeConfig, input: CanonicalMessage): AgentMessageInput | null {
    const [step] = selectRule(config, input).steps;
    return step?.type === 'reply' ? agentMessage(step, input) : null;
  }

  /**
   * Run the steps of the rule selected for `ctx.input`, in order. Returns early when `ctx.signal`
   * aborts, after an input-/auth-required step (the caller's answer triggers a new execution,
   * which selects a rule again from that answer), after a terminal status, and after
   * `holdUntilCanceled`. Steps that end without any of these finish with status `completed`, so
   * no run is left working. A `reply` rule reached here (a continuation) emits its message and
   * completes.
   *
   * Errors: a ctx rejection with code `run.terminal` (the run ended meanwhile) ends the execution
   * quietly; any other error is rethrown.
   */
  async execute(config: ScriptedRuntimeConfig, ctx: RuntimeContext): Promise<void> {
    const { steps } = selectRule(config, ctx.input);
    try {
      for (const step of steps) {
        if (ctx.signal.aborted) return;
        if (await this.runStep(step, ctx)) return;
      }
      if (!ctx.signal.aborted) await ctx.setStatus('completed');
    } catch (e) {
      if (isRunTerminal(e)) return;
      throw e;
    }
  }

  /** Run one step; true when the execution ends with it. */
  private async runStep(step: ScriptedStep, ctx: RuntimeContext): Promise<boolean> {
    const { input } = ctx;
    switch (step.type) {
      case 'status': {
        const message = step.message !== undefined ? agentMessage({ text: step.message }, input) : undefined;
        if (step.status === 'input-required' || step.status === 'auth-required') {
          await ctx.requestInteraction(step.status === 'input-required' ? 'input' : 'auth', message);
          return true;
        }
        await ctx.setStatus(step.status, message);
        return step.status !== 'working';
      }
      case 'message':
      case 'reply':
        await ctx.emitMessage(agentMessage(step, input));
        return false;
      case 'artifact':
        for (const chunk of artifactChunks(step, input)) {
          if (ctx.signal.aborted) return true;
          await ctx.emitArtifact(chunk);
        }
        return false;
      case 'wait':
        await ctx.sleep(step.ms);
        return false;
      case 'holdUntilCanceled':
        await ctx.waitUntilCanceled();
        return true;
    }
  }
}
