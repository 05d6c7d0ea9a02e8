import { compileRe2Pattern } from './re2-pattern.js';

/**
 * What a tenant's structured-input schema may cost, checked when a revision is drafted or
 * published, and what one message may cost when it is validated. Values: the config variables
 * named on each field (libs/config), handed over by the `STRUCTURED_INPUT_LIMITS` port.
 */
export interface StructuredInputLimits {
  /** STRUCTURED_INPUT_SCHEMA_MAX_BYTES: the schema as JSON (UTF-8). */
  schemaMaxBytes: number;
  /** STRUCTURED_INPUT_SCHEMA_MAX_DEPTH: nesting of the schema's JSON (objects and arrays). */
  schemaMaxDepth: number;
  /**
   * STRUCTURED_INPUT_SCHEMA_MAX_NODES: the schema's JSON values with every `$ref` replaced by what
   * it points at, a pattern counting its RE2 program size besides — what compiling it and
   * validating one value against it cost.
   */
  schemaMaxNodes: number;
  /** STRUCTURED_INPUT_PATTERN_MAX_CHARS: one `pattern` or `patternProperties` key. */
  patternMaxChars: number;
  /** STRUCTURED_INPUT_DATA_MAX_CHARS: a message's DataParts, their `data` as JSON text (characters, escapes not counted). */
  dataMaxChars: number;
  /**
   * STRUCTURED_INPUT_VALIDATION_BUDGET: a message's DataParts may hold at most this divided by
   * the schema's nodes JSON values (each value is checked against at most every node).
   */
  validationBudget: number;
  /**
   * STRUCTURED_INPUT_PATTERN_BUDGET: character-instructions of pattern matching one message may
   * cost (each string tested costs its length times the pattern's RE2 program size).
   */
  patternBudget: number;
}

/** The defaults of libs/config (a spec keeps the two equal). */
export const DEFAULT_STRUCTURED_INPUT_LIMITS: StructuredInputLimits = {
  schemaMaxBytes: 16_384,
  schemaMaxDepth: 16,
  schemaMaxNodes: 256,
  patternMaxChars: 256,
  dataMaxChars: 65_536,
  validationBudget: 131_072,
  patternBudget: 262_144,
};

/** `uniqueItems` compares every pair of items: allowed only beside a `maxItems` at most this. */
export const UNIQUE_ITEMS_MAX_ITEMS = 64;

/** A budget the schema breaks: where (from `params`) and why, with the limit. */
export interface BudgetIssue {
  path: Array<string | number>;
  message: string;
}

/** Keywords whose value is a schema (or, for `items`, a schema or an array of schemas). */
const SCHEMA_VALUED = new Set(['additionalItems', 'additionalProperties', 'contains', 'else', 'if', 'items', 'not', 'propertyNames', 'then', 'unevaluatedItems', 'unevaluatedProperties']);
/** Keywords whose value is an array of schemas. */
const SCHEMA_ARRAYS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);
/** Keywords whose value maps names to schemas (`dependencies`: to a schema or a list of names). */
const SCHEMA_MAPS = new Set(['$defs', 'definitions', 'dependentSchemas', 'properties', 'dependencies']);
/**
 * Keywords that name or reach schemas by URI: without them a `$ref` can only be a JSON pointer
 * into the schema itself, which the budget follows (and no schema of one tenant can reach another's).
 */
const REFUSED = ['$id', 'id', '$anchor', '$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor'];

/**
 * The schema's node count, or the first budget it breaks. Checked before Ajv sees the schema: its
 * size, its depth, its patterns (length, and RE2 must compile them), `uniqueItems` without a
 * small `maxItems`, `$ref`s other than local JSON pointers, recursion through `$ref`, and its node
 * count with every `$ref` expanded (a few small definitions referring to each other twice are
 * exponential once expanded: that is what validating costs). Paths start at `schema`.
 */
export function measureSchema(schema: unknown, limits: StructuredInputLimits): { nodes: number } | { issue: BudgetIssue } {
  const bytes = Buffer.byteLength(JSON.stringify(schema) ?? '');
  if (bytes > limits.schemaMaxBytes) {
    return { issue: { path: ['schema'], message: `the schema is ${bytes} bytes of JSON; at most ${limits.schemaMaxBytes} bytes (STRUCTURED_INPUT_SCHEMA_MAX_BYTES)` } };
  }
  const deep = deeperThan(schema, limits.schemaMaxDepth, ['schema']);
  if (deep) return { issue: { path: deep, message: `the schema nests deeper than at most ${limits.schemaMaxDepth} levels (STRUCTURED_INPUT_SCHEMA_MAX_DEPTH)` } };
  return new SchemaWalk(schema, limits).run();
}

/**
 * The length of `value` as JSON text, escapes not counted (a string counts its length and its two
 * quotes), or, once it is past `max`, a number past `max`: counting stops there, so a DataPart of
 * 1 MiB costs no more to refuse than one of `max`.
 */
export function jsonLengthUpTo(value: unknown, max: number): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && n <= max) {
    const v = stack.pop();
    if (typeof v === 'string') n += v.length + 2;
    else if (Array.isArray(v)) {
      n += 1 + Math.max(1, v.length);
      for (let i = v.length - 1; i >= 0; i--) stack.push(v[i] ?? null);
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      n += 1 + Math.max(1, keys.length) + keys.length; // braces, commas, colons
      for (const k of keys) stack.push(k, (v as Record<string, unknown>)[k] ?? null);
    } else n += typeof v === 'number' ? String(v).length : v === false ? 5 : 4; // null, true: 4
  }
  return n;
}

