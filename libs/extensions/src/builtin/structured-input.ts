import { Ajv, type ValidateFunction } from 'ajv';
import { z } from 'zod';
import { TtlLruCache } from '#libs/common';
import type { CanonicalMessage } from '#libs/contracts';
import { ExtensionRuleError, type A2AExtensionPlugin } from '../extension.js';
import { PatternBudgetExceeded, re2RegExp, withPatternBudget } from './re2-pattern.js';
import { countValues, jsonLengthUpTo, measureSchema, DEFAULT_STRUCTURED_INPUT_LIMITS, UNIQUE_ITEMS_MAX_ITEMS, type BudgetIssue, type StructuredInputLimits } from './schema-budget.js';

export const STRUCTURED_INPUT_EXTENSION_URI = 'https://aaas.dev/extensions/structured-input/v1';

/**
 * Ajv options for tenant schemas: RE2 for `pattern` / `patternProperties` (no backtracking),
 * the first error only, no schema registered by `$id` (no tenant reaches another's schema), and
 * no strict mode (it would test `patternProperties` against `properties` with JavaScript RegExps
 * at compile time).
 */
const AJV_OPTIONS = { allErrors: false, strict: false, allowMatchingProperties: true, addUsedSchema: false, validateSchema: false, meta: false, code: { regExp: re2RegExp } } as const;

/** Checks schemas against the JSON Schema meta-schema (draft-07) only; compiles nothing of a tenant's. */
const metaSchemas = new Ajv({ strict: false });

/**
 * Compiles tenant schemas. Every compile leaves its functions in the Ajv instance's scope for good
 * (Ajv never forgets them, `removeSchema` included), so a fresh instance takes over after
 * COMPILES_PER_AJV compiles; an old one is collected once the validators it made are evicted.
 */
const COMPILES_PER_AJV = 64;
let compiler = { ajv: new Ajv(AJV_OPTIONS), compiles: 0 };

/**
 * Compiled validators by schema (its JSON), least recently used evicted: what stays in memory
 * (measured: 300 schemas of about 220 nodes compiled and used grew the heap by 21 MB with 128 kept).
 */
const VALIDATORS_KEPT = 128;
const validators = new TtlLruCache<string, ValidateFunction>(VALIDATORS_KEPT, 0);

/** A schema ready to validate messages (with its node count), or why it is refused (its path starts at `schema`). */
type Prepared = { validate: ValidateFunction; nodes: number } | { issue: BudgetIssue };

/**
 * Check `schema` against the budgets, then against the meta-schema, then compile it (cached by its
 * JSON). Ajv's refusal is an issue at `schema`.
 */
function prepare(schema: Record<string, unknown>, limits: StructuredInputLimits): Prepared {
  const measured = measureSchema(schema, limits);
  if ('issue' in measured) return measured;
  const { nodes } = measured;
  const key = JSON.stringify(schema);
  const known = validators.get(key);
  if (known) return { validate: known, nodes };
  try {
    if (!metaSchemas.validateSchema(schema)) throw new Error(metaSchemas.errorsText(metaSchemas.errors, { dataVar: 'schema' }));
    if (compiler.compiles >= COMPILES_PER_AJV) compiler = { ajv: new Ajv(AJV_OPTIONS), compiles: 0 };
    compiler.compiles++;
    const validate = compiler.ajv.compile(schema);
    validators.set(key, validate);
    return { validate, nodes };
  } catch (e) {
    return { issue: { path: ['schema'], message: `not a JSON Schema Ajv can compile: ${e instanceof Error ? e.message : String(e)}` } };
  }
}

/** The params of a declaration: one JSON Schema, within `limits` (issues name the field and the limit). */
function structuredInputParams(limits: StructuredInputLimits, prepared: (schema: Record<string, unknown>) => Prepared) {
  return z.strictObject({
    /** JSON Schema (draft-07, as Ajv implements it) every message's DataPart must satisfy. */
    schema: z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
      const p = prepared(schema);
      if ('issue' in p) ctx.addIssue({ code: 'custom', path: p.issue.path.slice(1), message: p.issue.message });
    }),
  });
}

type StructuredInputParams = { schema: Record<string, unknown> };

/**
 * Profile: every user message of a request that activates it must carry a DataPart valid against
 * the JSON Schema in `params.schema` (A2A "profile" extension: it constrains messages without
 * adding fields). The schema's patterns run on RE2, its size and cost are bounded when it is
 * declared, and each message's check is bounded by `limits` (DataParts' size, pattern work).
 */
