import { Webhook } from 'standardwebhooks';

/**
 * The Standard Webhooks headers of one outbound message (`webhook-id`, `webhook-timestamp` in
 * seconds, `webhook-signature` over id, timestamp and `payload`), signed with `signer` — a
 * `Webhook` or a `whsec_…` secret. `id` stays the same when the same message is sent again.
 */
export function webhookHeaders(signer: Webhook | string, id: string, payload: string, now = new Date()): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const webhook = typeof signer === 'string' ? new Webhook(signer) : signer;
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': webhook.sign(id, now, payload) };
}
