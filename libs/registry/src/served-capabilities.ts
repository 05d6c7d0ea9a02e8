import { Inject, Injectable, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { SERVED_A2A_CAPABILITIES } from '#libs/contracts';
import { AgentDirectoryRepository } from './agent-directory.repository.js';

export type A2ACapabilityName = keyof typeof SERVED_A2A_CAPABILITIES;

/** The setting a process needs to serve each capability that depends on one. */
export const CAPABILITY_SETTINGS: Partial<Record<A2ACapabilityName, string>> = {
  signedAgentCard: 'SIGNING_KEY_ENCRYPTION_SECRET',
  pushNotifications: 'PUSH_ENCRYPTION_SECRET (or SIGNING_KEY_ENCRYPTION_SECRET)',
};

/**
 * The optional A2A capabilities this process can serve with its configuration: SERVED_A2A_CAPABILITIES,
 * except `signedAgentCard` without SIGNING_KEY_ENCRYPTION_SECRET (no key can be decrypted) and
 * `pushNotifications` without PUSH_ENCRYPTION_SECRET or SIGNING_KEY_ENCRYPTION_SECRET (push
 * secrets cannot be kept).
 */
export function servedCapabilities(config: Pick<AppConfig, 'SIGNING_KEY_ENCRYPTION_SECRET' | 'PUSH_ENCRYPTION_SECRET'>): Record<A2ACapabilityName, boolean> {
  return {
    ...SERVED_A2A_CAPABILITIES,
    signedAgentCard: Boolean(config.SIGNING_KEY_ENCRYPTION_SECRET),
    pushNotifications: Boolean(config.PUSH_ENCRYPTION_SECRET ?? config.SIGNING_KEY_ENCRYPTION_SECRET),
  };
}

/** A capability some servable agent's card claims that this process cannot serve. */
export interface UnservedClaim {
  capability: A2ACapabilityName;
  /** The setting that would let this process serve it. */
  needs: string;
}

/**
 * A card never changes with the instance that answers: every process serves the same card for an
 * agent, so a process whose configuration cannot serve what a card claims (a signed card, push
 * notifications) must not take traffic. `unserved` answers the readiness probe: the capabilities
 * that some servable agent of the deployment declares and this process cannot serve ([] = ready).
 * One query (two EXISTS probes); errors are the database's (the probe reports them).
 */
@Injectable()
export class CardClaimsReadiness {
  private readonly served: Record<A2ACapabilityName, boolean>;

  constructor(
    private readonly directory: AgentDirectoryRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.served = servedCapabilities(config);
  }

  async unserved(): Promise<UnservedClaim[]> {
    if (this.served.signedAgentCard && this.served.pushNotifications) return [];
    const claims = await this.directory.claimsAny();
    return (['signedAgentCard', 'pushNotifications'] as const).filter((c) => claims[c] && !this.served[c]).map((capability) => ({ capability, needs: CAPABILITY_SETTINGS[capability]! }));
  }
}

/**
 * CardClaimsReadiness alone (with the directory query it needs), for processes that do not serve
 * cards but must refuse traffic on the same grounds: the worker delivers push notifications, so a
 * worker that cannot read push secrets is not ready while a served card claims `pushNotifications`.
 * Needs DbModule and ConfigModule (global).
 */
@Module({ providers: [AgentDirectoryRepository, CardClaimsReadiness], exports: [CardClaimsReadiness] })
export class CardClaimsModule {}
