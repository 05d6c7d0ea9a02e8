import { afterEach, describe, expect, it, vi } from 'vitest';
import { Ajv } from 'ajv';
import { RE2JS } from 're2js';
import { loadConfig } from '#libs/config';
import type { CanonicalMessage } from '#libs/contracts';
import { ExtensionRuleError } from '../extension.js';
import { capDfa, compileRe2Pattern, DFA_MEMORY_PER_PATTERN, re2Syntax } from './re2-pattern.js';
import { countValues, DEFAULT_STRUCTURED_INPUT_LIMITS, jsonLengthUpTo, measureSchema, type StructuredInputLimits } from './schema-budget.js';
import { structuredInputExtension } from './structured-input.js';

const L = DEFAULT_STRUCTURED_INPUT_LIMITS;
const issueOf = (schema: unknown, limits: StructuredInputLimits = L) => {
  const m = measureSchema(schema, limits);
  return 'issue' in m ? m.issue : null;
};
const nodesOf = (schema: unknown) => {
  const m = measureSchema(schema, L);
  if ('issue' in m) throw new Error(m.issue.message);
  return m.nodes;
};
const message = (...data: unknown[]): CanonicalMessage => ({ messageId: 'm', role: 'user', parts: data.map((d) => ({ data: d })) });

/** The params the plugin accepted (the draft), or its refusal as `path: message` lines. */
function declare(schema: unknown, limits?: StructuredInputLimits) {
  const plugin = structuredInputExtension(limits);
  const r = plugin.params!.safeParse({ schema });
  return { plugin, params: r.success ? r.data : undefined, refused: r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) };
}

/** The rule a message breaks, or 'ok'. */
function check(plugin: ReturnType<typeof declare>['plugin'], params: unknown, m: CanonicalMessage): string {
  try {
    plugin.onMessage!(m, params as never);
    return 'ok';
  } catch (e) {
    if (e instanceof ExtensionRuleError) return e.rule;
    throw e;
  }
}

afterEach(() => vi.restoreAllMocks());

describe('RE2 for schema patterns', () => {
  it('no pattern of a schema is ever given to a JavaScript RegExp: not at draft, not per message', () => {
    const patterns = ['^(a+)+$', '^[a-z]+\\d{2}$', '^x-'];
    const made: string[] = [];
    const Native = globalThis.RegExp;
    vi.spyOn(globalThis, 'RegExp').mockImplementation(function (this: unknown, source: string | RegExp, flags?: string) {
      made.push(String(source instanceof Native ? source.source : source));
      return new Native(source, flags);
    } as never);
    // the watch works: Ajv's own engine is seen
    expect(new Ajv({ strict: false }).compile({ pattern: 'zz+' })('zzz')).toBe(true);
    expect(made).toContain('zz+');
    const { plugin, params } = declare({ type: 'object', properties: { s: { type: 'string', pattern: patterns[0] }, t: { type: 'string', pattern: patterns[1] } }, patternProperties: { [patterns[2]!]: { type: 'integer' } } });
    expect(params).toBeDefined();
    expect(check(plugin, params, message({ s: `${'a'.repeat(40)}!`, t: 'ab12', 'x-1': 1 }))).toMatch(/must match pattern/);
    expect(check(plugin, params, message({ s: 'aaa', t: 'ab12', 'x-1': 'no' }))).toMatch(/must be integer/);
    expect(check(plugin, params, message({ s: 'aaa', t: 'ab12', 'x-1': 1 }))).toBe('ok');
    expect(made.filter((source) => patterns.includes(source))).toEqual([]);
  });

  it('`^(a+)+$` against 64 KiB answers in milliseconds', () => {
    const re = compileRe2Pattern('^(a+)+$');
    const t0 = performance.now();
    expect(re.test(`${'a'.repeat(65_536)}!`)).toBe(false);
    expect(performance.now() - t0).toBeLessThan(100);
  });

  it("spells JavaScript's \\u escapes as RE2's \\x{…}, leaves escaped backslashes alone", () => {
    expect(re2Syntax('^\\u00e9[\\u0041-\\u005A]\\u{1F600}$')).toBe('^\\x{00e9}[\\x{0041}-\\x{005A}]\\x{1F600}$');
    expect(re2Syntax('\\\\u0041')).toBe('\\\\u0041');
    expect(compileRe2Pattern('^\\u00e9$').test('é')).toBe(true);
  });

  it('refuses what RE2 cannot run: backreferences, lookahead, lookbehind', () => {
    for (const p of ['(a)\\1', '(?=a)', '(?!a)b', '(?<=a)b', '\\k<x>']) expect(() => compileRe2Pattern(p), p).toThrow(/not an RE2 pattern.*backreferences and lookaround/);
  });

  it("caps re2js's DFA at DFA_MEMORY_PER_PATTERN (pins re2js's private fields: an upgrade that moves them fails here)", () => {
    const re = RE2JS.compile('(?:a|b)*a(?:a|b){14}!');
    capDfa(re);
    const dfa = (re as unknown as { re2Input: { dfa: { stateBudget: number; memBudget: number; maxMem: number } } }).re2Input.dfa;
    expect([dfa.stateBudget, dfa.memBudget, dfa.maxMem]).toEqual([DFA_MEMORY_PER_PATTERN, DFA_MEMORY_PER_PATTERN, DFA_MEMORY_PER_PATTERN]);
    // a pattern whose DFA would grow to megabytes still answers, in linear time
    const text = Array.from({ length: 20_000 }, (_, i) => ((i * 7919) % 3 === 0 ? 'a' : 'b')).join('');
    expect(compileRe2Pattern('(?:a|b)*a(?:a|b){14}!').test(text)).toBe(false);
  });
});

