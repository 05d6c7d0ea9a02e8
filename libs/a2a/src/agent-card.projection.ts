import { SERVED_A2A_CAPABILITIES } from '#libs/contracts';
import type { A2AExtension, A2AProfile, A2ATransport, CredentialSecurity } from '#libs/contracts';
import type { ResolvedA2AAgent } from '#libs/registry';
import type { A2AProtocolVersion } from './a2a.types.js';
import { A2AError } from './a2a.errors.js';

/**
 * Transports this deployment can serve: JSON-RPC (§9) and HTTP+JSON (§11), both at the
 * binding's path, and gRPC (§10) on the process's gRPC listener, only when it has one
 * (GRPC_PORT; see `servedTransports`). A binding may name a transport that is not served, but a
 * card never lists an interface that does not exist (A2A v1.0 §5.2: agents declare what they
 * support; §8: the card is a promise clients act on).
 */
export const SERVED_TRANSPORTS: readonly A2ATransport[] = ['JSONRPC', 'HTTP+JSON', 'GRPC'];

/**
 * Protocol versions served on each served transport, preferred first: the JSON-RPC URL serves
 * both; HTTP+JSON only 1.0 (no v0.3 REST binding is offered).
 */
export const SERVED_PROTOCOL_VERSIONS: Readonly<Record<A2ATransport, readonly A2AProtocolVersion[]>> = {
  JSONRPC: ['1.0', '0.3'],
  'HTTP+JSON': ['1.0'],
  GRPC: ['1.0'],
};

/**
 * The gRPC listener of this process, when it has one: `address` (`host:port`, the GRPC
 * interface's `url`, as `@grpc/grpc-js` clients take it). Absent or null: no gRPC here.
 */
export interface ServedGrpc {
  address: string | null;
}

/**
 * The `tenant` that addresses an agent on the gRPC listener (one listener serves every agent):
 * `<org slug>/<agent slug>`, written on the GRPC AgentInterface so SDK clients send it on every
 * request (a2a.proto `tenant` fields).
 */
export function grpcTenantOf(orgSlug: string, agentSlug: string): string {
  return `${orgSlug}/${agentSlug}`;
}

/**
 * Optional capabilities this deployment implements; a revision's declared capabilities are
 * capped by these (A2A v1.0 §3.3.4: a capability on the card obliges the agent to serve it).
 */
export const SERVED_CAPABILITIES = SERVED_A2A_CAPABILITIES;

/** Header an apiKey-secured binding reads the key from (also accepted: `Authorization: Bearer`). */
export const API_KEY_HEADER = 'X-API-Key';
/** Names of the security schemes on the card of a jwt binding. */
export const BEARER_SCHEME_NAME = 'bearer';
export const OAUTH2_SCHEME_NAME = 'oauth2';
export const OIDC_SCHEME_NAME = 'oidc';

/** Name of the security scheme on the card for an apiKey binding. */
export const API_KEY_SCHEME_NAME = 'apiKey';

/** v1.0 AgentInterface (a2a.proto): url, protocolBinding and protocolVersion are REQUIRED. */
export interface AgentInterface {
  url: string;
  protocolBinding: string;
  /** gRPC only: the agent's address on the shared listener (`grpcTenantOf`). */
  tenant?: string;
  protocolVersion: string;
}

export interface AgentSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
  inputModes?: string[];
  outputModes?: string[];
}

export interface SecurityScheme {
  apiKeySecurityScheme?: { description?: string; location: string; name: string };
  httpAuthSecurityScheme?: { description?: string; scheme: string; bearerFormat?: string };
  oauth2SecurityScheme?: { description?: string; flows: { clientCredentials: { tokenUrl: string; scopes: Record<string, string> } } };
  openIdConnectSecurityScheme?: { description?: string; openIdConnectUrl: string };
}

export interface SecurityRequirement {
  /** Scopes per scheme; an empty list is omitted (ProtoJSON default), i.e. `{}`. */
  schemes: Record<string, { list?: string[] }>;
}

