import { z } from 'zod';

/** A2A v1.0 AgentSkill (a2a.proto `message AgentSkill`), as a revision declares it. */
export const A2ASkillSchema = z.object({
  id: z.string().min(1),
  name: z.string().min(1),
  description: z.string().min(1),
  tags: z.array(z.string()).min(1),
  examples: z.array(z.string()).optional(),
  inputModes: z.array(z.string()).optional(),
  outputModes: z.array(z.string()).optional(),
});

/** A2A v1.0 AgentExtension (a2a.proto `message AgentExtension`). */
export const A2AExtensionSchema = z.object({
  uri: z.string().min(1),
  description: z.string().optional(),
  required: z.boolean().optional(),
  params: z.record(z.string(), z.unknown()).optional(),
});
export type A2AExtension = z.infer<typeof A2AExtensionSchema>;

/**
 * `protocolProfiles.a2a` of an AgentRevision: how the revision presents itself over A2A.
 * The Agent Card is projected from this plus the Agent's identity and the binding
 * (libs/a2a card projection). Capabilities declared here are capped by what the deployment
 * actually serves (a card never advertises an operation we do not implement).
 */
export const A2AProfileSchema = z.object({
  /** Newest A2A version the revision speaks; the binding also serves 0.3 JSON-RPC. */
  protocolVersion: z.enum(['1.0']).default('1.0'),
  /** Overrides of the Agent's identity on the card; `version` is the card's `version`. */
  identityProjection: z
    .object({ name: z.string().min(1).optional(), description: z.string().min(1).optional(), version: z.string().min(1).default('1.0.0') })
    .default({ version: '1.0.0' }),
  /**
   * The card's `skills`. A2A requires at least one: given here, or taken at publish from a runtime
   * that suggests them (the `a2a` runtime with a `cardUrl`: the upstream card's skills).
   */
  skillsProjection: z.array(A2ASkillSchema).default([]),
  /**
   * The optional capabilities the revision exposes. `signedAgentCard` (AaaS A2A profile; no card
   * field of its own: the card carries `signatures`) asks for the card to be signed (A2A v1.0
   * §8.4) by every active signing key of the organization; a card whose profile does not declare
   * it is served unsigned, even when the organization has keys. Publishing it needs card signing
   * configured (SIGNING_KEY_ENCRYPTION_SECRET) and an active key of the organization.
   */
  capabilities: z
    .object({
      streaming: z.boolean().default(false),
      pushNotifications: z.boolean().default(false),
      extendedAgentCard: z.boolean().default(false),
      signedAgentCard: z.boolean().default(false),
    })
    .default({ streaming: false, pushNotifications: false, extendedAgentCard: false, signedAgentCard: false }),
  extensions: z.array(A2AExtensionSchema).default([]),
  /**
   * What the authenticated extended card (A2A v1.0 §3.1.11, `capabilities.extendedAgentCard`) adds
   * to the public one: its own description and more skills. Served only to authenticated callers.
   */
  extendedCard: z
    .object({ description: z.string().min(1).optional(), skillsProjection: z.array(A2ASkillSchema).default([]) })
    .optional(),
  defaultInputModes: z.array(z.string().min(1)).min(1).default(['text/plain']),
  defaultOutputModes: z.array(z.string().min(1)).min(1).default(['text/plain']),
});
export type A2AProfile = z.infer<typeof A2AProfileSchema>;

/** `protocolProfiles` of a revision: one entry per protocol (only A2A today). */
export const ProtocolProfilesSchema = z.object({ a2a: A2AProfileSchema });
export type ProtocolProfiles = z.infer<typeof ProtocolProfilesSchema>;

/**
 * A2A transports a binding can serve (A2A v1.0 AgentInterface.protocolBinding values). `GRPC` is
 * served only by API processes with a gRPC listener (GRPC_PORT); elsewhere it is left off the card.
 */
export const A2ATransportSchema = z.enum(['JSONRPC', 'HTTP+JSON', 'GRPC']);
export type A2ATransport = z.infer<typeof A2ATransportSchema>;

/** `apiKey`: an API key of the agent's organization (see BindingSecuritySchema). */
export const ApiKeySecuritySchema = z.object({ scheme: z.literal('apiKey') });

/**
 * HTTP bearer JWTs from an external issuer (OAuth2 / OIDC), verified with `jose`: signature by a
 * key of the issuer's JWKS (`jwksUri`, else its OIDC discovery document), `iss`, `aud`, `exp` /
 * `nbf`, and every `requiredScopes` entry in the `scope` (space separated) or `scp` claim. The
 * caller is `jwt:<iss>|<sub>`; scope `a2a:all-tasks` sees every task. `tokenUrl` advertises the
 * OAuth2 client-credentials flow on the card. `maxTokenLifetimeSeconds` (s, 60 to 2,592,000 =
 * 30 days, default 86,400 = 24 h): tokens must carry `exp`, and a lifetime (`exp - iat`, and
 * `exp - now`) longer than this is refused, so a leaked token cannot serve for years.
 */
export const JwtSecuritySchema = z.object({
  scheme: z.literal('jwt'),
  issuer: z.url({ protocol: /^https?$/ }).max(2048),
  audience: z.string().min(1).max(512),
  jwksUri: z.url({ protocol: /^https?$/ }).max(2048).optional(),
  requiredScopes: z.array(z.string().min(1).max(200)).max(20).default([]),
  tokenUrl: z.url({ protocol: /^https?$/ }).max(2048).optional(),
  maxTokenLifetimeSeconds: z.int().min(60).max(2_592_000).default(86_400),
});
export type JwtSecurity = z.infer<typeof JwtSecuritySchema>;

/** One credential scheme a binding accepts: an API key of the organization, or a JWT of an issuer. */
export const CredentialSecuritySchema = z.discriminatedUnion('scheme', [ApiKeySecuritySchema, JwtSecuritySchema]);
export type CredentialSecurity = z.infer<typeof CredentialSecuritySchema>;

/**
 * Who may call an A2A binding. `none`: anyone who can reach it. `apiKey`: an API key of the
 * agent's organization with scope `a2a:invoke` (or `admin`), in header `X-API-Key` or as
 * `Authorization: Bearer <key>`; projected on the card as an APIKeySecurityScheme. `jwt`: see
 * JwtSecuritySchema. `anyOf`: alternatives, any one of which satisfies (e.g. "an API key or a
 * JWT"): at most one of each kind, at least two; the card lists one security requirement per
 * alternative (A2A v1.0 `AgentCard.security_requirements`: a list of alternatives, OpenAPI style),
 * and the access check accepts a credential of any of them (an `X-API-Key`, or a bearer token shaped
 * like an API key, is checked as a key; another bearer token as a JWT).
 */
export const BindingSecuritySchema = z.discriminatedUnion('scheme', [
  z.object({ scheme: z.literal('none') }),
  ApiKeySecuritySchema,
  JwtSecuritySchema,
  z.object({
    scheme: z.literal('anyOf'),
    anyOf: z
      .array(CredentialSecuritySchema)
      .min(2)
      .max(2)
      .refine((alts) => new Set(alts.map((a) => a.scheme)).size === alts.length, 'at most one alternative of each scheme'),
  }),
]);
export type BindingSecurity = z.infer<typeof BindingSecuritySchema>;

/**
 * The optional A2A capabilities this deployment serves. A revision declaring one it does not
 * serve is refused at publish (`revision.unsupported_capability`), and cards never claim more.
 */
export const SERVED_A2A_CAPABILITIES = { streaming: true, pushNotifications: true, extendedAgentCard: true, signedAgentCard: true } as const;
