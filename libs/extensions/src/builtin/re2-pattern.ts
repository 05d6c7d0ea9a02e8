import { RE2JS } from 're2js';
import { TtlLruCache } from '#libs/common';

/**
 * Tenant patterns of JSON Schemas (`pattern`, `patternProperties`) on RE2 (re2js): matching time is
 * linear in the input whatever the pattern, so `^(a+)+$` cannot freeze the process. Ajv takes the
 * engine through its `code.regExp` option; nothing of a tenant's schema reaches JavaScript's
 * backtracking RegExp.
 */

/** What Ajv gets for a pattern: `test`, and `toString` (Ajv keys its compiled patterns by it). */
export interface Re2Pattern {
  test(s: string): boolean;
  toString(): string;
  /** RE2 instructions: what one character of input costs to match, at worst. */
  readonly programSize: number;
}

/** What one `test` costs besides its characters (the matcher's setup), in characters. */
export const TEST_OVERHEAD = 8;

/** Raised by `test` when the current validation's pattern budget (`withPatternBudget`) is spent. */
export class PatternBudgetExceeded extends Error {
  constructor(readonly budget: number) {
    super(`the pattern checks of this message exceed ${budget} character-instructions`);
    this.name = 'PatternBudgetExceeded';
  }
}

/**
 * The lazy DFA re2js builds for `test` may grow to 8 MiB (its own accounting) per pattern, at
 * ~25 µs per state built; a pattern crafted to blow it up would hold that much. Capped here, so a
 * compiled pattern holds about 35 KB at most (measured: its program and a full DFA); past the cap
 * re2js empties the cache, then falls back to its NFA: still linear time, and charged to the
 * message's pattern budget like any match.
 */
export const DFA_MEMORY_PER_PATTERN = 16 * 1024;

// compiled patterns, shared by every schema (least recently used evicted; those a kept validator uses stay with it)
const cache = new TtlLruCache<string, Re2Pattern>(512, 0);

/** The budget of the validation running now (validation is synchronous: one at a time). */
let meter: { left: number; budget: number } | null = null;

/**
 * Run `validate` with at most `budget` character-instructions of pattern matching: each `test` of
 * a string costs (its length + TEST_OVERHEAD) × the pattern's RE2 program size, charged before it
 * runs. Throws PatternBudgetExceeded past it, whatever `validate` was doing (Ajv's generated code
 * does not catch it).
 */
export function withPatternBudget<T>(budget: number, validate: () => T): T {
  meter = { left: budget, budget };
  try {
    return validate();
  } finally {
    meter = null;
  }
}

/**
 * JavaScript's `\uXXXX` and `\u{X…}` escapes (common in JSON Schemas) in RE2's spelling `\x{…}`;
 * everything else is given to RE2 as it is (RE2 refuses what it does not know, e.g. backreferences).
 */
export function re2Syntax(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '\\' || i + 1 >= pattern.length) {
      out += c;
      continue;
    }
    const next = pattern[i + 1]!;
    const fixed = next === 'u' ? /^u([0-9a-fA-F]{4})/.exec(pattern.slice(i + 1)) ?? /^u\{([0-9a-fA-F]{1,6})\}/.exec(pattern.slice(i + 1)) : null;
    if (fixed) {
      out += `\\x{${fixed[1]}}`;
      i += fixed[0].length;
    } else {
      out += c + next;
      i++;
    }
  }
  return out;
}

/**
 * Compile a tenant pattern with RE2 semantics (cached). Throws an Error saying why RE2 refuses it
 * (backreferences and lookaround are not available).
 */
export function compileRe2Pattern(pattern: string): Re2Pattern {
  const hit = cache.get(pattern);
  if (hit) return hit;
  let re: RE2JS;
  try {
    re = RE2JS.compile(re2Syntax(pattern));
  } catch (e) {
    throw new Error(`not an RE2 pattern: ${e instanceof Error ? e.message : String(e)} (backreferences and lookaround are not available)`);
  }
  capDfa(re);
  const programSize = re.programSize();
  const compiled: Re2Pattern = {
    programSize,
    test(s: string) {
      if (meter) {
        meter.left -= (s.length + TEST_OVERHEAD) * programSize;
        if (meter.left < 0) throw new PatternBudgetExceeded(meter.budget);
      }
      return re.test(s);
    },
    toString: () => `/${pattern}/`,
  };
  cache.set(pattern, compiled);
  return compiled;
}

/**
 * Ajv's `code.regExp`: every `pattern` and `patternProperties` key of a schema compiled through
 * it runs on RE2 (Ajv's flag `u` changes nothing: RE2 matches code points).
 */
export const re2RegExp = Object.assign((pattern: string) => compileRe2Pattern(pattern), { code: 'compileRe2Pattern' });

/**
 * Shrink the DFA budget of a compiled pattern to DFA_MEMORY_PER_PATTERN. These are re2js 2.10's
 * private fields (the version is pinned; structured-input.spec.ts fails when they move).
 */
export function capDfa(re: RE2JS): void {
  const dfa = (re as unknown as { re2Input?: { dfa?: { maxMem?: number; stateBudget?: number; memBudget?: number } } }).re2Input?.dfa;
  if (!dfa || typeof dfa.stateBudget !== 'number' || typeof dfa.memBudget !== 'number') return;
  dfa.maxMem = dfa.stateBudget = dfa.memBudget = DFA_MEMORY_PER_PATTERN;
}