/** v1.0 AgentCard (a2a.proto `message AgentCard`) in ProtoJSON, as this adapter serves it. */
export interface AgentCard {
  name: string;
  description: string;
  supportedInterfaces: AgentInterface[];
  provider?: { url: string; organization: string };
  version: string;
  documentationUrl?: string;
  capabilities: { streaming?: boolean; pushNotifications?: boolean; extensions?: A2AExtension[]; extendedAgentCard?: boolean };
  securitySchemes?: Record<string, SecurityScheme>;
  securityRequirements?: SecurityRequirement[];
  defaultInputModes: string[];
  defaultOutputModes: string[];
  skills: AgentSkill[];
  iconUrl?: string;
}

/** The binding's transports this process serves, in the binding's order (GRPC only with a gRPC listener). */
export function servedTransports(binding: Pick<ResolvedA2AAgent['binding'], 'transports'>, grpc?: ServedGrpc | null): A2ATransport[] {
  return binding.transports.filter((t) => SERVED_TRANSPORTS.includes(t) && (t !== 'GRPC' || !!grpc?.address));
}

/** The extensions an agent declares (its card's `capabilities.extensions`): revision ∪ binding. */
export function declaredExtensions(agent: ResolvedA2AAgent): A2AExtension[] {
  return mergeExtensions(agent.revision.a2a.extensions, agent.binding.extensions);
}

/** Revision extensions, then the binding's; a URI given twice keeps the binding's declaration. */
function mergeExtensions(revision: A2AExtension[], binding: A2AExtension[]): A2AExtension[] {
  const byUri = new Map<string, A2AExtension>();
  for (const e of [...revision, ...binding]) byUri.set(e.uri, e);
  return [...byUri.values()];
}

/** `https://h/` + `/a2a/x` without a double slash. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}${path.startsWith('/') ? path : `/${path}`}`;
}

/**
 * Project the public v1.0 Agent Card of a resolved agent (pure). `publicBaseUrl` is the origin
 * clients reach this deployment at (config PUBLIC_BASE_URL, else derived from the request).
 *
 * - identity: the revision's `identityProjection` overrides the agent's name/description;
 *   `version` is the projection's;
 * - `supportedInterfaces`: for each served transport of the binding, one entry per served
 *   protocol version, all at `${publicBaseUrl}${binding.path}` (§3.6.2: "Agents CAN expose
 *   multiple interfaces for the same transport with different versions under the same or
 *   different URLs"); v1.0 first, the preferred one; GRPC (when the binding enables it and
 *   `grpc` says this process listens) at `grpc.address` with `tenant` = `grpcTenantOf`;
 * - `capabilities`: the revision's, capped by SERVED_CAPABILITIES; `extensions` = revision ∪ binding;
 *   `extendedAgentCard` exactly when the extended card is served (`servesExtendedCard`);
 * - security (`cardSecurity`): the schemes of the binding and the requirements that name them, one
 *   requirement per alternative; on an open binding serving the extended card, the API key that
 *   fetching it needs, as an optional requirement (`[{}, {apiKey}]`, OpenAPI's "anonymous or").
 *
 * Returns null when the binding names no transport this deployment serves (nothing to call).
 */
export function projectAgentCard(resolved: ResolvedA2AAgent, publicBaseUrl: string, grpc?: ServedGrpc | null): AgentCard | null {
  const { agent, revision, binding } = resolved;
  const profile = revision.a2a;
  const url = joinUrl(publicBaseUrl, binding.path);
  const supportedInterfaces: AgentInterface[] = servedTransports(binding, grpc).flatMap((protocolBinding) =>
    SERVED_PROTOCOL_VERSIONS[protocolBinding].map((protocolVersion) =>
      protocolBinding === 'GRPC'
        ? { url: grpc!.address!, protocolBinding, tenant: grpcTenantOf(resolved.org.slug, agent.slug), protocolVersion }
        : { url, protocolBinding, protocolVersion },
    ),
  );
  if (supportedInterfaces.length === 0) return null;

  const name = profile.identityProjection.name ?? agent.name;
  const extensions = mergeExtensions(profile.extensions, binding.extensions);
  const card: AgentCard = {
    name,
    description: profile.identityProjection.description ?? (agent.description || name),
    supportedInterfaces,
    ...(agent.provider ? { provider: { url: agent.provider.url, organization: agent.provider.organization } } : {}),
    version: profile.identityProjection.version,
    ...(agent.documentationUrl ? { documentationUrl: agent.documentationUrl } : {}),
    capabilities: {
      streaming: profile.capabilities.streaming && SERVED_CAPABILITIES.streaming,
      pushNotifications: profile.capabilities.pushNotifications && SERVED_CAPABILITIES.pushNotifications,
      ...(extensions.length > 0 ? { extensions } : {}),
      extendedAgentCard: servesExtendedCard(profile),
    },
    defaultInputModes: profile.defaultInputModes,
    defaultOutputModes: profile.defaultOutputModes,
    skills: profile.skillsProjection.map(skillOf),
    ...(agent.iconUrl ? { iconUrl: agent.iconUrl } : {}),
  };
  const security = cardSecurity(resolved, card.capabilities.extendedAgentCard === true);
  if (security) Object.assign(card, security);
  return card;
}

