import { LRUCache } from 'lru-cache';
import { RE2JS } from 're2js';

/** Flags a scripted `match.text` may carry (JavaScript letters, RE2 semantics). */
const FLAG_BITS: Record<string, number> = { i: RE2JS.CASE_INSENSITIVE, m: RE2JS.MULTILINE, s: RE2JS.DOTALL, u: 0, g: 0 };

/**
 * Compiled patterns kept, weighed by RE2 program size (a compiled pattern holds about 200-350
 * bytes per instruction, plus a few KiB): at most this many instructions, least recently used
 * evicted — about 90 MiB at most, what 128 revisions at the default SCRIPTED_RULES_MAX_PROGRAM_SIZE
 * use. Weighed rather than counted (TtlLruCache counts entries): one pattern may be 2,000
 * instructions, another 4.
 */
export const COMPILED_INSTRUCTIONS_KEPT = 262_144;
/** Weight of a compiled pattern besides its instructions (the RE2 object itself). */
const PATTERN_WEIGHT = 16;

const cache = new LRUCache<string, RE2JS>({
  maxSize: COMPILED_INSTRUCTIONS_KEPT,
  sizeCalculation: (re) => PATTERN_WEIGHT + re.programSize(),
});

/**
 * Compile a tenant-supplied pattern with RE2 semantics (re2js): matching time is linear in the
 * input, whatever the pattern — `^(a+)+$` cannot freeze the process. No backreferences or
 * lookaround. Flags: `i`, `m`, `s` (and `u`, `g`, which change nothing for a test). Compiled
 * patterns are cached (bounded by their program sizes). Only `find` is used on them (never
 * `test`): re2js's DFA, which `test` builds, may hold 8 MiB per pattern.
 * Throws an Error saying what is unsupported when the pattern or a flag is not accepted.
 */
export function compileSafeRegex(source: string, flags = ''): RE2JS {
  const key = `${flags}/${source}`;
  const hit = cache.get(key);
  if (hit) return hit;
  let bits = 0;
  for (const f of flags) {
    if (!(f in FLAG_BITS)) throw new Error(`flag '${f}' is not supported (use i, m, s)`);
    bits |= FLAG_BITS[f]!;
  }
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, bits);
  } catch (e) {
    throw new Error(`not a supported (RE2) regular expression: ${e instanceof Error ? e.message : String(e)}; backreferences and lookaround are not available`);
  }
  cache.set(key, re);
  return re;
}

/** The first match of `re` in `text`: its length, or null when it does not match. */
export function safeMatchLength(re: RE2JS, text: string): number | null {
  const m = re.matcher(text);
  return m.find() ? m.end() - m.start() : null;
}
