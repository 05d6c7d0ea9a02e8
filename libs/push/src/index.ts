/**
 * Push — A2A push notification configs (a subscription to a run's log with a delivery cursor),
 * the outbound guard (no loopback, private, link-local or metadata addresses; checked again at
 * connect time), the sender and the delivery's signature (Standard Webhooks). The delivery loop that projects the log lives with the A2A
 * adapter (libs/a2a), which owns the payload shapes.
 */
export { PushModule } from './push.module.js';
export { PushConfigService, type AdmittedPushConfig, type PushConfigAudit, type PushConfigInput, type PushConfigView, type PushTarget } from './push-config.service.js';
export { PushConfigRepository, type ClaimedPushConfig, type PushAttemptRow, type PushConfigRow, type PushOutcome } from './push-config.repository.js';
// the delivery transport: the guarded keep-alive sender and the Standard Webhooks signature of a delivery
export { OutboundSender, WebhookSigner, checkOutboundUrl, outboundPolicy, refusedAddress, webhookHeaders, type OutboundPolicy } from '#libs/outbound';
