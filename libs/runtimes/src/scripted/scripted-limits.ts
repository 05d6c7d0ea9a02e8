import { z } from 'zod';
import type { AppConfig } from '#libs/config';
import { messageText, type CanonicalMessage, type ScriptedRuntimeConfig } from '#libs/contracts';
import { compileSafeRegex } from './safe-regex.js';

/**
 * What a scripted revision's rules may cost: checked when a revision is drafted or published
 * (`parseConfig`), and per message (the text the rules are matched against). The config variables
 * named on each field (libs/config; docs/deploy.md lists them).
 */
export interface ScriptedLimits {
  /** SCRIPTED_MAX_RULES: rules per revision (rules evaluated per message). */
  maxRules: number;
  /** SCRIPTED_PATTERN_MAX_CHARS: one `match.text`. */
  patternMaxChars: number;
  /** SCRIPTED_RULES_MAX_PROGRAM_SIZE: the RE2 program sizes of all `match.text` together. */
  rulesMaxProgramSize: number;
  /** SCRIPTED_MATCH_BUDGET: character-instructions one message's matching may cost. */
  matchBudget: number;
  /** SCRIPTED_MATCH_TEXT_MAX_CHARS: most characters of a message's text the rules see. */
  matchTextMaxChars: number;
}

/** libs/config's defaults (a spec keeps the two equal). */
export const DEFAULT_SCRIPTED_LIMITS: ScriptedLimits = {
  maxRules: 64,
  patternMaxChars: 256,
  rulesMaxProgramSize: 2_048,
  matchBudget: 262_144,
  matchTextMaxChars: 4_096,
};

/** The scripted runtime's limits from the configuration. */
export function scriptedLimits(config: Pick<AppConfig, 'SCRIPTED_MAX_RULES' | 'SCRIPTED_PATTERN_MAX_CHARS' | 'SCRIPTED_RULES_MAX_PROGRAM_SIZE' | 'SCRIPTED_MATCH_BUDGET' | 'SCRIPTED_MATCH_TEXT_MAX_CHARS'>): ScriptedLimits {
  return {
    maxRules: config.SCRIPTED_MAX_RULES,
    patternMaxChars: config.SCRIPTED_PATTERN_MAX_CHARS,
    rulesMaxProgramSize: config.SCRIPTED_RULES_MAX_PROGRAM_SIZE,
    matchBudget: config.SCRIPTED_MATCH_BUDGET,
    matchTextMaxChars: config.SCRIPTED_MATCH_TEXT_MAX_CHARS,
  };
}

/**
 * What matching one character of text against a rule costs besides its pattern's instructions
 * (the matcher's own step), in instructions: measured, a 4-instruction `.*` costs about as much
 * per character as 12 instructions of a large pattern.
 */
export const RULE_MATCH_OVERHEAD = 8;

/**
 * The issues of a (schema-valid) scripted config against `limits`, paths from the config: too many
 * rules (`rules`, checked first: nothing is compiled then), a pattern too long or not RE2
 * (`rules.<i>.match.text`), patterns too large together (`rules`). Empty when it fits.
 */
export function budgetIssues(config: ScriptedRuntimeConfig, limits: ScriptedLimits): z.core.$ZodIssue[] {
  if (config.rules.length > limits.maxRules) {
    return [{ code: 'custom', path: ['rules'], message: `${config.rules.length} rules; at most ${limits.maxRules} rules (SCRIPTED_MAX_RULES)`, input: config.rules.length }];
  }
  const issues: z.core.$ZodIssue[] = [];
  let program = 0;
  config.rules.forEach((rule, i) => {
    const text = rule.match.text;
    if (text === undefined) return;
    const path = ['rules', i, 'match', 'text'];
    if (text.length > limits.patternMaxChars) {
      issues.push({ code: 'custom', path, message: `a pattern of ${text.length} characters; at most ${limits.patternMaxChars} characters (SCRIPTED_PATTERN_MAX_CHARS)`, input: text });
      return;
    }
    try {
      program += compileSafeRegex(text, rule.match.flags).programSize();
    } catch (e) {
      issues.push({ code: 'custom', path, message: e instanceof Error ? e.message : String(e), input: text });
    }
  });
  if (issues.length === 0 && program > limits.rulesMaxProgramSize) {
    issues.push({
      code: 'custom',
      path: ['rules'],
      message: `the rules' patterns compile to ${program} RE2 instructions together; at most ${limits.rulesMaxProgramSize} (SCRIPTED_RULES_MAX_PROGRAM_SIZE): fewer rules, or patterns without large counted repetitions such as a{100}`,
      input: program,
    });
  }
  return issues;
}

// per parsed config: what matching one character against all its rules costs (configs are immutable once parsed)
const perCharacter = new WeakMap<ScriptedRuntimeConfig, number>();

/**
 * The text `config`'s rules are matched against for `input`: the text of its text parts, cut to
 * ⌊matchBudget / per-character cost⌋ characters (at most matchTextMaxChars; never in the middle
 * of a surrogate pair), so one message's matching costs at most `matchBudget` character-instructions.
 */
export function matchedText(config: ScriptedRuntimeConfig, input: CanonicalMessage, limits: ScriptedLimits): string {
  let cost = perCharacter.get(config);
  if (cost === undefined) {
    cost = config.rules.reduce((n, r) => (r.match.text === undefined ? n : n + RULE_MATCH_OVERHEAD + compileSafeRegex(r.match.text, r.match.flags).programSize()), 0);
    perCharacter.set(config, cost);
  }
  const text = messageText(input.parts);
  const window = Math.min(limits.matchTextMaxChars, cost === 0 ? Infinity : Math.floor(limits.matchBudget / cost));
  if (text.length <= window) return text;
  const cut = text.slice(0, window);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}
