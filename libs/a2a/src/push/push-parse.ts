import type { ZodType } from 'zod';
import { invalidParams } from '../a2a.errors.js';

/** Parse a push config inside a SendMessage configuration (InvalidParams naming the field). */
export function parsePushConfig<T>(schema: ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw invalidParams(r.error, 'invalid push notification config');
  return r.data;
}
