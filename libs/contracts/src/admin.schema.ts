import { z } from 'zod';
import { A2AExtensionSchema, A2ATransportSchema, BindingSecuritySchema, ProtocolProfilesSchema } from './agent-profile.schema.js';
import { BlockedReasonSchema, RunKindSchema, RunStatusSchema } from './run-events.schema.js';
import { PartSchema } from './parts.schema.js';

/**
 * Admin REST API contracts (`/v1/...`): request bodies and queries (validated at the edge) and
 * response bodies (documented in OpenAPI). Timestamps in responses are ISO-8601 strings.
 * Request bodies are strict: an unknown field is a 422, so a typo never passes silently.
 */

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Organization and agent slugs: lowercase, URL-safe, 1..63 chars (they appear in A2A paths). */
export const SlugSchema = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'lowercase letters, digits and hyphens, 1..63 chars, not starting with a hyphen');

/** An agent slug must not look like a UUID: `:agent` path segments accept an id or a slug. */
export const AgentSlugSchema = SlugSchema.refine((s) => !UUID_RE.test(s), 'an agent slug must not have the form of a UUID');

/**
 * API key scopes. `platform`: may create organizations. `admin`: manages its own organization.
 * `a2a:invoke`: calls its organization's A2A bindings that require an API key (and sees the tasks
 * it created). `a2a:all-tasks`: over A2A, sees every task of the organization's agents, not only its
 * own (`admin` implies it).
 */
export const ApiKeyScopeSchema = z.enum(['platform', 'admin', 'a2a:invoke', 'a2a:all-tasks']);
export type ApiKeyScope = z.infer<typeof ApiKeyScopeSchema>;

const IsoDate = z.string().describe('ISO-8601 timestamp');
/** Only http(s) URLs reach a card (no javascript:, data:, file: …). */
const HttpUrl = z.url({ protocol: /^https?$/, error: 'an http(s) URL' }).max(2048);
const NullableUrl = HttpUrl.nullable();

// ------------------------------------------------------------------ organizations

export const CreateOrganizationSchema = z.strictObject({
  slug: SlugSchema,
  name: z.string().trim().min(1).max(200),
});
export type CreateOrganization = z.infer<typeof CreateOrganizationSchema>;

export const OrganizationSchema = z.object({ id: z.uuid(), slug: z.string(), name: z.string(), createdAt: IsoDate });
export type OrganizationResponse = z.infer<typeof OrganizationSchema>;

/** PUT /v1/organizations/{orgId}/storage-quota: bytes of messages and artifacts; null = the deployment default, 0 = unlimited. */
export const SetStorageQuotaSchema = z.strictObject({ storageQuotaBytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable() });
export type SetStorageQuota = z.infer<typeof SetStorageQuotaSchema>;

/** An organization's storage: bytes stored (messages and artifacts of its runs) and the quota in force (null = unlimited). */
export const StorageUsageSchema = z.object({
  orgId: z.uuid(),
  storedBytes: z.number().int().min(0),
  storageQuotaBytes: z.number().int().min(0).nullable(),
  quotaSource: z.enum(['organization', 'default']),
});
export type StorageUsageResponse = z.infer<typeof StorageUsageSchema>;

// ------------------------------------------------------------------ API keys

export const CreateApiKeySchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  scopes: z
    .array(ApiKeyScopeSchema)
    .min(1)
    .refine((s) => new Set(s).size === s.length, 'scopes must not repeat'),
});
export type CreateApiKey = z.infer<typeof CreateApiKeySchema>;

/**
 * When the key last authenticated a request; null until it has. Recorded at most about once a
 * minute per key, so it may lag the real last use by up to a minute.
 */
const LastUsedAt = IsoDate.nullable().describe('ISO-8601 timestamp of the last authenticated request (lags by up to 60 s), or null when never used');

/** An API key as listed: never carries the secret. */
export const ApiKeySchema = z.object({
  id: z.uuid(),
  name: z.string(),
  prefix: z.string(),
  scopes: z.array(ApiKeyScopeSchema),
  createdAt: IsoDate,
  revokedAt: IsoDate.nullable(),
  lastUsedAt: LastUsedAt,
});
export type ApiKeyResponse = z.infer<typeof ApiKeySchema>;

