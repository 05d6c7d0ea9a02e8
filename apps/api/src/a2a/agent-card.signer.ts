import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { SigningKeyService, type ResolvedA2AAgent } from '#libs/registry';
import { signAgentCard } from '#libs/trust';

/** Cap of the signed-card cache (entries). */
const SIGNED_CACHE_MAX = 1_000;

/**
 * Signs Agent Cards with every active key of their organization (A2A v1.0 §8.4: detached JWS over
 * the canonical card, `jku` = the org's JWKS): the public card, the authenticated extended card,
 * each in the v1.0 or the v0.3 shape over its own canonical form (`canonicalCard` of libs/trust).
 * Unsigned when the org has no key. Signed cards are cached by (unsigned body, key ids), bounded:
 * signing costs a few ms.
 */
@Injectable()
export class AgentCardSigner {
  private readonly signed = new Map<string, Record<string, unknown>>();

  constructor(private readonly keys: SigningKeyService) {}

  async sign(card: Record<string, unknown>, resolved: ResolvedA2AAgent, base: string): Promise<Record<string, unknown>> {
    const keys = await this.keys.activeKeys(resolved.org.id);
    if (keys.length === 0) return card;
    const cacheKey = `${createHash('sha256').update(JSON.stringify(card)).digest('base64url')}:${keys.map((k) => k.kid).join(',')}`;
    const hit = this.signed.get(cacheKey);
    if (hit) return hit;
    let out: Record<string, unknown> = { ...card, signatures: [] };
    const jku = `${base}/a2a/${resolved.org.slug}/.well-known/jwks.json`;
    for (const k of keys) out = await signAgentCard(out, { privateKey: k.privateKey, kid: k.kid, alg: k.alg, jku });
    if (this.signed.size >= SIGNED_CACHE_MAX) this.signed.delete(this.signed.keys().next().value!);
    this.signed.set(cacheKey, out);
    return out;
  }
}
