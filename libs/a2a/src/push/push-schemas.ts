import { z } from 'zod';
import type { PushConfigInput, PushConfigView } from '#libs/push';
import { NonNegativeInt32, OptionalId, normalizeFields } from '../proto-json.helpers.js';

/**
 * Push notification config shapes of both versions (A2A v1.0 a2a.proto `TaskPushNotificationConfig`,
 * `AuthenticationInfo`; v0.3 `TaskPushNotificationConfig` / `PushNotificationConfig` /
 * `PushNotificationAuthenticationInfo`) and their mapping to the canonical PushConfigInput.
 */

const Url = z.string({ error: 'url is required' }).min(1, 'url must not be empty').max(2048, 'url is longer than 2048 characters');

/** v1.0 `AuthenticationInfo`: scheme (e.g. Bearer) and credentials, sent as `Authorization: <scheme> <credentials>`. */
const V1AuthSchema = z.object({ scheme: z.string().min(1, 'authentication.scheme is required').max(64), credentials: z.string().max(4096).optional() });

/** v1.0 `TaskPushNotificationConfig` (the body of Create; inside SendMessageConfiguration without taskId). */
export const V1PushConfigSchema = z.preprocess(
  normalizeFields({ task_id: 'taskId' }),
  z.object({
    tenant: z.string().optional(),
    id: z.string().max(200).optional(),
    taskId: OptionalId,
    url: Url,
    token: z.string().max(4096).optional(),
    authentication: V1AuthSchema.optional(),
  }),
);
export type V1PushConfig = z.infer<typeof V1PushConfigSchema>;

export const V1PushConfigRefSchema = z.preprocess(
  normalizeFields({ task_id: 'taskId' }),
  z.object({ tenant: z.string().optional(), taskId: z.string({ error: 'taskId is required' }).min(1), id: z.string({ error: 'id is required' }).min(1) }),
);

export const V1ListPushConfigsSchema = z.preprocess(
  normalizeFields({ task_id: 'taskId', page_size: 'pageSize', page_token: 'pageToken' }),
  z.object({ tenant: z.string().optional(), taskId: z.string({ error: 'taskId is required' }).min(1), pageSize: NonNegativeInt32.optional(), pageToken: z.string().optional() }),
);

/** v0.3 `PushNotificationConfig`. */
export const V03PushNotificationConfigSchema = z.object({
  id: z.string().max(200).optional(),
  url: Url,
  token: z.string().max(4096).optional(),
  authentication: z.object({ schemes: z.array(z.string().max(64)).min(1, 'authentication.schemes needs a scheme'), credentials: z.string().max(4096).optional() }).optional(),
});
export type V03PushNotificationConfig = z.infer<typeof V03PushNotificationConfigSchema>;

/** v0.3 `TaskPushNotificationConfig` (params of `tasks/pushNotificationConfig/set`). */
export const V03TaskPushConfigSchema = z.object({ taskId: z.string({ error: 'taskId is required' }).min(1), pushNotificationConfig: V03PushNotificationConfigSchema });
export const V03GetPushConfigSchema = z.object({ id: z.string({ error: 'id is required' }).min(1), pushNotificationConfigId: z.string().optional() });
export const V03DeletePushConfigSchema = z.object({ id: z.string({ error: 'id is required' }).min(1), pushNotificationConfigId: z.string({ error: 'pushNotificationConfigId is required' }).min(1) });
export const V03ListPushConfigSchema = z.object({ id: z.string({ error: 'id is required' }).min(1) });

export function fromV1PushConfig(c: V1PushConfig): PushConfigInput {
  return {
    url: c.url,
    ...(c.id ? { configId: c.id } : {}),
    ...(c.token ? { token: c.token } : {}),
    ...(c.authentication ? { authentication: { scheme: c.authentication.scheme, ...(c.authentication.credentials ? { credentials: c.authentication.credentials } : {}) } } : {}),
  };
}

export function fromV03PushConfig(c: V03PushNotificationConfig): PushConfigInput {
  const scheme = c.authentication?.schemes[0];
  return {
    url: c.url,
    ...(c.id ? { configId: c.id } : {}),
    ...(c.token ? { token: c.token } : {}),
    ...(scheme ? { authentication: { scheme, ...(c.authentication?.credentials ? { credentials: c.authentication.credentials } : {}) } } : {}),
  };
}

/**
 * v1.0 `TaskPushNotificationConfig` of a stored config. Credentials are never returned; the
 * Standard Webhooks secret only in the response that created the config (`webhookSecret`, an
 * addition receivers need to verify deliveries; ProtoJSON clients ignore unknown fields).
 */
export function toV1PushConfig(v: PushConfigView): Record<string, unknown> {
  return {
    id: v.configId,
    taskId: v.runId,
    url: v.url,
    ...(v.token !== undefined && { token: v.token }),
    ...(v.authentication && { authentication: { scheme: v.authentication.scheme } }),
    ...(v.webhookSecret !== undefined && { webhookSecret: v.webhookSecret }),
  };
}

export function toV03PushConfig(v: PushConfigView): Record<string, unknown> {
  return {
    taskId: v.runId,
    pushNotificationConfig: {
      id: v.configId,
      url: v.url,
      ...(v.token !== undefined && { token: v.token }),
      ...(v.authentication && { authentication: { schemes: [v.authentication.scheme] } }),
    },
    ...(v.webhookSecret !== undefined && { webhookSecret: v.webhookSecret }),
  };
}
