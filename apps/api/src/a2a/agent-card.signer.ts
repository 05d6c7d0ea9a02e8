import { Injectable } from '@nestjs/common';
import { CardSignatureService, type ResolvedA2AAgent } from '#libs/registry';

/**
 * The edge's half of card signing: the `jku` (the organization's JWKS on this deployment,
 * `/a2a/<org>/.well-known/jwks.json`) for a card served at `base`; CardSignatureService (libs/registry)
 * decides whether the card is signed (the profile's `signedAgentCard`) and serves the stored
 * signatures of its version. Errors: `signing.unavailable`.
 */
@Injectable()
export class AgentCardSigner {
  constructor(private readonly signatures: CardSignatureService) {}

  sign(card: Record<string, unknown>, resolved: ResolvedA2AAgent, base: string): Promise<Record<string, unknown>> {
    return this.signatures.sign(resolved, card, `${base}/a2a/${resolved.org.slug}/.well-known/jwks.json`);
  }
}