describe('schema budgets (draft)', () => {
  it('counts one node per JSON value, a pattern its RE2 program size besides, every $ref expanded', () => {
    expect(nodesOf({ type: 'string' })).toBe(2);
    expect(nodesOf({ type: 'object', required: ['a'], properties: { a: { type: 'integer' } } })).toBe(7);
    expect(nodesOf({ type: 'string', pattern: 'ab' })).toBe(3 + RE2JS.compile('ab').programSize());
    const def = { type: 'object', properties: { a: { type: 'integer' } } }; // 5
    expect(nodesOf({ $defs: { d: def }, allOf: [{ $ref: '#/$defs/d' }, { $ref: '#/$defs/d' }] })).toBe(1 + (1 + 5) + (1 + 2 * (1 + 1 + 5)));
  });

  it('refuses each over-budget schema with its path and the limit', () => {
    const small = { ...L, schemaMaxBytes: 256, schemaMaxDepth: 3, schemaMaxNodes: 20, patternMaxChars: 16 };
    expect(issueOf({ description: 'x'.repeat(300) }, small)).toEqual({ path: ['schema'], message: expect.stringContaining('at most 256 bytes (STRUCTURED_INPUT_SCHEMA_MAX_BYTES)') });
    expect(issueOf({ properties: { a: { properties: { b: { type: 'string' } } } } }, small)).toEqual({ path: ['schema', 'properties', 'a', 'properties'], message: expect.stringContaining('at most 3 levels') });
    expect(issueOf({ enum: Array.from({ length: 25 }, (_, i) => i) }, small)?.message).toContain('at most 20 (STRUCTURED_INPUT_SCHEMA_MAX_NODES)');
    expect(issueOf({ properties: { p: { pattern: 'a'.repeat(17) } } }, small)).toEqual({ path: ['schema', 'properties', 'p', 'pattern'], message: expect.stringContaining('at most 16 characters') });
    expect(issueOf({ patternProperties: { '(a)\\1': {} } })).toEqual({ path: ['schema', 'patternProperties', '(a)\\1'], message: expect.stringContaining('not an RE2 pattern') });
  });

  it('refuses $refs it cannot bound: recursive, outside the schema, dangling; and $id / anchors', () => {
    expect(issueOf({ properties: { next: { $ref: '#' } } })).toEqual({ path: ['schema', 'properties', 'next', '$ref'], message: expect.stringContaining('recursive') });
    expect(issueOf({ $defs: { a: { items: { $ref: '#/$defs/a' } } }, $ref: '#/$defs/a' })?.message).toContain('recursive');
    expect(issueOf({ $ref: 'https://example.com/s.json' })?.message).toContain('only a $ref to a JSON pointer');
    expect(issueOf({ $ref: '#/$defs/missing' })?.message).toContain('points at nothing');
    for (const k of ['$id', '$anchor', '$dynamicRef', '$recursiveRef']) expect(issueOf({ properties: { a: { [k]: 'x' } } })?.path).toEqual(['schema', 'properties', 'a', k]);
    // a key named like a keyword inside `properties` is a property name, not a keyword
    expect(issueOf({ properties: { $id: { type: 'string' } } })).toBeNull();
    // JSON pointer escapes
    expect(nodesOf({ $defs: { 'a/b': { type: 'string' } }, $ref: '#/$defs/a~1b' })).toBeGreaterThan(0);
  });

  it('refuses exponential $ref fan-out, however small the schema', () => {
    const $defs: Record<string, unknown> = { a30: { type: 'string' } };
    for (let i = 0; i < 30; i++) $defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const t0 = performance.now();
    expect(issueOf({ $defs, $ref: '#/$defs/a0' })?.message).toMatch(/counts \d{10,} nodes/);
    expect(performance.now() - t0).toBeLessThan(100);
  });

  it('allows uniqueItems only beside a small maxItems', () => {
    expect(issueOf({ type: 'array', uniqueItems: true })).toEqual({ path: ['schema', 'uniqueItems'], message: expect.stringContaining('maxItems') });
    expect(issueOf({ type: 'array', uniqueItems: true, maxItems: 1000 })?.path).toEqual(['schema', 'uniqueItems']);
    expect(issueOf({ type: 'array', uniqueItems: true, maxItems: 10 })).toBeNull();
  });

  it('the draft refusal names the field inside params; a schema Ajv refuses says why', () => {
    expect(declare({ properties: { s: { pattern: '(?=x)' } } }).refused).toEqual([expect.stringMatching(/^schema\.properties\.s\.pattern: not an RE2 pattern/)]);
    expect(declare({ type: 'strnig' }).refused).toEqual([expect.stringMatching(/^schema: not a JSON Schema Ajv can compile: .*type/)]);
    expect(declare({ $schema: 'https://example.com/unknown', type: 'string' }).refused[0]).toMatch(/^schema: not a JSON Schema Ajv can compile/);
  });
});

