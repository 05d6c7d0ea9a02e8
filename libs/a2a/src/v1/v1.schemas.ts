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

/** v1.0 `CancelTaskRequest`. */
export const V1CancelTaskRequestSchema = z.preprocess(
  normalizeFields(),
  z.object({
    tenant: z.string().optional(),
    id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
    metadata: StructSchema.optional(),
  }),
);

/** v1.0 `SubscribeToTaskRequest`. */
export const V1SubscribeToTaskRequestSchema = z.preprocess(
  normalizeFields(),
  z.object({
    tenant: z.string().optional(),
    id: z.string({ error: 'id is required' }).min(1, 'id must not be empty'),
  }),
);

const SEND_KEYS = new Set(['tenant', 'message', 'configuration', 'metadata']);
const MESSAGE_KEYS = new Set(['messageId', 'contextId', 'taskId', 'role', 'parts', 'metadata', 'extensions', 'referenceTaskIds']);
const CONFIGURATION_KEYS = new Set(['acceptedOutputModes', 'historyLength', 'returnImmediately']);
const MAX_INT32 = 2_147_483_647;

/** Only own keys from `allowed`, none of them `null` (ProtoJSON's "not set" goes to the schema). */
function onlyKeys(o: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const k in o) {
    if (!Object.hasOwn(o, k) || !allowed.has(k) || o[k] === null) return false;
  }
  return true;
}

function isStringArray(v: unknown): v is string[] {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return true;
}

/** A text part `{ text, metadata?, mediaType?, filename? }` as PartSchema parses it (a copy); else undefined. */
function fastTextPart(p: unknown): Record<string, unknown> | undefined {
  if (!isPlainObject(p) || typeof p.text !== 'string') return undefined;
  const out: Record<string, unknown> = { text: p.text };
  for (const k in p) {
    if (!Object.hasOwn(p, k)) return undefined;
    const v = p[k];
    if (k === 'text') continue;
    if (k === 'metadata' && isPlainObject(v)) out.metadata = v;
    else if ((k === 'mediaType' || k === 'filename') && typeof v === 'string' && v !== '') out[k] = v;
    else return undefined;
  }
  return out;
}

/**
 * The common SendMessageRequest, validated by one pass of plain checks instead of the zod
 * schema's preprocess / object / refine chain (the SendMessage hot path): camelCase fields only,
 * no `null`s, no unknown fields, text parts, no push config in the configuration. Returns the
 * value `V1SendMessageRequestSchema` parses from the same input, or undefined for any input
 * outside that shape — valid or not — which the schema then parses (and words the errors of).
 */
export function fastV1SendMessageRequest(params: unknown): V1SendMessageRequest | undefined {
  if (!isPlainObject(params) || !onlyKeys(params, SEND_KEYS)) return undefined;
  const m = params.message;
  if (!isPlainObject(m) || !onlyKeys(m, MESSAGE_KEYS)) return undefined;
  if (typeof m.messageId !== 'string' || m.messageId === '' || (m.role !== 'ROLE_USER' && m.role !== 1)) return undefined;
  if ((m.contextId !== undefined && typeof m.contextId !== 'string') || (m.taskId !== undefined && typeof m.taskId !== 'string')) return undefined;
  if (!Array.isArray(m.parts) || m.parts.length === 0) return undefined;
  const parts: Record<string, unknown>[] = [];
  for (let i = 0; i < m.parts.length; i++) {
    const part = fastTextPart(m.parts[i]);
    if (!part) return undefined;
    parts.push(part);
  }
  if (m.metadata !== undefined && !isPlainObject(m.metadata)) return undefined;
  if ((m.extensions !== undefined && !isStringArray(m.extensions)) || (m.referenceTaskIds !== undefined && !isStringArray(m.referenceTaskIds))) return undefined;
  const message: Record<string, unknown> = { messageId: m.messageId, contextId: m.contextId === '' ? undefined : m.contextId, taskId: m.taskId === '' ? undefined : m.taskId, role: m.role, parts };
  if (m.metadata !== undefined) message.metadata = m.metadata;
  if (m.extensions !== undefined) message.extensions = m.extensions;
  if (m.referenceTaskIds !== undefined) message.referenceTaskIds = m.referenceTaskIds;
  const out: Record<string, unknown> = { message };
  if (params.tenant !== undefined) {
    if (typeof params.tenant !== 'string') return undefined;
    out.tenant = params.tenant;
  }
  if (params.metadata !== undefined) {
    if (!isPlainObject(params.metadata)) return undefined;
    out.metadata = params.metadata;
  }
  const c = params.configuration;
  if (c !== undefined) {
    if (!isPlainObject(c) || !onlyKeys(c, CONFIGURATION_KEYS)) return undefined;
    const configuration: Record<string, unknown> = {};
    if (c.acceptedOutputModes !== undefined) {
      if (!isStringArray(c.acceptedOutputModes)) return undefined;
      configuration.acceptedOutputModes = c.acceptedOutputModes;
    }
    if (c.historyLength !== undefined) {
      const h = c.historyLength;
      if (typeof h !== 'number' || !Number.isSafeInteger(h) || h < 0 || h > MAX_INT32) return undefined;
      configuration.historyLength = h;
    }
    if (c.returnImmediately !== undefined) {
      if (typeof c.returnImmediately !== 'boolean') return undefined;
      configuration.returnImmediately = c.returnImmediately;
    }
    out.configuration = configuration;
  }
  return out as V1SendMessageRequest;
}
