import { describe, expect, it } from 'vitest';
import { loadConfig } from '#libs/config';
import type { CanonicalMessage } from '#libs/contracts';
import { compileSafeRegex } from './safe-regex.js';
import { DEFAULT_SCRIPTED_LIMITS, matchedText, RULE_MATCH_OVERHEAD, scriptedLimits, type ScriptedLimits } from './scripted-limits.js';
import { ScriptedRuntime, selectRule } from './scripted.runtime.js';

const L = DEFAULT_SCRIPTED_LIMITS;
const reply = (text: string, flags?: string) => ({ match: { text, ...(flags && { flags }) }, steps: [{ type: 'reply', text: 'r' }] });
const input = (text: string): CanonicalMessage => ({ messageId: 'm', role: 'user', parts: [{ text }] });

/** The refusal of `rules` by a runtime held to `limits`, as `path: message` lines (empty: accepted). */
function refusal(rules: unknown[], limits: ScriptedLimits = L): string[] {
  try {
    new ScriptedRuntime(limits).parseConfig({ kind: 'scripted', rules });
    return [];
  } catch (e) {
    return (e as { issues: Array<{ path: PropertyKey[]; message: string }> }).issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  }
}

describe('scripted budgets (draft)', () => {
  it('refuses too many rules, before compiling any', () => {
    const t0 = performance.now();
    expect(refusal(Array.from({ length: 2_000 }, (_, i) => reply(`(?:[a-z]+ ?)+$${i}`)))).toEqual([`rules: 2000 rules; at most ${L.maxRules} rules (SCRIPTED_MAX_RULES)`]);
    expect(performance.now() - t0).toBeLessThan(200);
  });

  it('refuses a long pattern at its field, and patterns too large together at `rules`', () => {
    expect(refusal([reply('x'), reply('a'.repeat(L.patternMaxChars + 1))])).toEqual([`rules.1.match.text: a pattern of ${L.patternMaxChars + 1} characters; at most ${L.patternMaxChars} characters (SCRIPTED_PATTERN_MAX_CHARS)`]);
    const counted = refusal([reply('(?:a?){1000}'), reply('(?:b?){1000}'), reply('c{100}')]);
    expect(counted).toEqual([expect.stringMatching(new RegExp(`^rules: the rules' patterns compile to \\d+ RE2 instructions together; at most ${L.rulesMaxProgramSize} \\(SCRIPTED_RULES_MAX_PROGRAM_SIZE\\)`))]);
    expect(refusal([reply('(?:a?){1000}')])).toEqual([]);
    expect(refusal([reply('^(a)\\1$')])).toEqual([expect.stringMatching(/^rules\.0\.match\.text: not a supported \(RE2\) regular expression/)]);
  });

  it('applies the limits it is given', () => {
    expect(refusal([reply('a'), reply('b')], { ...L, maxRules: 1 })).toEqual(['rules: 2 rules; at most 1 rules (SCRIPTED_MAX_RULES)']);
  });

  it('keeps the defaults of libs/config', () => {
    expect(scriptedLimits(loadConfig({}))).toEqual(DEFAULT_SCRIPTED_LIMITS);
  });
});

describe('per message: the text the rules see', () => {
  it('is the message text cut to ⌊budget / per-character cost⌋ characters, at most matchTextMaxChars', () => {
    const runtime = new ScriptedRuntime();
    const one = runtime.parseConfig({ kind: 'scripted', rules: [reply('x')] });
    expect(matchedText(one, input('a'.repeat(10_000)), L)).toHaveLength(L.matchTextMaxChars);
    const patterns = Array.from({ length: 50 }, (_, i) => `(?:[a-z]+ ?){1,3}$|q${i}`);
    const many = runtime.parseConfig({ kind: 'scripted', rules: patterns.map((p) => reply(p)) });
    const cost = patterns.reduce((n, p) => n + RULE_MATCH_OVERHEAD + compileSafeRegex(p).programSize(), 0);
    expect(matchedText(many, input('a'.repeat(10_000)), L)).toHaveLength(Math.floor(L.matchBudget / cost));
    expect(matchedText(many, input('short'), L)).toBe('short');
  });

  it('never ends in half a surrogate pair', () => {
    const config = new ScriptedRuntime().parseConfig({ kind: 'scripted', rules: [reply('x')] });
    const text = matchedText(config, input('😀'.repeat(L.matchTextMaxChars)), L);
    expect(text.length).toBe(L.matchTextMaxChars);
    expect(matchedText(config, input(`a${'😀'.repeat(L.matchTextMaxChars)}`), L).length).toBe(L.matchTextMaxChars - 1);
    expect(Buffer.from(text, 'utf8').toString('utf8')).toBe(text); // no lone surrogate (it would come back as U+FFFD)
  });

  it('a rule matches what it sees: text past the cut does not match, and `$` matches at the cut', () => {
    const limits = { ...L, matchTextMaxChars: 100 };
    const config = new ScriptedRuntime(limits).parseConfig({ kind: 'scripted', rules: [{ ...reply('needle'), name: 'needle' }, { ...reply('^a+$'), name: 'all-a' }] });
    expect(selectRule(config, input(`${'x'.repeat(50)} needle`), limits).name).toBe('needle');
    expect(selectRule(config, input(`${'x'.repeat(200)} needle`), limits).name).toBe('echo');
    expect(selectRule(config, input(`${'a'.repeat(200)}!`), limits).name).toBe('all-a');
  });

  it('the heaviest revision the budgets allow, against 60 kB of text: a few milliseconds', () => {
    const runtime = new ScriptedRuntime();
    const rules = Array.from({ length: L.maxRules }, (_, i) => reply(`(?:[a-z]+ ?){1,5}$|z${i}`));
    const config = runtime.parseConfig({ kind: 'scripted', rules });
    const text = 'ab '.repeat(20_000);
    selectRule(config, input(text));
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) runtime.directReply(config, input(text));
    expect((performance.now() - t0) / 5).toBeLessThan(50);
  });
});
