/**
 * Push — A2A push notification configs (a subscription to a run's log with a delivery cursor),
 * the outbound guard (no loopback, private, link-local or metadata addresses; checked again at
 * connect time) and the sender. The delivery loop that projects the log lives with the A2A
 * adapter (libs/a2a), which owns the payload shapes.
 */
export { PushModule } from './push.module.js';
export { PushConfigService, type PushConfigAudit, type PushConfigInput, type PushConfigView, type PushTarget } from './push-config.service.js';
export { PushConfigRepository, type ClaimedPushConfig, type PushAttemptRow, type PushConfigRow, type PushOutcome } from './push-config.repository.js';
export { OutboundSender, checkOutboundUrl, outboundPolicy, refusedAddress, type OutboundPolicy } from '#libs/outbound';
