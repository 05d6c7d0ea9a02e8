import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiResponse, ApiSecurity, type ApiBodyOptions, type StandardSchemaConverter } from '@nestjs/swagger';
import { z } from 'zod';
import {
  ErrorResponseSchema,
  OPENAPI_SCHEMA_PREFIX,
  RunDetailSchema,
  RunEventsSchema,
  RuntimeConfigInputSchema,
  contractJsonSchemas,
  type OpenApiSchema,
} from '#libs/contracts';
import { OPEN_BINDING_WARNING } from '#libs/registry';

/**
 * OpenAPI of the admin API (`/v1`): security schemes, the zod → JSON Schema conversion with the
 * contract components, and an example for every request body and response. The examples are
 * checked against the documented schemas by test/openapi.test.ts.
 */

/** Name of the `X-API-Key` header scheme in `components.securitySchemes`. */
export const API_KEY_SCHEME = 'X-API-Key';
/** Name of the `Authorization: Bearer <API key>` scheme. */
export const BEARER_SCHEME = 'bearer';

export const API_KEY_SCHEME_DOC = {
  type: 'apiKey',
  in: 'header',
  name: 'X-API-Key',
  description: 'An API key of the organization (`aaas_<prefix>_<secret>`), in the X-API-Key header.',
} as const;

export const BEARER_SCHEME_DOC = {
  type: 'http',
  scheme: 'bearer',
  bearerFormat: 'API key',
  description:
    'The API key as a bearer token (not a JWT): `Authorization: Bearer aaas_<prefix>_<secret>`. Same keys and scopes as X-API-Key.',
} as const;

// ------------------------------------------------------------------ schemas

/**
 * Converts the contracts' zod schemas to OpenAPI 3.0 (SwaggerModule's `standardSchemaConverter`).
 * Two admin contracts carry JSON the admin layer does not parse itself — a revision's `runtime`
 * (`{ kind, ... }`, validated by the runtime owning `kind`) and the event log's entries — and are
 * documented by reference to the real schemas instead: `RuntimeConfig` and `SequencedOutputEnvelope`
 * (see contractJsonSchemas); a run's history and status message are `Message`s.
 */
export const contractSchemaConverter: StandardSchemaConverter = (schema, { schemaType }) => {
  if (!(schema instanceof z.ZodType)) return undefined;
  const refs = new Map<unknown, OpenApiSchema>([
    [RuntimeConfigInputSchema, ref('RuntimeConfig')],
    [ErrorResponseSchema, ref('ErrorResponse')],
    [RunEventsSchema.shape.events.element, ref('SequencedOutputEnvelope')],
    [RunDetailSchema.shape.history.element, ref('Message')],
    [RunDetailSchema.shape.statusMessage, { nullable: true, allOf: [ref('Message')] }],
  ]);
  const converted = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: schemaType,
    unrepresentable: 'any',
    override: (ctx) => {
      const replacement = refs.get(ctx.zodSchema);
      if (!replacement) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Record<string, unknown>)[key];
      Object.assign(ctx.jsonSchema, replacement);
    },
  }) as OpenApiSchema;
  const { $schema: _s, $defs, ...rest } = converted;
  return { schema: rest, components: { ...contractComponents(), ...(($defs as Record<string, OpenApiSchema> | undefined) ?? {}) } };
};

let components: Record<string, OpenApiSchema> | undefined;
/** The contract components, converted once per process. */
function contractComponents(): Record<string, OpenApiSchema> {
  components ??= contractJsonSchemas();
  return components;
}

function ref(name: string): OpenApiSchema {
  return { $ref: `${OPENAPI_SCHEMA_PREFIX}${name}` };
}

// ------------------------------------------------------------------ decorators

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'request.malformed: the body is not valid JSON',
  401: 'auth.missing_credentials / auth.invalid_credentials',
  403: 'auth.forbidden: the API key lacks the scope',
  404: 'not found in the caller\'s organization',
  409: 'conflict (see the error code)',
  413: 'the body or one of its lines is larger than its limit (see the error code and details)',
  422: 'request.invalid (details.issues) / idempotency.mismatch',
};

