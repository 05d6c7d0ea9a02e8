import { z } from 'zod';

/** Helpers shared by the v1.0 and v0.3 request schemas (ProtoJSON / JSON leniency). */

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Normalize an object before validation: accept the snake_case spelling of fields
 * (ProtoJSON parsers accept both; the SDK server does too) and drop `null` values, which ProtoJSON
 * reads as "field not set". The camelCase spelling wins when both are given. Non-objects pass
 * through, so the schema reports them.
 */
export function normalizeFields(aliases: Record<string, string> = {}, keepNull: readonly string[] = []) {
  return (v: unknown): unknown => {
    if (!isPlainObject(v)) return v;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(v)) {
      const name = aliases[key] ?? key;
      if (value === null && !keepNull.includes(name)) continue;
      if (name !== key && name in v) continue;
      out[name] = value;
    }
    return out;
  };
}

/** ProtoJSON int32: a JSON number or a decimal string, here limited to >= 0. */
export const NonNegativeInt32 = z.preprocess(
  (v) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v),
  z.int().min(0).max(2_147_483_647),
);

/** google.protobuf.Struct: a JSON object. */
export const StructSchema = z.record(z.string(), z.unknown());

/** A present, non-empty string field; ProtoJSON's empty string means "not set" for optional ids. */
export const OptionalId = z
  .string()
  .optional()
  .transform((s) => (s === undefined || s === '' ? undefined : s));
