import secureJson from 'secure-json-parse';
/**
 * Body placeholder for a request whose JSON did not parse, or parsed into something we refuse to
 * store. The body parser never rejects the request itself, so each edge answers in its own
 * protocol:
 * - `syntax`: not JSON — admin 400 `request.malformed`, JSON-RPC -32700 (Parse error), REST 400;
 * - `invalid`: JSON, but nested deeper than MAX_JSON_DEPTH, or a string (or key) with a NUL
 *   character or an unpaired surrogate (PostgreSQL cannot store either losslessly in jsonb/text) —
 *   admin 400 `request.invalid`, JSON-RPC -32602 (Invalid params), REST 400, each naming `path`.
 */
export class MalformedJson {
  constructor(
    readonly reason: string,
    readonly kind: 'syntax' | 'invalid' = 'syntax',
    /** Where the offending value is, e.g. `params.message.parts.0.text` (for `invalid`). */
    readonly path?: string,
  ) {}
}

export function isMalformedJson(body: unknown): body is MalformedJson {
  return body instanceof MalformedJson;
}

/** Deepest JSON nesting accepted in a request body (objects and arrays). Documented in README. */
export const MAX_JSON_DEPTH = 64;

// a NUL, or a surrogate not part of a pair
const BAD_CHARS = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function badString(s: string): string | null {
  if (!BAD_CHARS.test(s)) return null;
  return s.includes('\u0000') ? 'contains a NUL character (\\u0000)' : 'contains an unpaired UTF-16 surrogate';
}

/**
 * The first reason a parsed JSON value must be refused, with its path, or null. The walk stops
 * at MAX_JSON_DEPTH (so its recursion is bounded whatever the body), checks an object's keys
 * before its values and visits children last first, and stops at the first problem; the path is
 * built only for the answer (no allocation per visited value).
 */
export function checkJsonValue(value: unknown, maxDepth = MAX_JSON_DEPTH): { reason: string; path: string } | null {
  return visit(value, 0, maxDepth, []);
}

function visit(v: unknown, depth: number, maxDepth: number, path: Array<string | number>): { reason: string; path: string } | null {
  if (typeof v === 'string') {
    const bad = badString(v);
    return bad ? { reason: `the string ${bad}`, path: path.join('.') } : null;
  }
  if (v === null || typeof v !== 'object') return null;
  if (depth >= maxDepth) return { reason: `JSON nested deeper than ${maxDepth} levels`, path: path.join('.') };
  if (Array.isArray(v)) {
    for (let i = v.length - 1; i >= 0; i--) {
      const item: unknown = v[i];
      if (item === null || (typeof item !== 'object' && typeof item !== 'string')) continue;
      path.push(i);
      const found = visit(item, depth + 1, maxDepth, path);
      path.pop();
      if (found) return found;
    }
    return null;
  }
  const keys = Object.keys(v);
  for (let i = 0; i < keys.length; i++) {
    const badKey = badString(keys[i]!);
    if (badKey) return { reason: `a key ${badKey}`, path: path.join('.') };
  }
  for (let i = keys.length - 1; i >= 0; i--) {
    const child: unknown = (v as Record<string, unknown>)[keys[i]!];
    if (child === null || (typeof child !== 'object' && typeof child !== 'string')) continue;
    path.push(keys[i]!);
    const found = visit(child, depth + 1, maxDepth, path);
    path.pop();
    if (found) return found;
  }
  return null;
}

/**
 * Why a parsed body is refused for prototype poisoning (a `__proto__` key, or a `constructor` key
 * holding a `prototype`, at any depth), or null — Fastify's default protection (`secure-json-parse`,
 * `protoAction`/`constructorAction` "error"), which replacing Fastify's JSON parser would drop. The
 * scan runs only when the text could hold such a key (plain or \u-escaped), so ordinary bodies pay
 * one substring search.
 */
export function prototypePoisoning(text: string, value: unknown): string | null {
  if (value === null || typeof value !== 'object') return null;
  if (!text.includes('proto') && !text.includes('constructor') && !text.includes('\\u')) return null;
  try {
    secureJson.scan(value, { protoAction: 'error', constructorAction: 'error' });
    return null;
  } catch {
    return 'the body contains a forbidden "__proto__" or "constructor.prototype" key (prototype poisoning)';
  }
}