export function structuredInputExtension(limits: StructuredInputLimits = DEFAULT_STRUCTURED_INPUT_LIMITS): A2AExtensionPlugin<StructuredInputParams> {
  // the verdict on each params object a request carries (the agent cache keeps them), so a message pays no check twice
  const verdicts = new WeakMap<object, Prepared>();
  const prepared = (schema: Record<string, unknown>): Prepared => {
    if (schema === null || typeof schema !== 'object') return { issue: { path: ['schema'], message: 'not a JSON Schema object' } };
    let p = verdicts.get(schema);
    if (!p) verdicts.set(schema, (p = prepare(schema, limits)));
    return p;
  };
  return {
    uri: STRUCTURED_INPUT_EXTENSION_URI,
    description: 'Every message carries a DataPart valid against the declared JSON Schema (profile).',
    params: structuredInputParams(limits, prepared),
    specDocument: specDocument(limits),
    onMessage(message: CanonicalMessage, params) {
      const data = message.parts.filter((p) => p.data !== undefined);
      if (data.length === 0) throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, 'the message must carry a DataPart valid against the declared schema');
      const chars = data.reduce((n, p) => n + jsonLengthUpTo(p.data, limits.dataMaxChars - n), 0);
      if (chars > limits.dataMaxChars) {
        throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `the DataParts are more than ${limits.dataMaxChars} characters of JSON; at most ${limits.dataMaxChars} (STRUCTURED_INPUT_DATA_MAX_CHARS)`);
      }
      // a revision published before the budgets is held to them here
      const p = prepared(params.schema);
      if ('issue' in p) throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `the agent's declared schema is refused at ${p.issue.path.join('.')}: ${p.issue.message}`);
      const { validate, nodes } = p;
      const most = Math.floor(limits.validationBudget / nodes);
      const values = data.reduce((n, part) => n + countValues(part.data, most), 0);
      if (values > most) {
        throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `the DataParts hold more than ${most} JSON values, the most this agent's schema (${nodes} nodes) checks in one message (STRUCTURED_INPUT_VALIDATION_BUDGET ${limits.validationBudget} / nodes)`);
      }
      let valid: boolean;
      try {
        valid = withPatternBudget(limits.patternBudget, () => data.some((p) => validate(p.data)));
      } catch (e) {
        if (!(e instanceof PatternBudgetExceeded)) throw e;
        throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `checking the DataParts against the schema's patterns costs more than ${e.budget} character-instructions (STRUCTURED_INPUT_PATTERN_BUDGET)`);
      }
      if (!valid) {
        const why = (validate.errors ?? []).map((e) => `${e.instancePath || '(data)'} ${e.message ?? ''}`.trim()).join('; ');
        throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `no DataPart is valid against the declared schema: ${why}`);
      }
    },
  };
}

function specDocument(limits: StructuredInputLimits): string {
  return `# Structured input (profile A2A extension)

URI: \`${STRUCTURED_INPUT_EXTENSION_URI}\`

Declared with \`params.schema\`: a JSON Schema. When a request activates the extension
(\`A2A-Extensions: ${STRUCTURED_INPUT_EXTENSION_URI}\`), every message it sends must contain at least one
DataPart (\`{"data": …}\`) whose value is valid against that schema; otherwise the request fails with
InvalidParams naming this extension and the rule broken. The agent may declare it \`required\`.

Patterns (\`pattern\`, \`patternProperties\`) have RE2 syntax and semantics: no backreferences or
lookaround (refused when declared). The schema is held to a budget when declared: at most
${limits.schemaMaxBytes} bytes, ${limits.schemaMaxDepth} levels, ${limits.schemaMaxNodes} nodes with its
\`$ref\`s expanded (only \`$ref\`s to \`#/…\` inside it, not recursive; no \`$id\` or anchors),
patterns of at most ${limits.patternMaxChars} characters, \`uniqueItems\` only beside a \`maxItems\` of at most
${UNIQUE_ITEMS_MAX_ITEMS}. A message's DataParts may hold at most ${limits.dataMaxChars} characters of JSON and
${limits.validationBudget} / (the schema's nodes) JSON values, and checking them against the patterns may
cost at most ${limits.patternBudget} character-instructions (a string's length + 8, times the pattern's
RE2 program size); past any of these the message is refused with InvalidParams saying so.
`;
}