/**
 * True when the revision's authenticated extended card is served (A2A v1.0 §3.1.11): declared in
 * `capabilities.extendedAgentCard` and configured (`extendedCard`). A declared but unconfigured one
 * is not served (GetExtendedAgentCard answers ExtendedAgentCardNotConfigured), so no card claims it.
 */
export function servesExtendedCard(profile: A2AProfile): boolean {
  return profile.capabilities.extendedAgentCard && SERVED_CAPABILITIES.extendedAgentCard && profile.extendedCard !== undefined;
}

/** One credential scheme of a binding on the card: its named schemes and the requirements (alternatives) naming them. */
function credentialSecurity(resolved: ResolvedA2AAgent, sec: CredentialSecurity): { schemes: Record<string, SecurityScheme>; requirements: SecurityRequirement[] } {
  if (sec.scheme === 'apiKey') {
    return {
      schemes: {
        [API_KEY_SCHEME_NAME]: {
          apiKeySecurityScheme: {
            description: `An API key of the agent's organization with scope a2a:invoke, in header ${API_KEY_HEADER} (or as Authorization: Bearer).`,
            location: 'header',
            name: API_KEY_HEADER,
          },
        },
      },
      requirements: [{ schemes: { [API_KEY_SCHEME_NAME]: {} } }],
    };
  }
  const scopes = Object.fromEntries(sec.requiredScopes.map((s) => [s, `required to invoke ${resolved.agent.name}`]));
  return {
    schemes: {
      [BEARER_SCHEME_NAME]: {
        httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'JWT', description: `A JWT from ${sec.issuer} for audience ${sec.audience}${sec.requiredScopes.length ? ` with scope ${sec.requiredScopes.join(' ')}` : ''}.` },
      },
      ...(sec.tokenUrl ? { [OAUTH2_SCHEME_NAME]: { oauth2SecurityScheme: { flows: { clientCredentials: { tokenUrl: sec.tokenUrl, scopes } } } } } : {}),
      ...(!sec.jwksUri ? { [OIDC_SCHEME_NAME]: { openIdConnectSecurityScheme: { openIdConnectUrl: `${sec.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration` } } } : {}),
    },
    requirements: [{ schemes: { [BEARER_SCHEME_NAME]: { list: [] } } }, ...(sec.tokenUrl ? [{ schemes: { [OAUTH2_SCHEME_NAME]: { list: sec.requiredScopes } } }] : [])],
  };
}

/**
 * The card's `securitySchemes` and `securityRequirements` (a2a.proto `AgentCard.security_requirements`, OpenAPI style: a list of alternatives,
 * any one of which satisfies) for the binding's security: `apiKey`, `jwt`, or each alternative of
 * `anyOf` in its order. An open binding (`none`) declares nothing, unless the card announces the
 * extended card, which needs an API key of the organization (A2AAccessService `required`): then
 * the key scheme is declared with an anonymous alternative first (`[{}, {apiKey}]`). Null when
 * there is nothing to declare.
 */
function cardSecurity(resolved: ResolvedA2AAgent, extendedCard: boolean): Pick<AgentCard, 'securitySchemes' | 'securityRequirements'> | null {
  const sec = resolved.binding.security;
  const alternatives: CredentialSecurity[] = sec.scheme === 'anyOf' ? sec.anyOf : sec.scheme === 'none' ? (extendedCard ? [{ scheme: 'apiKey' }] : []) : [sec];
  if (alternatives.length === 0) return null;
  const parts = alternatives.map((a) => credentialSecurity(resolved, a));
  return {
    securitySchemes: Object.assign({}, ...parts.map((p) => p.schemes)) as Record<string, SecurityScheme>,
    securityRequirements: [...(sec.scheme === 'none' ? [{ schemes: {} }] : []), ...parts.flatMap((p) => p.requirements)],
  };
}