/** A freshly created key: `key` (`aaas_<prefix>_<secret>`) is shown this once and never again. */
export const CreatedApiKeySchema = z.object({
  id: z.uuid(),
  name: z.string(),
  key: z.string(),
  prefix: z.string(),
  scopes: z.array(ApiKeyScopeSchema),
  createdAt: IsoDate,
  /** Always null: the key has not been used yet. */
  lastUsedAt: LastUsedAt,
});
export type CreatedApiKeyResponse = z.infer<typeof CreatedApiKeySchema>;

export const ApiKeyListSchema = z.object({ apiKeys: z.array(ApiKeySchema) });

export const CreatedOrganizationSchema = OrganizationSchema.extend({
  /** The new organization's first key (scope `admin`), shown once. */
  adminKey: z.object({ id: z.uuid(), key: z.string(), prefix: z.string(), scopes: z.array(ApiKeyScopeSchema) }),
});
export type CreatedOrganizationResponse = z.infer<typeof CreatedOrganizationSchema>;

// ------------------------------------------------------------------ agents

/** A2A AgentProvider. */
export const AgentProviderSchema = z.strictObject({ organization: z.string().min(1).max(200), url: HttpUrl });

export const CreateAgentSchema = z.strictObject({
  slug: AgentSlugSchema,
  name: z.string().trim().min(1).max(200),
  description: z.string().trim().min(1).max(10_000),
  provider: AgentProviderSchema.nullable().optional(),
  documentationUrl: NullableUrl.optional(),
  iconUrl: NullableUrl.optional(),
  /** Serve this agent's card at the host root (one default agent per deployment). */
  isDefault: z.boolean().optional(),
});
export type CreateAgent = z.infer<typeof CreateAgentSchema>;

/** Identity fields and `isDefault`; `null` clears an optional field. The slug is fixed. */
export const UpdateAgentSchema = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().min(1).max(10_000),
    provider: AgentProviderSchema.nullable(),
    documentationUrl: NullableUrl,
    iconUrl: NullableUrl,
    isDefault: z.boolean(),
  })
  .partial()
  .refine((p) => Object.keys(p).length > 0, 'give at least one field');
export type UpdateAgent = z.infer<typeof UpdateAgentSchema>;

// ------------------------------------------------------------------ bindings

/** Transports a binding serves: a non-empty set. */
export const BindingTransportsSchema = z
  .array(A2ATransportSchema)
  .min(1)
  .refine((t) => new Set(t).size === t.length, 'transports must not repeat');

/** PUT: the whole binding (omitted fields take their defaults). */
export const PutA2ABindingSchema = z.strictObject({
  transports: BindingTransportsSchema.optional(),
  security: BindingSecuritySchema.optional(),
  extensions: z.array(A2AExtensionSchema).optional(),
  enabled: z.boolean().optional(),
});
export type PutA2ABinding = z.infer<typeof PutA2ABindingSchema>;

/** PATCH: only the given fields change (`{ enabled: false }` disables the binding). */
export const PatchA2ABindingSchema = PutA2ABindingSchema.refine((p) => Object.keys(p).length > 0, 'give at least one field');
export type PatchA2ABinding = z.infer<typeof PatchA2ABindingSchema>;

export const A2ABindingSchema = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  protocol: z.literal('a2a'),
  /** Mount path of the agent's A2A endpoints: `/a2a/<orgSlug>/<agentSlug>`. */
  path: z.string(),
  transports: z.array(A2ATransportSchema),
  security: BindingSecuritySchema,
  extensions: z.array(A2AExtensionSchema),
  enabled: z.boolean(),
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type A2ABindingResponse = z.infer<typeof A2ABindingSchema>;

/**
 * PUT /v1/agents/{agent}/bindings/a2a: the binding, with `warnings` — sentences for the operator
 * about settings they may not have meant ([] when none; an open binding, security `none`, warns
 * that anyone who can reach the service can call the agent).
 */