const REQUEST_ID = 'req-3f9c2a';
const ERROR_EXAMPLES: Record<number, unknown> = {
  400: { error: { code: 'request.malformed', message: 'the body is not valid JSON: Unexpected end of JSON input' }, requestId: REQUEST_ID },
  401: { error: { code: 'auth.missing_credentials', message: 'an API key is required (X-API-Key or Authorization: Bearer)' }, requestId: REQUEST_ID },
  403: { error: { code: 'auth.forbidden', message: 'the API key lacks the scope for this operation', details: { requiredScope: 'admin' } }, requestId: REQUEST_ID },
  404: { error: { code: 'agent.not_found', message: 'agent helper not found' }, requestId: REQUEST_ID },
  409: { error: { code: 'revision.immutable', message: 'revision 2 is published and cannot be modified' }, requestId: REQUEST_ID },
  413: { error: { code: 'archive.line_too_long', message: 'archive line 2 is longer than 16777216 bytes (ARCHIVE_IMPORT_MAX_LINE_BYTES)', details: { line: 2, maxLineBytes: 16777216 } }, requestId: REQUEST_ID },
  422: {
    error: { code: 'request.invalid', message: 'invalid request', details: { issues: [{ path: 'slug', message: 'lowercase letters, digits and hyphens, 1..63 chars, not starting with a hyphen' }] } },
    requestId: REQUEST_ID,
  },
};

/**
 * An admin route: either API key scheme, plus the error responses it can give
 * (`{ error: { code, message, details? }, requestId }`), each with an example.
 */
export function AdminRoute(...statuses: number[]): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiSecurity(API_KEY_SCHEME),
    ApiBearerAuth(BEARER_SCHEME),
    ...[401, 403, ...statuses].map((status) =>
      ApiResponse({ status, description: ERROR_DESCRIPTIONS[status] ?? 'error', standardSchema: ErrorResponseSchema, example: ERROR_EXAMPLES[status] }),
    ),
  );
}

/**
 * Examples of a route's request body (merged with the body schema that `@Body({ schema })`
 * documents). The first is the one Swagger UI pre-fills.
 */
export function RequestExamples(examples: Record<string, { summary: string; value: unknown }>): MethodDecorator {
  return ApiBody({ required: true, examples } as ApiBodyOptions);
}

// ------------------------------------------------------------------ examples

const ORG_ID = '5b0e8c3a-2f4d-4c61-9a57-1d2e3f4a5b6c';
const AGENT_ID = '8f14e45f-ceea-467f-a0f6-7c1a2b3c4d5e';
const REVISION_ID = 'c9f0f895-fb98-4b91-8f0e-3d4c5b6a7980';
const BINDING_ID = '45c48cce-2e2d-4fbd-9a1c-0e2f3a4b5c6d';
const RUN_ID = 'd3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a';
const THREAD_ID = '6512bd43-d9ca-4a6e-8b1f-2c3d4e5f6a7b';
const KEY_ID = 'a87ff679-a2f3-4e71-9181-a67b7542122c';
const INTERACTION_ID = 'e4da3b7f-bbce-4345-8777-2b0674a318d5';
const T0 = '2026-05-04T09:15:00.000Z';
const T1 = '2026-05-04T09:15:01.250Z';

const SKILL = { id: 'echo', name: 'Echo', description: 'Repeats what it is told', tags: ['demo'], examples: ['hi there'] };

const SCRIPTED_RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'greet', match: { text: '^hi', flags: 'i' }, steps: [{ type: 'reply', text: 'hello!' }] },
    {
      name: 'weather',
      match: { text: 'weather' },
      steps: [
        { type: 'status', status: 'working', message: 'Looking it up' },
        { type: 'interaction', kind: 'input', text: 'Which city?' },
        { type: 'artifact', name: 'forecast', content: { text: 'Sunny in {{input}}' }, chunks: 2 },
        { type: 'status', status: 'completed' },
      ],
    },
  ],
};
const HTTP_RUNTIME = { kind: 'http', url: 'https://agents.example.com/run', secret: 'helper-webhook', timeoutMs: 30000, retries: 1 };
const RUNTIME_SECRET = { name: 'helper-webhook', version: 1, createdAt: T0, updatedAt: T0 };