/**
 * The fields a2a.proto marks REQUIRED on an AgentCard and its nested messages that are missing
 * or empty (§5.7: "Arrays marked as required MUST contain at least one element"), as paths.
 * Empty result = the card is structurally valid.
 */
export function missingRequiredCardFields(card: AgentCard): string[] {
  const missing: string[] = [];
  const str = (v: unknown) => typeof v === 'string' && v.length > 0;
  const arr = (v: unknown) => Array.isArray(v) && v.length > 0;
  if (!str(card.name)) missing.push('name');
  if (!str(card.description)) missing.push('description');
  if (!str(card.version)) missing.push('version');
  if (typeof card.capabilities !== 'object' || card.capabilities === null) missing.push('capabilities');
  if (!arr(card.defaultInputModes)) missing.push('defaultInputModes');
  if (!arr(card.defaultOutputModes)) missing.push('defaultOutputModes');
  if (!arr(card.supportedInterfaces)) missing.push('supportedInterfaces');
  card.supportedInterfaces?.forEach((i, n) => {
    for (const f of ['url', 'protocolBinding', 'protocolVersion'] as const) if (!str(i[f])) missing.push(`supportedInterfaces.${n}.${f}`);
  });
  if (!arr(card.skills)) missing.push('skills');
  card.skills?.forEach((s, n) => {
    for (const f of ['id', 'name', 'description'] as const) if (!str(s[f])) missing.push(`skills.${n}.${f}`);
    if (!arr(s.tags)) missing.push(`skills.${n}.tags`);
  });
  if (card.provider) for (const f of ['url', 'organization'] as const) if (!str(card.provider[f])) missing.push(`provider.${f}`);
  for (const [name, scheme] of Object.entries(card.securitySchemes ?? {})) {
    const k = scheme.apiKeySecurityScheme;
    if (k) for (const f of ['location', 'name'] as const) if (!str(k[f])) missing.push(`securitySchemes.${name}.apiKeySecurityScheme.${f}`);
  }
  return missing;
}

/** v0.3 AgentCard (spec/v0.3/a2a.json `AgentCard`), for callers that ask for `A2A-Version: 0.3`. */
export interface V03AgentCard {
  protocolVersion: '0.3.0';
  name: string;
  description: string;
  url: string;
  preferredTransport: 'JSONRPC';
  additionalInterfaces: Array<{ url: string; transport: string }>;
  version: string;
  provider?: { organization: string; url: string };
  documentationUrl?: string;
  iconUrl?: string;
  capabilities: { streaming: boolean; pushNotifications: boolean; extensions?: A2AExtension[] };
  securitySchemes?: Record<string, V03SecurityScheme>;
  security?: Array<Record<string, string[]>>;
  defaultInputModes: string[];
  defaultOutputModes: string[];
  skills: AgentSkill[];
  /** True exactly when the v1.0 card's `capabilities.extendedAgentCard` is: `agent/getAuthenticatedExtendedCard` serves it. */
  supportsAuthenticatedExtendedCard: boolean;
  /** JWS signatures of this card (v0.3 `AgentCardSignature`), added when it is served signed. */
  signatures?: Array<{ protected: string; signature: string; header?: Record<string, unknown> }>;
}

/**
 * The same card in the v0.3 shape (top-level `url` + `preferredTransport`, OpenAPI-style security
 * schemes), projected from the v1.0 card so both always agree. Only interfaces served in 0.3 are
 * listed. Returns null when no interface speaks 0.3.
 */
