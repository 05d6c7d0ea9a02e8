import { z } from 'zod';
import { PartSchema } from '#libs/contracts';
import { NonNegativeInt32, OptionalId, StructSchema, isPlainObject, normalizeFields } from '../proto-json.helpers.js';

/**
 * zod schemas of the A2A v1.0 request params this adapter serves (a2a.proto, ProtoJSON:
 * lowerCamelCase, snake_case accepted, `null` = not set, unknown fields ignored per §5.7).
 * Parsed values are already canonical where the shapes agree (a v1.0 Part is the canonical Part).
 */

const PART_FIELDS = ['text', 'raw', 'url', 'data', 'metadata', 'filename', 'mediaType'] as const;

/**
 * v1.0 `Part`: exactly one of text / raw (base64) / url / data, with optional metadata, filename
 * and mediaType. Unknown fields are ignored; empty `filename`/`mediaType` are ProtoJSON defaults.
 */
export const V1PartSchema = z.preprocess((v) => {
  const n = normalizeFields({ media_type: 'mediaType' }, ['data'])(v);
  if (!isPlainObject(n)) return n;
  const out: Record<string, unknown> = {};
  for (const f of PART_FIELDS) if (f in n) out[f] = n[f];
  if (out.filename === '') delete out.filename;
  if (out.mediaType === '') delete out.mediaType;
  return out;
}, PartSchema);

/** v1.0 `Message` as a client sends it: role must be ROLE_USER (ProtoJSON also allows `1`). */
export const V1UserMessageSchema = z.preprocess(
  normalizeFields({ message_id: 'messageId', context_id: 'contextId', task_id: 'taskId', reference_task_ids: 'referenceTaskIds' }),
  z.object({
    messageId: z.string({ error: 'messageId is required' }).min(1, 'messageId must not be empty'),
    contextId: OptionalId,
    taskId: OptionalId,
    role: z.union([z.literal('ROLE_USER'), z.literal(1)], {
      error: 'role must be ROLE_USER: a client sends user messages',
    }),
    parts: z.array(V1PartSchema, { error: 'parts is required' }).min(1, 'a message needs at least one part'),
    metadata: StructSchema.optional(),
    extensions: z.array(z.string()).optional(),
    referenceTaskIds: z.array(z.string()).optional(),
  }),
);
export type V1UserMessage = z.infer<typeof V1UserMessageSchema>;

/** v1.0 `SendMessageConfiguration`. `returnImmediately` false (default) = blocking. */
export const V1SendMessageConfigurationSchema = z.preprocess(
  normalizeFields({
    accepted_output_modes: 'acceptedOutputModes',
    task_push_notification_config: 'taskPushNotificationConfig',
    history_length: 'historyLength',
    return_immediately: 'returnImmediately',
  }),
  z.object({
    acceptedOutputModes: z.array(z.string()).optional(),
    taskPushNotificationConfig: StructSchema.optional(),
    historyLength: NonNegativeInt32.optional(),
    returnImmediately: z.boolean().optional(),
  }),
);

/** v1.0 `SendMessageRequest` (params of JSON-RPC `SendMessage`). */
export const V1SendMessageRequestSchema = z.preprocess(
  normalizeFields(),
  z.object({
    tenant: z.string().optional(),
    message: V1UserMessageSchema,
    configuration: V1SendMessageConfigurationSchema.optional(),
    metadata: StructSchema.optional(),
  }),
);
export type V1SendMessageRequest = z.infer<typeof V1SendMessageRequestSchema>;

/** v1.0 `GetTaskRequest`. */
export const V1GetTaskRequestSchema = z.preprocess(
  normalizeFields({ history_length: 'historyLength' }),
  z.object({
    tenant: z.string().optional(),
    id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
    historyLength: NonNegativeInt32.optional(),
  }),
);
export type V1GetTaskRequest = z.infer<typeof V1GetTaskRequestSchema>;

/** v1.0 `CancelTaskRequest`. */
export const V1CancelTaskRequestSchema = z.preprocess(
  normalizeFields(),
  z.object({
    tenant: z.string().optional(),
    id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
    metadata: StructSchema.optional(),
  }),
);
export type V1CancelTaskRequest = z.infer<typeof V1CancelTaskRequestSchema>;

/** v1.0 `SubscribeToTaskRequest`. */
export const V1SubscribeToTaskRequestSchema = z.preprocess(
  normalizeFields(),
  z.object({
    tenant: z.string().optional(),
    id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
  }),
);
export type V1SubscribeToTaskRequest = z.infer<typeof V1SubscribeToTaskRequestSchema>;
