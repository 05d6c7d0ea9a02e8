import { z } from 'zod';
import { PartSchema, type Part } from '#libs/contracts';
import { NonNegativeInt32, OptionalId, StructSchema } from '../proto-json.helpers.js';

/**
 * zod schemas of the A2A v0.3 JSON-RPC params this adapter serves (spec/v0.3/a2a.json:
 * `MessageSendParams`, `TaskQueryParams`, `TaskIdParams`). v0.3 parts are `kind`-tagged; they are
 * converted to the canonical (v1.0-shaped) Part here, and validated as one.
 */

/**
 * Metadata flag set by `@a2a-js/sdk` when a v1.0 non-object `data` value travels as a v0.3
 * DataPart (`{ value: ... }`); honoured on input and set on output so values round-trip.
 */
export const DATA_PART_COMPAT_FLAG = 'data_part_compat';

const FileSchema = z.union([
  z.object({ bytes: z.string(), mimeType: z.string().optional(), name: z.string().optional() }),
  z.object({ uri: z.string(), mimeType: z.string().optional(), name: z.string().optional() }),
], { error: 'file needs bytes (base64) or uri' });

const V03PartInputSchema = z.discriminatedUnion(
  'kind',
  [
    z.object({ kind: z.literal('text'), text: z.string(), metadata: StructSchema.optional() }),
    z.object({ kind: z.literal('file'), file: FileSchema, metadata: StructSchema.optional() }),
    z.object({ kind: z.literal('data'), data: StructSchema, metadata: StructSchema.optional() }),
  ],
  { error: "part kind must be 'text', 'file' or 'data'" },
);

function toCanonicalPart(p: z.infer<typeof V03PartInputSchema>): Part {
  let metadata = p.metadata ? { ...p.metadata } : undefined;
  const withMeta = (part: Part): Part => (metadata && Object.keys(metadata).length > 0 ? { ...part, metadata } : part);
  switch (p.kind) {
    case 'text':
      return withMeta({ text: p.text });
    case 'file': {
      const f = p.file;
      const meta = { ...(f.mimeType ? { mediaType: f.mimeType } : {}), ...(f.name ? { filename: f.name } : {}) };
      return withMeta('bytes' in f ? { raw: f.bytes, ...meta } : { url: f.uri, ...meta });
    }
    case 'data': {
      let data: unknown = p.data;
      if (metadata?.[DATA_PART_COMPAT_FLAG] === true) {
        if ('value' in p.data) data = p.data.value;
        delete metadata[DATA_PART_COMPAT_FLAG];
        if (Object.keys(metadata).length === 0) metadata = undefined;
      }
      return withMeta({ data });
    }
  }
}

/** A v0.3 Part, converted to the canonical Part and validated as one (base64, URL). */
export const V03PartSchema = V03PartInputSchema.transform(toCanonicalPart).pipe(PartSchema);

/** v0.3 `Message` as a client sends it: `role: 'user'`, `kind: 'message'` (lenient when absent). */
export const V03UserMessageSchema = z.object({
  kind: z.literal('message', { error: "kind must be 'message'" }).optional(),
  messageId: z.string({ error: 'messageId is required' }).min(1, 'messageId must not be empty'),
  role: z.literal('user', { error: "role must be 'user': a client sends user messages" }),
  parts: z.array(V03PartSchema, { error: 'parts is required' }).min(1, 'a message needs at least one part'),
  taskId: OptionalId,
  contextId: OptionalId,
  metadata: StructSchema.optional(),
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});

/** v0.3 `MessageSendParams` (params of `message/send`). */
export const V03MessageSendParamsSchema = z.object({
  message: V03UserMessageSchema,
  configuration: z
    .object({
      acceptedOutputModes: z.array(z.string()).optional(),
      blocking: z.boolean().optional(),
      historyLength: NonNegativeInt32.optional(),
      pushNotificationConfig: StructSchema.optional(),
    })
    .optional(),
  metadata: StructSchema.optional(),
});
export type V03MessageSendParams = z.infer<typeof V03MessageSendParamsSchema>;

/** v0.3 `TaskQueryParams` (params of `tasks/get`). */
export const V03TaskQueryParamsSchema = z.object({
  id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
  historyLength: NonNegativeInt32.optional(),
  metadata: StructSchema.optional(),
});

/** v0.3 `TaskIdParams` (params of `tasks/cancel`). */
export const V03TaskIdParamsSchema = z.object({
  id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
  metadata: StructSchema.optional(),
});