export const PutA2ABindingResponseSchema = A2ABindingSchema.extend({ warnings: z.array(z.string()) });
export type PutA2ABindingResponse = z.infer<typeof PutA2ABindingResponseSchema>;

export const AgentSchema = z.object({
  id: z.uuid(),
  slug: z.string(),
  name: z.string(),
  description: z.string(),
  provider: z.object({ organization: z.string(), url: z.string() }).nullable(),
  documentationUrl: z.string().nullable(),
  iconUrl: z.string().nullable(),
  isDefault: z.boolean(),
  activeRevisionId: z.uuid().nullable(),
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type AgentResponse = z.infer<typeof AgentSchema>;

/** GET /v1/agents/:agent also carries the A2A binding, when there is one. */
export const AgentDetailSchema = AgentSchema.extend({ binding: A2ABindingSchema.nullable() });
export type AgentDetailResponse = z.infer<typeof AgentDetailSchema>;

export const AgentListSchema = z.object({ agents: z.array(AgentSchema) });

// ------------------------------------------------------------------ revisions

/** A runtime config: `{ kind, ... }`, validated by the runtime owning `kind` (libs/runtimes). */
export const RuntimeConfigInputSchema = z.looseObject({ kind: z.string().min(1) });

export const CreateRevisionSchema = z.strictObject({
  protocolProfiles: ProtocolProfilesSchema,
  runtime: RuntimeConfigInputSchema,
});
export type CreateRevision = z.infer<typeof CreateRevisionSchema>;

export const UpdateRevisionSchema = z
  .strictObject({ protocolProfiles: ProtocolProfilesSchema, runtime: RuntimeConfigInputSchema })
  .partial()
  .refine((p) => Object.keys(p).length > 0, 'give at least one field');
export type UpdateRevision = z.infer<typeof UpdateRevisionSchema>;

export const RevisionStatusSchema = z.enum(['draft', 'published', 'retired']);
export type RevisionStatus = z.infer<typeof RevisionStatusSchema>;

export const RevisionSchema = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  number: z.int(),
  status: RevisionStatusSchema,
  protocolProfiles: ProtocolProfilesSchema,
  runtime: RuntimeConfigInputSchema,
  createdAt: IsoDate,
  publishedAt: IsoDate.nullable(),
  retiredAt: IsoDate.nullable(),
});
export type RevisionResponse = z.infer<typeof RevisionSchema>;

export const RevisionListSchema = z.object({ revisions: z.array(RevisionSchema) });

export const SetActiveRevisionSchema = z.strictObject({ revisionId: z.uuid() });
export type SetActiveRevision = z.infer<typeof SetActiveRevisionSchema>;

// ------------------------------------------------------------------ runs

/** Run statuses in a query string, comma-separated (`working,completed`): at least one. */
export const RunStatusListSchema = z
  .string()
  .transform((s) => s.split(',').filter((x) => x.length > 0))
  .pipe(z.array(RunStatusSchema).min(1));

/** Query of GET /v1/runs. `status` may list several statuses, comma-separated. */
export const ListRunsQuerySchema = z.strictObject({
  agentId: z.uuid().optional(),
  status: RunStatusListSchema.optional(),
  contextId: z.string().min(1).max(1000).optional(),
  /** Only runs of this kind: `execution` (A2A Tasks) or `reply` (direct replies, A2A Messages). */
  kind: RunKindSchema.optional(),
  /** `none` = not blocked on the caller; else blocked reasons, comma-separated (the interaction overlay). */
  blocked: z
    .string()
    .transform((s) => s.split(',').filter((x) => x.length > 0))
    .pipe(z.union([z.tuple([z.literal('none')]), z.array(BlockedReasonSchema).min(1)]))
    .optional(),
  /** Only runs whose status changed at or after this time (ISO 8601). */
  statusFrom: z.iso.datetime({ offset: true }).optional(),
  /** Only runs whose status changed at or before this time (ISO 8601). */
  statusTo: z.iso.datetime({ offset: true }).optional(),
  /** Full-text search of the runs' messages; needs `agentId` and combines with no other filter. */
  q: z.string().trim().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor: z.string().min(1).max(500).optional(),
});
export type ListRunsQuery = z.infer<typeof ListRunsQuerySchema>;

