/**
 * Outbound — HTTP calls the service makes to addresses its users give (push receivers, HTTP
 * runtime backends): the guard (public unicast only unless allowlisted; checked at connect time)
 * and the senders (buffered and streaming). No redirects are followed.
 */
export { checkOutboundUrl, guardedLookup, outboundPolicy, refusedAddress, refusedLiteral, type OutboundPolicy } from './outbound-guard.js';
export { OutboundSender, parseRetryAfter, type OutboundPost, type OutboundResult } from './outbound-sender.js';
export { openOutboundStream, type OutboundStream } from './outbound-stream.js';
export { outboundFetch } from './outbound-fetch.js';
export { DEFAULT_RESPONSE_BUDGET, ResponseTooLargeError, type ResponseBudget } from './response-budget.js';
export { WebhookSigner, webhookHeaders } from './webhook-signature.js';
