import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError, TtlLruCache } from '#libs/common';
import { signAgentCard, type AgentCardSignature } from '#libs/trust';
import { CardSignatureRepository } from './card-signature.repository.js';
import { SigningKeyService } from './signing-key.service.js';
import type { ResolvedA2AAgent } from './registry.types.js';

/** Most card versions whose stored signatures a process keeps (rows never change, so no TTL). */
const SIGNATURES_CACHE_MAX = 10_000;

/**
 * Agent Card signatures as a profile capability (A2A v1.0 §8.4; the AaaS A2A profile's
 * `signedAgentCard`): a card is signed only when its revision's profile declares
 * `capabilities.signedAgentCard`, by every active key of its organization (detached JWS over the
 * canonical card, `canonicalCard` of libs/trust), each shape (v1.0, v0.3) and kind (public,
 * extended) over itself.
 *
 * Once per card version: the signatures of a version (the unsigned card's exact bytes and the
 * `jku`) by a key set are computed by the first process that serves it and stored
 * (`card_signatures`, first insert wins); every process then serves the stored ones, so a
 * verifier sees the same bytes whichever instance answers (ES256 signatures are randomized: two
 * processes signing on their own would differ). A process without SIGNING_KEY_ENCRYPTION_SECRET
 * serves stored signatures but cannot make new ones (and reports not ready, see
 * CardClaimsReadiness).
 *
 * Errors: `signing.unavailable` (503) when the card declares signing and its organization has no
 * active key, or no signature of this version is stored and this process cannot sign.
 */
@Injectable()
export class CardSignatureService {
  private readonly stored = new TtlLruCache<string, AgentCardSignature[]>(SIGNATURES_CACHE_MAX, 0);

  constructor(
    private readonly repo: CardSignatureRepository,
    private readonly keys: SigningKeyService,
  ) {}

  /**
   * `card` as served for `agent`: with `signatures` when the profile declares `signedAgentCard`,
   * unchanged otherwise (even when the organization has keys). `jku`: the organization's JWKS URL,
   * written in each signature's protected header.
   */
  async sign<C extends Record<string, unknown>>(agent: ResolvedA2AAgent, card: C, jku: string): Promise<C | (C & { signatures: AgentCardSignature[] })> {
    if (!agent.revision.a2a.capabilities.signedAgentCard) return card;
    const orgId = agent.org.id;
    const kids = (await this.keys.activeKids(orgId)).join(',');
    if (kids === '') throw new AppError('signing.unavailable', `the card of ${agent.org.slug}/${agent.agent.slug} declares signedAgentCard but the organization has no active signing key`);
    const digest = createHash('sha256').update(JSON.stringify(card)).update('\n').update(jku).digest('base64url');
    const cacheKey = `${orgId}:${digest}:${kids}`;
    let signatures = this.stored.get(cacheKey) ?? (await this.repo.find(orgId, digest, kids));
    if (!signatures) {
      if (!this.keys.enabled) {
        throw new AppError('signing.unavailable', `the card of ${agent.org.slug}/${agent.agent.slug} declares signedAgentCard, its signature is not stored yet, and this process cannot sign (SIGNING_KEY_ENCRYPTION_SECRET is not set)`);
      }
      const active = await this.keys.activeKeys(orgId);
      if (active.length === 0) throw new AppError('signing.unavailable', `the organization of ${agent.org.slug}/${agent.agent.slug} has no active signing key`);
      let signed: Record<string, unknown> = { ...card, signatures: [] };
      for (const k of active) signed = await signAgentCard(signed, { privateKey: k.privateKey, kid: k.kid, alg: k.alg, jku });
      signatures = await this.repo.insertOrGet(orgId, digest, active.map((k) => k.kid).join(','), signed.signatures as AgentCardSignature[]);
    }
    this.stored.set(cacheKey, signatures);
    return { ...card, signatures };
  }
}
