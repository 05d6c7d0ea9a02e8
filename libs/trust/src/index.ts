/**
 * Trust — Agent Card signatures (A2A v1.0 §8.4): canonicalization (proto presence rules + RFC 8785),
 * detached-JWS signing and verification with `jose`. Framework-free.
 */
export { canonicalCard, CARD_PRESENCE } from './card-canonical.js';
export { jkuWithin, signAgentCard, verifyAgentCard, CARD_SIGNING_ALGORITHMS, type AgentCardSignature, type CardSigningAlgorithm, type SignatureCheck, type SigningKey } from './card-signature.js';
export { AesGcmKeyCipher, type KeyCipher } from './key-cipher.js';