const PROFILES_INPUT = { a2a: { skillsProjection: [SKILL], capabilities: { streaming: true } } };
const PROFILES = {
  a2a: {
    protocolVersion: '1.0',
    identityProjection: { version: '1.0.0' },
    skillsProjection: [SKILL],
    capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false, signedAgentCard: false },
    extensions: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
  },
};

const ORGANIZATION = { id: ORG_ID, slug: 'acme', name: 'Acme Corp', createdAt: T0 };
const API_KEY = { id: KEY_ID, name: 'ci', prefix: 'Xq2Lk3y9', scopes: ['a2a:invoke'], createdAt: T0, revokedAt: null, lastUsedAt: T1 };
const AGENT = {
  id: AGENT_ID,
  slug: 'helper',
  name: 'Helper',
  description: 'Helps with the weather',
  provider: { organization: 'Acme Corp', url: 'https://acme.example.com' },
  documentationUrl: 'https://docs.example.com/helper',
  iconUrl: null,
  isDefault: false,
  activeRevisionId: REVISION_ID,
  createdAt: T0,
  updatedAt: T1,
};
const BINDING = {
  id: BINDING_ID,
  agentId: AGENT_ID,
  protocol: 'a2a',
  path: '/a2a/acme/helper',
  transports: ['JSONRPC', 'HTTP+JSON'],
  security: { scheme: 'apiKey' },
  extensions: [],
  enabled: true,
  createdAt: T0,
  updatedAt: T1,
};
const REVISION = {
  id: REVISION_ID,
  agentId: AGENT_ID,
  number: 1,
  status: 'draft',
  protocolProfiles: PROFILES,
  runtime: SCRIPTED_RUNTIME,
  createdAt: T0,
  publishedAt: null,
  retiredAt: null,
};
const SIGNING_KEY = {
  id: '1679091c-5a88-4faf-8b1e-3c4d5e6f7a8b',
  kid: 'acme-2026-05-04-ed25519',
  alg: 'EdDSA',
  status: 'active',
  publicJwk: { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'acme-2026-05-04-ed25519', alg: 'EdDSA', use: 'sig' },
  createdAt: T0,
  retiredAt: null,
};

const USER_MESSAGE = { messageId: 'm-1', role: 'user', parts: [{ text: 'What is the weather?' }] };
const PROMPT = { messageId: 'm-2', role: 'agent', parts: [{ text: 'Which city?' }] };
const ANSWER = { messageId: 'm-3', role: 'user', parts: [{ text: 'Paris' }] };
const RUN_SUMMARY = {
  id: RUN_ID,
  agentId: AGENT_ID,
  revisionId: REVISION_ID,
  contextId: THREAD_ID,
  kind: 'execution',
  status: 'completed',
  blockedReason: null,
  lastSequence: 9,
  metadata: null,
  createdAt: T0,
  updatedAt: T1,
  statusAt: T1,
};
const INTERACTION = {
  id: INTERACTION_ID,
  kind: 'input',
  blocking: true,
  blockedReason: 'input_required',
  status: 'resolved',
  request: { message: PROMPT, origin: 'scripted' },
  response: { type: 'interaction.responded', at: T1, decision: 'answered', message: ANSWER, submittedBy: KEY_ID },
  expiresAt: null,
  sequence: 3,
  createdAt: T0,
  closedAt: T1,
};
const RUN_DETAIL = {
  run: { ...RUN_SUMMARY, openInteractionId: null },
  statusMessage: null,
  history: [USER_MESSAGE, PROMPT, ANSWER],
  artifacts: [{ artifactId: 'forecast-1', name: 'forecast', parts: [{ text: 'Sunny in Paris' }], complete: true }],
  interactions: [INTERACTION],
  links: { children: [], parents: [] },
};

