import { RE2JS } from 're2js';
import { TtlLruCache } from '#libs/common';

/** Flags a scripted `match.text` may carry (JavaScript letters, RE2 semantics). */
const FLAG_BITS: Record<string, number> = { i: RE2JS.CASE_INSENSITIVE, m: RE2JS.MULTILINE, s: RE2JS.DOTALL, u: 0, g: 0 };

// compiled patterns, least recently used evicted past the bound (patterns do not expire)
const cache = new TtlLruCache<string, RE2JS>(10_000, 0);

/**
 * Compile a tenant-supplied pattern with RE2 semantics (re2js): matching time is linear in the
 * input, whatever the pattern — `^(a+)+$` cannot freeze the process. No backreferences or
 * lookaround. Flags: `i`, `m`, `s` (and `u`, `g`, which change nothing for a test). Compiled
 * patterns are cached (bounded).
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
