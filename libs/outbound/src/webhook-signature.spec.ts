import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { WebhookSigner, webhookHeaders } from './webhook-signature.js';

describe('WebhookSigner', () => {
  it('signs exactly as standardwebhooks does, and its headers verify with Webhook.verify', () => {
    for (let i = 0; i < 20; i++) {
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const payload = JSON.stringify({ statusUpdate: { taskId: 't', text: 'é✓'.repeat(i), metadata: { sequence: i } } });
      const now = new Date(Date.now() - i * 1000);
      const id = `msg_${i}`;
      expect(new WebhookSigner(secret).sign(id, now, payload)).toBe(new Webhook(secret).sign(id, now, payload));
      const headers = webhookHeaders(new WebhookSigner(secret), id, payload, now);
      expect(new Webhook(secret).verify(payload, headers)).toEqual(JSON.parse(payload));
    }
  });

  it('a signature under another secret does not verify; an empty secret is refused', () => {
    const payload = '{"a":1}';
    const headers = webhookHeaders(`whsec_${randomBytes(32).toString('base64')}`, 'msg_1', payload);
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(payload, headers)).toThrow(/signature/i);
    expect(() => new WebhookSigner('whsec_')).toThrow(/empty/);
  });
});