/** Query of GET /v1/runs/{runId}/events/stream; a `Last-Event-ID` header (the last sequence seen) wins over `after`. */
export const RunEventsStreamQuerySchema = z.strictObject({
  /** Stream events with sequence strictly greater than this. */
  after: z.coerce.number().int().min(0).default(0),
});
export type RunEventsStreamQuery = z.infer<typeof RunEventsStreamQuerySchema>;

/** Body of POST /v1/runs/{runId}/cancel. */
export const CancelRunBodySchema = z.strictObject({
  /** Recorded on the `run.status_changed` event; default "canceled by an operator". */
  reason: z.string().trim().min(1).max(500).optional(),
});
export type CancelRunBody = z.infer<typeof CancelRunBodySchema>;

export const RunSummarySchema = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  revisionId: z.uuid(),
  /** A2A contextId */
  contextId: z.string(),
  /** `execution`: a runtime executes it (A2A: a Task); `reply`: the runtime answered directly (A2A: a Message, no Task). */
  kind: RunKindSchema,
  status: RunStatusSchema,
  blockedReason: z.string().nullable(),
  lastSequence: z.int(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  createdAt: IsoDate,
  updatedAt: IsoDate,
  statusAt: IsoDate,
});
export type RunSummaryResponse = z.infer<typeof RunSummarySchema>;

export const RunListSchema = z.object({
  /** Newest status change first. */
  runs: z.array(RunSummarySchema),
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: z.string().nullable(),
});
export type RunListResponse = z.infer<typeof RunListSchema>;

/** An InteractionRequest with its whole request and response (audit). */
export const InteractionSchema = z.object({
  id: z.uuid(),
  kind: z.enum(['input', 'auth', 'confirmation']),
  blocking: z.boolean(),
  blockedReason: z.string().nullable(),
  /** open | resolved | rejected | expired | canceled */
  status: z.string(),
  /** The `interaction.requested` payload: prompt message, title, description, options, expiresAt, onExpire, origin. */
  request: z.record(z.string(), z.unknown()),
  /** The closing event's payload (decision, optionId, the answer message, submittedBy) with its `type` and `at`. */
  response: z.record(z.string(), z.unknown()).nullable(),
  expiresAt: IsoDate.nullable(),
  sequence: z.int(),
  createdAt: IsoDate,
  closedAt: IsoDate.nullable(),
});

