import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/**
 * A Standard Webhooks signer for one `whsec_…` secret (the key decoded once): HMAC-SHA256 with
 * node:crypto over `<id>.<timestamp seconds>.<payload>`, `v1,<base64>` — the signature
 * `standardwebhooks`' `Webhook.sign` makes, at native speed. Throws on an empty secret.
 */
export class WebhookSigner {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
    if (this.key.length === 0) throw new Error("Secret can't be empty.");
  }

  /** `v1,<base64 HMAC-SHA256>` of `id`, `timestamp` (whole seconds) and `payload`. */
  sign(id: string, timestamp: Date, payload: string): string {
    return `v1,${createHmac('sha256', this.key).update(`${id}.${Math.floor(timestamp.getTime() / 1000)}.${payload}`).digest('base64')}`;
  }
}

/**
 * The Standard Webhooks headers of one outbound message (`webhook-id`, `webhook-timestamp` in
 * seconds, `webhook-signature` over id, timestamp and `payload`), signed with `signer` — a
 * `WebhookSigner`, a `Webhook` or a `whsec_…` secret. `id` stays the same when the same message is
 * sent again.
 */
export function webhookHeaders(signer: WebhookSigner | Webhook | string, id: string, payload: string, now = new Date()): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const s = typeof signer === 'string' ? new WebhookSigner(signer) : signer;
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': s.sign(id, now, payload) };
}