const envelope = (sequence: number, event: unknown) => ({ runId: RUN_ID, threadId: THREAD_ID, sequence, occurredAt: T0, event });
const RUN_EVENTS = {
  events: [
    envelope(1, { type: 'run.created', payload: { runId: RUN_ID, threadId: THREAD_ID, agentId: AGENT_ID, revisionId: REVISION_ID, status: 'submitted' } }),
    envelope(2, { type: 'message.added', payload: { message: USER_MESSAGE } }),
    envelope(3, { type: 'run.status_changed', payload: { status: 'working', blockedReason: null } }),
    envelope(4, {
      type: 'interaction.requested',
      payload: { interactionId: INTERACTION_ID, kind: 'input', blockedReason: 'input_required', blocking: true, message: PROMPT, origin: 'scripted' },
    }),
    envelope(5, { type: 'interaction.responded', payload: { interactionId: INTERACTION_ID, blocking: true, decision: 'answered', message: ANSWER, submittedBy: KEY_ID } }),
    envelope(6, { type: 'artifact.updated', payload: { artifactId: 'forecast-1', name: 'forecast', parts: [{ text: 'Sunny ' }], append: false, lastChunk: false } }),
    envelope(7, { type: 'artifact.updated', payload: { artifactId: 'forecast-1', parts: [{ text: 'in Paris' }], append: true, lastChunk: true } }),
    envelope(8, { type: 'run.status_changed', payload: { status: 'completed', blockedReason: null } }),
  ],
  nextAfter: 8,
};