export function toV03AgentCard(card: AgentCard): V03AgentCard | null {
  const interfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
  const main = interfaces.find((i) => i.protocolBinding === 'JSONRPC');
  if (!main) return null;
  const schemes = v03SecuritySchemes(card);
  return {
    protocolVersion: '0.3.0',
    name: card.name,
    description: card.description,
    url: main.url,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: interfaces.map((i) => ({ url: i.url, transport: i.protocolBinding })),
    version: card.version,
    ...(card.provider ? { provider: { organization: card.provider.organization, url: card.provider.url } } : {}),
    ...(card.documentationUrl ? { documentationUrl: card.documentationUrl } : {}),
    ...(card.iconUrl ? { iconUrl: card.iconUrl } : {}),
    capabilities: {
      streaming: card.capabilities.streaming ?? false,
      pushNotifications: card.capabilities.pushNotifications ?? false,
      ...(card.capabilities.extensions ? { extensions: card.capabilities.extensions } : {}),
    },
    ...(schemes
      ? {
          securitySchemes: schemes,
          security: (card.securityRequirements ?? []).map((r) => Object.fromEntries(Object.entries(r.schemes).map(([name, v]) => [name, (v as { list?: string[] }).list ?? []]))),
        }
      : {}),
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills,
    supportsAuthenticatedExtendedCard: card.capabilities.extendedAgentCard === true,
  };
}

/** A v0.3 (OpenAPI-style) security scheme. */
export type V03SecurityScheme =
  | { type: 'apiKey'; in: 'header'; name: string; description?: string }
  | { type: 'http'; scheme: string; bearerFormat?: string; description?: string }
  | { type: 'oauth2'; flows: { clientCredentials: { tokenUrl: string; scopes: Record<string, string> } }; description?: string }
  | { type: 'openIdConnect'; openIdConnectUrl: string; description?: string };

/** The v1.0 card's security schemes in the v0.3 shape (null when there are none). */
function v03SecuritySchemes(card: AgentCard): Record<string, V03SecurityScheme> | null {
  const out: Record<string, V03SecurityScheme> = {};
  for (const [name, s] of Object.entries(card.securitySchemes ?? {})) {
    const d = (x: { description?: string }) => (x.description ? { description: x.description } : {});
    if (s.apiKeySecurityScheme) out[name] = { type: 'apiKey', in: 'header', name: s.apiKeySecurityScheme.name, ...d(s.apiKeySecurityScheme) };
    else if (s.httpAuthSecurityScheme) out[name] = { type: 'http', scheme: s.httpAuthSecurityScheme.scheme.toLowerCase(), ...(s.httpAuthSecurityScheme.bearerFormat ? { bearerFormat: s.httpAuthSecurityScheme.bearerFormat } : {}), ...d(s.httpAuthSecurityScheme) };
    else if (s.oauth2SecurityScheme) out[name] = { type: 'oauth2', flows: s.oauth2SecurityScheme.flows, ...d(s.oauth2SecurityScheme) };
    else if (s.openIdConnectSecurityScheme) out[name] = { type: 'openIdConnect', openIdConnectUrl: s.openIdConnectSecurityScheme.openIdConnectUrl, ...d(s.openIdConnectSecurityScheme) };
  }
  return Object.keys(out).length > 0 ? out : null;
}

/**
 * The authenticated extended Agent Card (A2A v1.0 §3.1.11): the public card with the revision's
 * `extendedCard` description and extra skills. Errors: UnsupportedOperation when the revision does
 * not declare `capabilities.extendedAgentCard`; ExtendedAgentCardNotConfigured when it declares it
 * without an `extendedCard`.
 */
export function projectExtendedAgentCard(resolved: ResolvedA2AAgent, publicBaseUrl: string, grpc?: ServedGrpc | null): AgentCard {
  const profile = resolved.revision.a2a;
  if (!profile.capabilities.extendedAgentCard) {
    throw new A2AError('UnsupportedOperation', 'this agent has no extended agent card (capabilities.extendedAgentCard is false)');
  }
  if (!profile.extendedCard) throw new A2AError('ExtendedAgentCardNotConfigured', 'this agent declares an extended agent card but has none configured');
  const card = projectAgentCard(resolved, publicBaseUrl, grpc);
  if (!card) throw new A2AError('UnsupportedOperation', 'this agent has no A2A transport this deployment serves');
  return {
    ...card,
    ...(profile.extendedCard.description ? { description: profile.extendedCard.description } : {}),
    skills: [...card.skills, ...profile.extendedCard.skillsProjection.map(skillOf)],
  };
}

/** A card skill from a profile skill (empty optional lists left out). */
function skillOf(s: A2AProfile['skillsProjection'][number]): AgentSkill {
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    tags: s.tags,
    ...(s.examples?.length ? { examples: s.examples } : {}),
    ...(s.inputModes?.length ? { inputModes: s.inputModes } : {}),
    ...(s.outputModes?.length ? { outputModes: s.outputModes } : {}),
  };
}