/** The JSON values in `value` (objects and arrays included), counting stops past `max`. */
export function countValues(value: unknown, max: number): number {
  let n = 0;
  const stack = [value];
  while (stack.length > 0 && n <= max) {
    const v = stack.pop();
    n++;
    if (v !== null && typeof v === 'object') for (const c of Array.isArray(v) ? v : Object.values(v)) stack.push(c);
  }
  return n;
}

/** The path of the first value nested deeper than `max` levels (objects and arrays), or null. */
function deeperThan(value: unknown, max: number, path: Array<string | number>, depth = 0): Array<string | number> | null {
  if (value === null || typeof value !== 'object') return null;
  if (depth + 1 > max) return path;
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
  for (const [k, v] of entries) {
    const found = deeperThan(v, max, [...path, k], depth + 1);
    if (found) return found;
  }
  return null;
}

class BudgetBreach extends Error {
  constructor(readonly issue: BudgetIssue) {
    super(issue.message);
  }
}

/**
 * Counts the nodes of a schema with `$ref`s expanded (memoized per schema object, so counting is
 * linear in the schema's size even when the expansion is exponential), checking each pattern and
 * `$ref` on the way.
 */
class SchemaWalk {
  private readonly counted = new Map<object, number>();
  private readonly open = new Set<object>();

  constructor(
    private readonly root: unknown,
    private readonly limits: StructuredInputLimits,
  ) {}

  run(): { nodes: number } | { issue: BudgetIssue } {
    try {
      const nodes = this.schema(this.root, ['schema']);
      if (nodes > this.limits.schemaMaxNodes) {
        return { issue: { path: ['schema'], message: `the schema counts ${nodes} nodes with its $refs expanded and its patterns' RE2 program sizes; at most ${this.limits.schemaMaxNodes} (STRUCTURED_INPUT_SCHEMA_MAX_NODES)` } };
      }
      return { nodes };
    } catch (e) {
      if (e instanceof BudgetBreach) return { issue: e.issue };
      throw e;
    }
  }

  /** Nodes of a value in a schema position (a boolean schema is one node). */
  private schema(node: unknown, path: Array<string | number>): number {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return this.data(node);
    const done = this.counted.get(node);
    if (done !== undefined) return done;
    this.open.add(node);
    let n = 1;
    for (const [key, value] of Object.entries(node)) {
      const at = [...path, key];
      if (REFUSED.includes(key)) throw new BudgetBreach({ path: at, message: `${key} is not supported here (only $ref to a JSON pointer inside the schema, "#/…")` });
      if (key === '$ref') n += 1 + this.ref(value, at);
      else if (key === 'pattern' && typeof value === 'string') n += 1 + this.pattern(value, at);
      else if (key === 'patternProperties' && isObject(value)) {
        n += 1;
        for (const [p, sub] of Object.entries(value)) n += this.pattern(p, [...at, p]) + this.schema(sub, [...at, p]);
      } else if (key === 'uniqueItems' && value === true) {
        const max = (node as Record<string, unknown>).maxItems;
        if (typeof max !== 'number' || max > UNIQUE_ITEMS_MAX_ITEMS) {
          throw new BudgetBreach({ path: at, message: `uniqueItems compares every pair of items: give maxItems (at most ${UNIQUE_ITEMS_MAX_ITEMS}) beside it` });
        }
        n += 1;
      } else if (SCHEMA_VALUED.has(key)) n += Array.isArray(value) ? 1 + value.reduce<number>((s, v, i) => s + this.schema(v, [...at, i]), 0) : this.schema(value, at);
      else if (SCHEMA_ARRAYS.has(key) && Array.isArray(value)) n += 1 + value.reduce<number>((s, v, i) => s + this.schema(v, [...at, i]), 0);
      else if (SCHEMA_MAPS.has(key) && isObject(value)) n += 1 + Object.entries(value).reduce((s, [k, v]) => s + this.schema(v, [...at, k]), 0);
      else n += this.data(value);
    }
    this.open.delete(node);
    this.counted.set(node, n);
    return n;
  }

  /** Nodes of the schema a `$ref` points at; only JSON pointers into this schema, never an ancestor. */
  private ref(value: unknown, path: Array<string | number>): number {
    if (typeof value !== 'string' || (value !== '#' && !value.startsWith('#/'))) {
      throw new BudgetBreach({ path, message: 'only a $ref to a JSON pointer inside the schema ("#/…") is supported' });
    }
    let target: unknown = this.root;
    for (const raw of value === '#' ? [] : value.slice(2).split('/')) {
      let token: string;
      try {
        token = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
      } catch {
        token = raw;
      }
      target = isObject(target) || Array.isArray(target) ? (target as Record<string, unknown>)[token] : undefined;
      if (target === undefined) throw new BudgetBreach({ path, message: `$ref ${value} points at nothing in the schema` });
    }
    if (isObject(target) && this.open.has(target)) {
      throw new BudgetBreach({ path, message: `$ref ${value} is recursive (it refers to a schema that contains it): not supported, its cost has no bound` });
    }
    return this.schema(target, path);
  }

  /** A pattern's RE2 program size; refused when too long or not RE2. */
  private pattern(source: string, path: Array<string | number>): number {
    if (source.length > this.limits.patternMaxChars) {
      throw new BudgetBreach({ path, message: `a pattern of ${source.length} characters; at most ${this.limits.patternMaxChars} characters (STRUCTURED_INPUT_PATTERN_MAX_CHARS)` });
    }
    try {
      return compileRe2Pattern(source).programSize;
    } catch (e) {
      throw new BudgetBreach({ path, message: e instanceof Error ? e.message : String(e) });
    }
  }

  /** Nodes of a value that is not a schema: one per JSON value. */
  private data(value: unknown): number {
    if (value === null || typeof value !== 'object') return 1;
    return 1 + (Array.isArray(value) ? value : Object.values(value)).reduce<number>((s, v) => s + this.data(v), 0);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
