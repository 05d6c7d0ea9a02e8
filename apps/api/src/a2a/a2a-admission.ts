import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ExtensionRegistry, parseExtensionsHeader, type Negotiated } from '#libs/extensions';
import { A2AAccessService, A2AError, ANONYMOUS_CALLER, declaredExtensions, GrpcEndpoint, projectExtendedAgentCard, servedTransports, toV03AgentCard, type A2ACaller, type A2AProtocolVersion } from '#libs/a2a';
import { AgentCardSigner } from './agent-card.signer.js';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import type { A2ATransport } from '#libs/contracts';
import { AgentDirectory, type ResolvedA2AAgent } from '#libs/registry';
import { presentedApiKey, presentedBearer, publicBaseUrl } from './a2a-http.js';

/** The credentials a call presents: an API key (`X-API-Key`, or a bearer read as a key) and the bearer token. */
export interface PresentedCredentials {
  apiKey?: string;
  bearer?: string;
}

const CALLER = Symbol('a2aCaller');
const NEGOTIATED = Symbol('a2aExtensions');

/** The extensions `negotiate` activated on this request (none before it ran). */
export function negotiatedOf(req: FastifyRequest): Negotiated | undefined {
  return (req as FastifyRequest & { [NEGOTIATED]?: Negotiated })[NEGOTIATED];
}
type CallerRequest = FastifyRequest & { [CALLER]?: A2ACaller };

/** The caller `admit` authenticated on this request (anonymous on an open binding). */
export function callerOf(req: FastifyRequest): A2ACaller {
  return (req as CallerRequest)[CALLER] ?? ANONYMOUS_CALLER;
}

/**
 * The checks every A2A call shares, whatever its binding: the agent at `/a2a/<org>/<agent>`
 * (resolution cached up to AGENT_CACHE_TTL_MS), served over `transport`, and the caller allowed
 * by the binding's security. Throws A2AError (MethodNotFound: transport not served;
 * Unauthenticated / Unauthorized) or the AppError of what it called (agent.not_found /
 * agent.not_published → TaskNotFound, …); each binding maps it once, at its edge (`toA2AError`).
 */
@Injectable()
export class A2AAdmission {
  constructor(
    private readonly directory: AgentDirectory,
    private readonly access: A2AAccessService,
    private readonly extensions: ExtensionRegistry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly signer: AgentCardSigner,
    private readonly grpc: GrpcEndpoint,
  ) {}

  async admit(org: string, agentSlug: string, transport: A2ATransport, req: FastifyRequest): Promise<ResolvedA2AAgent> {
    const { agent, caller } = await this.admitPresented(org, agentSlug, transport, { apiKey: presentedApiKey(req), bearer: presentedBearer(req) });
    (req as CallerRequest)[CALLER] = caller;
    return agent;
  }

  /** `admit` for a binding without a Fastify request (gRPC): the agent and the caller its credentials identify. */
  async admitPresented(org: string, agentSlug: string, transport: A2ATransport, presented: PresentedCredentials): Promise<{ agent: ResolvedA2AAgent; caller: A2ACaller }> {
    const agent = await this.directory.resolve(org, agentSlug, { maxAgeMs: this.config.AGENT_CACHE_TTL_MS });
    if (!servedTransports(agent.binding, this.grpc).includes(transport)) {
      throw new A2AError('MethodNotFound', `agent ${org}/${agentSlug} is not served over ${transport === 'JSONRPC' ? 'JSON-RPC' : transport}`);
    }
    return { agent, caller: await this.access.caller(agent, presented) };
  }

  /**
   * The extensions this request activates (A2A v1.0 "Extensions"): the `A2A-Extensions` (v0.3:
   * `X-A2A-Extensions`) header's URIs that the agent declares, exact match, unknown ones ignored.
   * Sets the version's header on the response (and the header the request used, when that is the
   * other one), listing what was activated. Throws A2AError:
   * ExtensionSupportRequired (a required extension not activated), InvalidParams (a dependency
   * not activated).
   */
  negotiate(agent: ResolvedA2AAgent, req: FastifyRequest, reply: FastifyReply, version: '1.0' | '0.3'): Negotiated {
    const negotiated = this.negotiateValue(agent, req.headers['a2a-extensions'] ?? req.headers['x-a2a-extensions']);
    (req as FastifyRequest & { [NEGOTIATED]?: Negotiated })[NEGOTIATED] = negotiated;
    if (negotiated.activated.length > 0) {
      // answered in the version's own header, and also in the one the request used (clients written to
      // the extensions chapter read X-A2A-Extensions whatever the version)
      const activated = negotiated.activated.join(', ');
      reply.raw.setHeader(version === '0.3' ? 'X-A2A-Extensions' : 'A2A-Extensions', activated);
      if (req.headers['x-a2a-extensions'] !== undefined && version === '1.0') reply.raw.setHeader('X-A2A-Extensions', activated);
      if (req.headers['a2a-extensions'] !== undefined && version === '0.3') reply.raw.setHeader('A2A-Extensions', activated);
    }
    return negotiated;
  }

  /** The extensions a raw `A2A-Extensions` value activates for `agent` (see `negotiate`; gRPC reads it from metadata). */
  negotiateValue(agent: ResolvedA2AAgent, raw: string | string[] | undefined): Negotiated {
    return this.extensions.negotiate(declaredExtensions(agent), parseExtensionsHeader(raw));
  }

  /**
   * The authenticated extended card of `agent` for this request (A2A v1.0 §3.1.11): the caller
   * must present a credential the binding accepts (on an open binding: an API key of the agent's
   * organization, a2a:invoke or admin), as the public card's security declares. Throws A2AError: Unauthenticated / Unauthorized, UnsupportedOperation,
   * ExtendedAgentCardNotConfigured.
   */
  async extendedCard(agent: ResolvedA2AAgent, req: FastifyRequest, version: A2AProtocolVersion = '1.0'): Promise<Record<string, unknown>> {
    return this.extendedCardFor(agent, { apiKey: presentedApiKey(req), bearer: presentedBearer(req) }, publicBaseUrl(this.config, req), version);
  }

  /** `extendedCard` for presented credentials, with the cards' base URL `base`. */
  async extendedCardFor(agent: ResolvedA2AAgent, presented: PresentedCredentials, base: string, version: A2AProtocolVersion = '1.0'): Promise<Record<string, unknown>> {
    // not declared / not configured is said to anyone; the card itself only to the authenticated
    const card = projectExtendedAgentCard(agent, base, this.grpc);
    // the binding's own credentials (any alternative of an `anyOf`); on an open binding a key of
    // the organization (the card declares it: projectAgentCard)
    await this.access.caller(agent, presented, { required: true });
    // signed like the public card, in the shape of the version asked for
    const shaped = (version === '1.0' ? card : toV03AgentCard(card)) as unknown as Record<string, unknown>;
    return this.signer.sign(shaped, agent, base);
  }
}