/** GET /v1/interactions: the organization's InteractionRequests across runs, newest first. */
export const ListInteractionsQuerySchema = z.strictObject({
  /** Only this run's. */
  runId: z.uuid().optional(),
  /** Only those in this status (`open`: still waiting for an answer). */
  status: z.enum(['open', 'resolved', 'rejected', 'expired', 'canceled']).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
export type ListInteractionsQuery = z.infer<typeof ListInteractionsQuerySchema>;

export const InteractionListSchema = z.object({
  /** Newest first; each with the run it belongs to. */
  interactions: z.array(InteractionSchema.extend({ runId: z.uuid() })),
});
export type InteractionListResponse = z.infer<typeof InteractionListSchema>;

/** A RunLink seen from one end: the other run's id, agent and current status. */
export const RunLinkSchema = z.object({
  id: z.uuid(),
  kind: z.enum(['delegation', 'subtask', 'handoff']),
  parentRunId: z.uuid(),
  childRunId: z.uuid(),
  awaiting: z.boolean(),
  /** The parent's sequence of its `run.linked` event. */
  sequence: z.int(),
  createdAt: IsoDate,
  other: z.object({ runId: z.uuid(), agentId: z.uuid(), status: RunStatusSchema, blockedReason: z.string().nullable() }),
});

export const RunDetailSchema = z.object({
  run: RunSummarySchema.extend({ openInteractionId: z.string().nullable() }),
  /** Message of the newest status event (A2A TaskStatus.message). */
  statusMessage: z.unknown().nullable(),
  /** Messages, oldest first. */
  history: z.array(z.unknown()),
  artifacts: z.array(z.unknown()),
  /** Every InteractionRequest of the run, open and closed, oldest first. */
  interactions: z.array(InteractionSchema),
  /** RunLinks: runs this one delegated to (children) and runs that delegated to it (parents). */
  links: z.object({ children: z.array(RunLinkSchema), parents: z.array(RunLinkSchema) }),
});

/**
 * POST /v1/runs/{runId}/interactions/{interactionId}/responses: answer an interaction (the same
 * RespondInteractionCommand as an A2A message on the task). Give `text`, `parts` or `optionId`
 * (at least one); `messageId` defaults to a new UUID (send `Idempotency-Key` to retry safely).
 */
export const RespondInteractionBodySchema = z
  .strictObject({
    messageId: z.string().min(1).max(200).optional(),
    text: z.string().max(100_000).optional(),
    parts: z.array(PartSchema).min(1).max(100).optional(),
    optionId: z.string().min(1).max(64).optional(),
  })
  .refine((b) => b.text !== undefined || b.parts !== undefined || b.optionId !== undefined, { message: 'give text, parts or optionId' })
  .refine((b) => b.text === undefined || b.parts === undefined, { message: 'give text or parts, not both' });
export type RespondInteractionBody = z.infer<typeof RespondInteractionBodySchema>;
export type RunDetailResponse = z.infer<typeof RunDetailSchema>;

export const RunEventsQuerySchema = z.strictObject({
  /** Return events with sequence strictly greater than this. */
  after: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
export type RunEventsQuery = z.infer<typeof RunEventsQuerySchema>;

export const RunEventsSchema = z.object({
  /** SequencedOutputEnvelope[] in sequence order. */
  events: z.array(
    z.object({ runId: z.string(), threadId: z.string(), sequence: z.int(), occurredAt: IsoDate, event: z.object({ type: z.string(), payload: z.unknown() }) }),
  ),
  /** Pass as `after` to continue (the last sequence returned, or the given `after`). */
  nextAfter: z.int(),
});

// ------------------------------------------------------------------ errors

/** Every admin API error: `{ error: { code, message, details? }, requestId }`. */
export const ErrorResponseSchema = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
  requestId: z.string(),
});

// ------------------------------------------------------------------ signing keys

/** POST /v1/signing-keys: a new Agent Card signing key for the caller's organization. */
export const CreateSigningKeySchema = z.strictObject({ alg: z.enum(['ES256', 'EdDSA']).default('ES256') });
export type CreateSigningKey = z.infer<typeof CreateSigningKeySchema>;

export const SigningKeySchema = z.object({
  id: z.string(),
  kid: z.string(),
  alg: z.string(),
  status: z.enum(['active', 'retired']),
  /** The public key (JWK); the private key never leaves the service. */
  publicJwk: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
  retiredAt: z.string().nullable(),
});
export type SigningKeyResponse = z.infer<typeof SigningKeySchema>;
export const SigningKeyListSchema = z.object({ signingKeys: z.array(SigningKeySchema) });

// ------------------------------------------------------------------ push notification configs

/** GET /v1/runs/{id}/push-configs: each config with its delivery state and newest attempts. */
export const PushConfigListSchema = z.object({
  configs: z.array(
    z.object({
      configId: z.string(),
      runId: z.uuid(),
      url: z.string(),
      protocolVersion: z.enum(['1.0', '0.3']),
      /** active | failing | gone | done */
      status: z.string(),
      /** The last sequence delivered. */
      cursor: z.int(),
      lastError: z.string().nullable(),
      attempts: z.int(),
      nextAttemptAt: z.string(),
      createdAt: z.string(),
      deliveries: z.array(
        z.object({ sequence: z.int(), webhookId: z.string(), statusCode: z.int().nullable(), error: z.string().nullable(), latencyMs: z.int(), attemptedAt: z.string() }),
      ),
    }),
  ),
});