/** Request and response examples of every admin route, by route. */
export const ADMIN_EXAMPLES = {
  createOrganization: {
    request: { acme: { summary: 'A new organization', value: { slug: 'acme', name: 'Acme Corp' } } },
    response: { ...ORGANIZATION, adminKey: { id: KEY_ID, key: 'aaas_Xq2Lk3y9_4fJ8pQ1zR7tV2wY5bN0mC3xK6hG9dS2aE', prefix: 'Xq2Lk3y9', scopes: ['admin'] } },
  },
  organization: ORGANIZATION,
  createApiKey: {
    request: {
      invoke: { summary: 'A key that calls the organization\'s agents', value: { name: 'ci', scopes: ['a2a:invoke'] } },
      admin: { summary: 'An admin key that also sees every task over A2A', value: { name: 'ops', scopes: ['admin', 'a2a:all-tasks'] } },
    },
    response: { id: KEY_ID, name: 'ci', key: 'aaas_Xq2Lk3y9_4fJ8pQ1zR7tV2wY5bN0mC3xK6hG9dS2aE', prefix: 'Xq2Lk3y9', scopes: ['a2a:invoke'], createdAt: T0, lastUsedAt: null },
  },
  apiKeys: { apiKeys: [API_KEY] },
  createAgent: {
    request: {
      helper: {
        summary: 'An agent',
        value: { slug: 'helper', name: 'Helper', description: 'Helps with the weather', provider: { organization: 'Acme Corp', url: 'https://acme.example.com' }, documentationUrl: 'https://docs.example.com/helper' },
      },
      default: { summary: "The deployment's default agent (platform scope)", value: { slug: 'echo', name: 'Echo', description: 'Echoes', isDefault: true } },
    },
    response: { ...AGENT, activeRevisionId: null, updatedAt: T0 },
  },
  agents: { agents: [AGENT] },
  agent: { ...AGENT, binding: BINDING },
  updateAgent: {
    request: {
      describe: { summary: 'Change the description', value: { description: 'Helps with the weather, anywhere' } },
      clear: { summary: 'Clear an optional field', value: { documentationUrl: null } },
    },
    response: { ...AGENT, description: 'Helps with the weather, anywhere' },
  },
  setActiveRevision: {
    request: { activate: { summary: 'Serve revision 1', value: { revisionId: REVISION_ID } } },
    response: AGENT,
  },
  createRevision: {
    request: {
      scripted: { summary: 'A scripted agent (replies, asks, streams an artifact)', value: { protocolProfiles: PROFILES_INPUT, runtime: SCRIPTED_RUNTIME } },
      http: { summary: 'A backend behind the http runtime', value: { protocolProfiles: PROFILES_INPUT, runtime: HTTP_RUNTIME } },
    },
    response: REVISION,
  },
  revisions: { revisions: [{ ...REVISION, status: 'published', publishedAt: T1 }] },
  revision: REVISION,
  updateRevision: {
    request: { runtime: { summary: 'Replace the runtime of a draft', value: { runtime: HTTP_RUNTIME } } },
    response: { ...REVISION, runtime: HTTP_RUNTIME },
  },
  publishRevision: { ...REVISION, status: 'published', publishedAt: T1 },
  retireRevision: { ...REVISION, number: 1, status: 'retired', publishedAt: T0, retiredAt: T1 },
  putBinding: {
    request: {
      apiKey: { summary: 'Both transports, callers need an API key', value: { transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'apiKey' } } },
      jwt: {
        summary: 'JWTs from an OAuth2 / OIDC issuer, living at most 1 h (exp required; default maximum 24 h)',
        value: { transports: ['JSONRPC'], security: { scheme: 'jwt', issuer: 'https://auth.example.com/', audience: 'https://agents.example.com', requiredScopes: ['agents:call'], maxTokenLifetimeSeconds: 3600 } },
      },
      open: { summary: 'Open to anyone who can reach it', value: { security: { scheme: 'none' } } },
      apiKeyOrJwt: {
        summary: 'Alternatives: an API key of the organization or a JWT of the issuer (any one satisfies; the card lists both)',
        value: { security: { scheme: 'anyOf', anyOf: [{ scheme: 'apiKey' }, { scheme: 'jwt', issuer: 'https://auth.example.com/', audience: 'https://agents.example.com', requiredScopes: [], maxTokenLifetimeSeconds: 3600 }] } },
      },
    },
    response: { ...BINDING, warnings: [] },
    openResponse: { ...BINDING, security: { scheme: 'none' }, warnings: [OPEN_BINDING_WARNING] },
  },
  patchBinding: {
    request: { disable: { summary: 'Take the agent offline', value: { enabled: false } } },
    response: { ...BINDING, enabled: false },
  },
  binding: BINDING,
  runs: { runs: [RUN_SUMMARY], nextCursor: 'eyJzIjoiMjAyNi0wNS0wNFQwOToxNTowMS4yNTBaIiwiaSI6ImQzZDk0NDY4In0' },
  run: RUN_DETAIL,
  respondInteraction: {
    request: {
      text: { summary: 'Answer with text', value: { text: 'Paris' } },
      option: { summary: 'Choose an option of a confirmation', value: { optionId: 'approve' } },
      parts: { summary: 'Answer with parts', value: { messageId: 'm-3', parts: [{ data: { city: 'Paris' } }] } },
    },
    response: RUN_DETAIL,
  },
  pushConfigs: {
    configs: [
      {
        configId: 'cfg-1',
        runId: RUN_ID,
        url: 'https://client.example.com/a2a/push',
        protocolVersion: '1.0',
        status: 'done',
        cursor: 8,
        lastError: null,
        attempts: 0,
        nextAttemptAt: T1,
        createdAt: T0,
        deliveries: [{ sequence: 8, webhookId: 'msg_2f1e4c', statusCode: 200, error: null, latencyMs: 42, attemptedAt: T1 }],
      },
    ],
  },
  runEvents: RUN_EVENTS,
  interactions: { interactions: [{ ...INTERACTION, runId: RUN_ID, status: 'open', response: null, closedAt: null }] },
  createSigningKey: {
    request: { eddsa: { summary: 'An Ed25519 key', value: { alg: 'EdDSA' } }, es256: { summary: 'A P-256 key', value: { alg: 'ES256' } } },
    response: SIGNING_KEY,
  },
  signingKeys: { signingKeys: [SIGNING_KEY] },
  retireSigningKey: { ...SIGNING_KEY, status: 'retired', retiredAt: T1 },
  createRuntimeSecret: {
    request: {
      webhook: { summary: "An http runtime's Standard Webhooks signing key", value: { name: 'helper-webhook', value: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } },
      token: { summary: "An a2a runtime's upstream bearer token", value: { name: 'upstream-token', value: 'tok_3b1f9c2e7a' } },
    },
    response: RUNTIME_SECRET,
  },
  runtimeSecrets: { runtimeSecrets: [{ ...RUNTIME_SECRET, version: 2, updatedAt: T1 }] },
  rotateRuntimeSecret: {
    request: { rotate: { summary: 'A new value (version + 1)', value: { value: 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD' } } },
    response: { ...RUNTIME_SECRET, version: 2, updatedAt: T1 },
  },
} as const;