describe('per message', () => {
  it('measures DataParts as JSON text, stopping once past the limit', () => {
    for (const v of [{ a: [1, 'two', null, true, false, { b: -2.5 }], c: {} }, [], 'x', 12, [[], [{}]]]) expect(jsonLengthUpTo(v, 1e9)).toBe(JSON.stringify(v).length);
    expect(jsonLengthUpTo(['a'.repeat(10_000), 'b'], 100)).toBeGreaterThan(100);
    expect(countValues({ a: [1, 2, { b: 3 }] }, 100)).toBe(6);
    expect(countValues(Array.from({ length: 10_000 }, () => 1), 50)).toBe(51);
  });

  it('refuses DataParts over the size limit, over the values the schema allows, and over the pattern budget', () => {
    const limits = { ...L, dataMaxChars: 2_000, validationBudget: 1_000, patternBudget: 5_000 };
    const { plugin, params } = declare({ type: 'array', items: { type: 'string', pattern: '^[a-z]+$' } }, limits);
    const nodes = nodesOf({ type: 'array', items: { type: 'string', pattern: '^[a-z]+$' } });
    expect(check(plugin, params, message(['abc', 'def']))).toBe('ok');
    expect(check(plugin, params, message(['x'.repeat(1_000)], ['y'.repeat(1_000)]))).toMatch(/more than 2000 characters of JSON; at most 2000 \(STRUCTURED_INPUT_DATA_MAX_CHARS\)/);
    const most = Math.floor(1_000 / nodes);
    expect(check(plugin, params, message(Array.from({ length: most }, () => 'a')))).toMatch(new RegExp(`more than ${most} JSON values`));
    expect(check(plugin, params, message(['a'.repeat(1_500)]))).toMatch(/costs more than 5000 character-instructions \(STRUCTURED_INPUT_PATTERN_BUDGET\)/);
  });

  it('a schema published before the budgets is held to them per message', () => {
    const { plugin } = declare({ type: 'string' });
    const properties = Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^(a+)+$' }]));
    expect(check(plugin, { schema: { type: 'object', properties } }, message({ p1: 'a' }))).toMatch(/declared schema is refused at schema: the schema is \d+ bytes/);
  });

  it('keeps the defaults of libs/config', () => {
    const c = loadConfig({});
    expect(DEFAULT_STRUCTURED_INPUT_LIMITS).toEqual({
      schemaMaxBytes: c.STRUCTURED_INPUT_SCHEMA_MAX_BYTES,
      schemaMaxDepth: c.STRUCTURED_INPUT_SCHEMA_MAX_DEPTH,
      schemaMaxNodes: c.STRUCTURED_INPUT_SCHEMA_MAX_NODES,
      patternMaxChars: c.STRUCTURED_INPUT_PATTERN_MAX_CHARS,
      dataMaxChars: c.STRUCTURED_INPUT_DATA_MAX_CHARS,
      validationBudget: c.STRUCTURED_INPUT_VALIDATION_BUDGET,
      patternBudget: c.STRUCTURED_INPUT_PATTERN_BUDGET,
    });
  });
});
