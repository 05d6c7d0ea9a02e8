import { z } from 'zod';
import { CanonicalMessageSchema, PartSchema } from './parts.schema.js';
import { InteractionExpiryOutcomeSchema, InteractionKindSchema, RunLinkKindSchema } from './run-events.schema.js';

/**
 * Runtime configs: the `runtime` object of an agent revision, discriminated by `kind`.
 * Each kind is validated by its runtime (libs/runtimes) at draft/publish time.
 */

/** Placeholder in `text` fields of scripted steps, replaced by the input message's text. */
export const SCRIPTED_INPUT_PLACEHOLDER = '{{input}}';

/**
 * Which input messages a rule answers. Every given matcher must match (at least one is given).
 * - `text`: a regular expression with RE2 semantics (linear-time matching: no backreferences or
 *   lookaround; flags `i`, `m`, `s`), tested against the concatenated text of the input's text
 *   parts. The scripted runtime validates it when a revision is drafted.
 * - `messageIdPrefix`: the input's `messageId` starts with it.
 */
export const ScriptedMatchSchema = z
  .strictObject({
    text: z.string().optional(),
    flags: z.string().optional(),
    messageIdPrefix: z.string().min(1).optional(),
  })
  .superRefine((m, ctx) => {
    if (m.text === undefined && m.messageIdPrefix === undefined) {
      ctx.addIssue({ code: 'custom', message: 'a match needs at least one of text, messageIdPrefix' });
    }
    if (m.flags !== undefined && m.text === undefined) {
      ctx.addIssue({ code: 'custom', path: ['flags'], message: 'flags apply to text only' });
    }
  });

/** Statuses a `status` step may set; the last two block the run on its caller. */
export const ScriptedStatusSchema = z.enum([
  'working',
  'completed',
  'failed',
  'rejected',
  'input-required',
  'auth-required',
]);
export type ScriptedStatus = z.infer<typeof ScriptedStatusSchema>;

/** Text (with `{{input}}`) or explicit parts: exactly one of the two. */
const exactlyTextOrParts = [
  (s: { text?: string; parts?: unknown[] }) => (s.text === undefined) !== (s.parts === undefined),
  { message: 'give exactly one of text, parts' },
] as const;

/** Content of an `artifact` step: exactly one of these shapes. */
export const ScriptedArtifactContentSchema = z.union([
  z.strictObject({ text: z.string() }),
  z.strictObject({ bytesBase64: z.base64(), mediaType: z.string().optional(), filename: z.string().optional() }),
  z.strictObject({ url: z.url(), mediaType: z.string().optional(), filename: z.string().optional() }),
  z.strictObject({ data: z.unknown() }).refine((c) => 'data' in c, { message: 'data is required' }),
]);
export type ScriptedArtifactContent = z.infer<typeof ScriptedArtifactContentSchema>;

/** URI of the built-in working sub-states extension (libs/extensions); the `substate` step writes its metadata. */
export const SUBSTATES_EXTENSION_URI = 'https://aaas.dev/extensions/substates/v1';

/** Placeholder in `text` fields after a `delegate` step: the child run's result as text. */
export const SCRIPTED_RESULT_PLACEHOLDER = '{{result}}';

/** Longest expiry a scripted interaction may declare (ms): 7 days. */
export const SCRIPTED_INTERACTION_MAX_EXPIRY_MS = 7 * 24 * 3600 * 1000;

/**
 * An `interaction` step: open an InteractionRequest and, when it blocks (the default), end this
 * execution; the answer (or an expiry with `onExpire: continue`) resumes the script right here:
 * first the steps of the matching branch, then the steps after this one. Branch keys, tried in
 * order: the chosen option's id, the decision (`approved`, `rejected`, `answered`), `expired`.
 */
export interface ScriptedInteractionStep {
  type: 'interaction';
  kind: 'input' | 'auth' | 'confirmation';
  /** The prompt (`{{input}}`, `{{result}}` allowed); default: title / description. */
  text?: string;
  title?: string;
  description?: string;
  options?: Array<{ id: string; label: string; kind?: 'approve' | 'reject' | 'other' }>;
  blocking?: boolean;
  expiresInMs?: number;
  onExpire?: 'fail' | 'continue';
  branches?: Record<string, ScriptedStep[]>;
}

/**
 * One step of a scripted rule, run in order by the scripted runtime:
 * - `status`: set the run's status, optionally with an agent message (`{{input}}` allowed);
 *   `input-required` / `auth-required` ask the caller and end this execution (the answer selects
 *   a rule again).
 * - `message`: emit an agent message from `text` (`{{input}}` allowed) or from `parts`, with
 *   optional `metadata` (e.g. an extension's data under its URI).
 * - `artifact`: emit an artifact (text content may use `{{input}}`), in `chunks` pieces (default 1) with append/lastChunk set;
 *   text is split by code points, bytes by decoded bytes; `url`/`data` cannot be chunked.
 *   `artifactId` defaults to a fresh UUID per execution.
 * - `wait`: sleep `ms` milliseconds (0..600000); cut short by cancellation.
 * - `holdUntilCanceled`: keep the run open until it is canceled.
 * - `reply`: answer with a message only and create no task; must be its rule's only step.
 * - `interaction`: see ScriptedInteractionStep.
 * - `substate`: a working status update whose message (`text`, default the state) carries
 *   `metadata["${SUBSTATES_EXTENSION_URI}"] = { state }` (the working sub-states extension).
 * - `delegate`: hand `text` (default `{{input}}`) to the published agent `agent` of the same
 *   organization as a child run (RunLink of `kind`) and end this execution; when the child
 *   settles the script resumes after this step. A completed child's artifacts are adopted
 *   (`adopt`, default true) and its result is `{{result}}`; a child that did not complete fails
 *   this run (`onFailure: fail`, the default) or the script goes on (`continue`).
 */
export type ScriptedStep =
  | { type: 'status'; status: ScriptedStatus; message?: string }
  | { type: 'message'; text?: string; parts?: z.infer<typeof PartSchema>[]; metadata?: Record<string, unknown> }
  | { type: 'artifact'; artifactId?: string; name?: string; description?: string; content: ScriptedArtifactContent; chunks?: number }
  | { type: 'wait'; ms: number }
  | { type: 'holdUntilCanceled' }
  | { type: 'reply'; text?: string; parts?: z.infer<typeof PartSchema>[] }
  | ScriptedInteractionStep
  | { type: 'delegate'; agent: string; text?: string; kind?: 'delegation' | 'subtask' | 'handoff'; onFailure?: 'fail' | 'continue'; adopt?: boolean }
  | { type: 'substate'; state: string; text?: string };

const InteractionStepSchema = z.strictObject({
  type: z.literal('interaction'),
  kind: InteractionKindSchema,
  text: z.string().optional(),
  title: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  options: z
    .array(z.strictObject({ id: z.string().min(1).max(64), label: z.string().min(1).max(200), kind: z.enum(['approve', 'reject', 'other']).optional() }))
    .min(1)
    .max(20)
    .optional(),
  blocking: z.boolean().optional(),
  expiresInMs: z.int().min(1).max(SCRIPTED_INTERACTION_MAX_EXPIRY_MS).optional(),
  onExpire: InteractionExpiryOutcomeSchema.optional(),
  branches: z.record(z.string().min(1), z.array(z.lazy((): z.ZodType<ScriptedStep> => ScriptedStepSchema)).min(1)).optional(),
});

export const ScriptedStepSchema: z.ZodType<ScriptedStep> = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('status'),
    status: ScriptedStatusSchema,
    message: z.string().optional(),
  }),
  z
    .strictObject({
      type: z.literal('message'),
      text: z.string().optional(),
      parts: z.array(PartSchema).min(1).optional(),
      /** Message metadata, e.g. an extension's data under its URI. */
      metadata: z.record(z.string(), z.unknown()).optional(),
    })
    .refine(...exactlyTextOrParts),
  z
    .strictObject({
      type: z.literal('artifact'),
      artifactId: z.string().min(1).optional(),
      name: z.string().optional(),
      description: z.string().optional(),
      content: ScriptedArtifactContentSchema,
      chunks: z.int().min(1).optional(),
    })
    .refine((s) => (s.chunks ?? 1) === 1 || 'text' in s.content || 'bytesBase64' in s.content, {
      path: ['chunks'],
      message: 'only text and bytesBase64 content can be chunked',
    }),
  z.strictObject({ type: z.literal('wait'), ms: z.int().min(0).max(600_000) }),
  z.strictObject({ type: z.literal('holdUntilCanceled') }),
  z
    .strictObject({
      type: z.literal('reply'),
      text: z.string().optional(),
      parts: z.array(PartSchema).min(1).optional(),
    })
    .refine(...exactlyTextOrParts),
  InteractionStepSchema,
  z.strictObject({ type: z.literal('substate'), state: z.string().regex(/^[a-z][a-z0-9-]{0,63}$/), text: z.string().optional() }),
  z.strictObject({
    type: z.literal('delegate'),
    agent: z.string().min(1).max(200),
    text: z.string().optional(),
    kind: RunLinkKindSchema.optional(),
    onFailure: z.enum(['fail', 'continue']).optional(),
    adopt: z.boolean().optional(),
  }),
]);

/** True when nothing can run after `step` in the same rule (not even on a resumption). */
export function endsScriptedExecution(step: ScriptedStep): boolean {
  return step.type === 'holdUntilCanceled' || step.type === 'reply' || (step.type === 'status' && step.status !== 'working');
}

/** Issues of a step list: unreachable steps, replies and misplaced branches, recursively. */
function checkSteps(steps: readonly ScriptedStep[], path: Array<string | number>, ctx: z.RefinementCtx, top: boolean): void {
  if (!top && steps.some((s) => s.type === 'reply')) {
    ctx.addIssue({ code: 'custom', path, message: 'a reply step cannot be in a branch' });
  }
  const end = steps.findIndex(endsScriptedExecution);
  if (end !== -1 && end < steps.length - 1) {
    ctx.addIssue({ code: 'custom', path: [...path, end + 1], message: `unreachable step: step ${end} (${steps[end]!.type}) ends the execution` });
  }
  steps.forEach((step, i) => {
    if (step.type !== 'interaction' || !step.branches) return;
    if (step.blocking === false) {
      ctx.addIssue({ code: 'custom', path: [...path, i, 'branches'], message: 'a non-blocking interaction cannot branch (nothing waits for its answer)' });
    }
    for (const [key, branch] of Object.entries(step.branches)) checkSteps(branch, [...path, i, 'branches', key], ctx, false);
  });
}

/**
 * A rule: when `match` matches the input message, its `steps` run. Steps after one that ends the
 * execution (terminal status, input-/auth-required, holdUntilCanceled) are rejected as unreachable.
 */
export const ScriptedRuleSchema = z
  .strictObject({
    name: z.string().optional(),
    match: ScriptedMatchSchema,
    steps: z.array(ScriptedStepSchema).min(1),
  })
  .superRefine((rule, ctx) => {
    if (rule.steps.length > 1 && rule.steps.some((s) => s.type === 'reply')) {
      ctx.addIssue({
        code: 'custom',
        path: ['steps'],
        message: 'a rule with a reply step must have only that step (a reply creates no task to run steps in)',
      });
      return;
    }
    checkSteps(rule.steps, ['steps'], ctx, true);
  });
export type ScriptedRule = z.infer<typeof ScriptedRuleSchema>;

/**
 * Config of the `scripted` runtime (the embedded demo/test agent). Among the rules that match the
 * input, the longest match answers (ties: the earlier rule); when none matches, `defaultRule` does
 * (`echo`: working, echo the input, completed).
 */
export const ScriptedRuntimeConfigSchema = z.strictObject({
  kind: z.literal('scripted'),
  rules: z.array(ScriptedRuleSchema).default([]),
  defaultRule: z.literal('echo').default('echo'),
});
export type ScriptedRuntimeConfig = z.infer<typeof ScriptedRuntimeConfigSchema>;

/** A runtime secret's name in its organization (`POST /v1/runtime-secrets`). */
export const RuntimeSecretNameSchema = z.string().regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, 'a runtime secret name (letters, digits, _ and -, 1..64 chars, starting with a letter)');

/**
 * A worker environment variable holding a secret: accepted only inside the revision's own
 * organization's namespace `AAAS_RUNTIME_SECRET_<ORG>_<NAME>` (<ORG>: the organization's id
 * without dashes, upper-cased, or a token RUNTIME_SECRET_ENV_NAMESPACES maps to it; a legacy
 * slug form only where no other organization could claim the name — docs/runtimes.md), checked by
 * the registry at draft and publish and by the worker at every run (`runtime.secret_not_allowed`).
 * The shape alone is checked here.
 */
const SecretEnvSchema = z.string().regex(/^[A-Z][A-Z0-9_]{0,127}$/, 'an environment variable name (A-Z, 0-9, _)');

/** Exactly one of `secret`, `secretEnv`: a zod check and the JSON Schema that documents it. */
const ONE_SECRET = { message: 'give exactly one of secret (a runtime secret of the organization) or secretEnv' };
const oneSecret = (c: { secret?: string; secretEnv?: string }) => (c.secret === undefined) !== (c.secretEnv === undefined);
const ONE_SECRET_JSON = { oneOf: [{ required: ['secret'] }, { required: ['secretEnv'] }] };

/**
 * Config of the `http` runtime: each execution POSTs the run to `url`, signed with Standard
 * Webhooks under a secret that is never stored in a revision: `secret` names a runtime secret of
 * the organization (stored encrypted, `POST /v1/runtime-secrets`); or, set by the operator,
 * `secretEnv` names a worker variable in the organization's namespace
 * `AAAS_RUNTIME_SECRET_<ORG>_<NAME>`. Exactly one of them. The backend's answer is applied as
 * runtime operations (see HttpRuntimeRequest / HttpRuntimeOperationSchema, docs/runtimes.md).
 * `timeoutMs` bounds one attempt; `retries` more attempts are made only before any operation was
 * applied; on cancel the request is aborted and `cancelUrl` (if any) is told. `resumable` (default
 * true): an execution lost with its worker is POSTed again with trigger `resumed` (what the log
 * holds, see HttpRuntimeRequest); false: the backend cannot resume, the run fails instead.
 */
export const HttpRuntimeConfigSchema = z
  .strictObject({
    kind: z.literal('http'),
    url: z.url({ protocol: /^https?$/ }).max(2048),
    secret: RuntimeSecretNameSchema.optional(),
    secretEnv: SecretEnvSchema.optional(),
    timeoutMs: z.int().min(1000).max(600_000).default(60_000),
    retries: z.int().min(0).max(5).default(1),
    cancelUrl: z.url({ protocol: /^https?$/ }).max(2048).optional(),
    resumable: z.boolean().default(true),
  })
  .refine(oneSecret, ONE_SECRET)
  .meta(ONE_SECRET_JSON);
export type HttpRuntimeConfig = z.infer<typeof HttpRuntimeConfigSchema>;

/**
 * A public signing key trusted for upstream Agent Cards (RFC 7517 JWK): EC P-256 (ES256) or OKP
 * Ed25519 (EdDSA), with the `kid` the card's signature names. Private or symmetric members (`d`,
 * `k`, …) are refused: a revision never holds a private key.
 */
export const TrustedCardKeySchema = z
  .looseObject({
    kty: z.enum(['EC', 'OKP']),
    kid: z.string().min(1).max(200),
    crv: z.enum(['P-256', 'Ed25519']),
    x: z.string().min(1).max(200),
    y: z.string().min(1).max(200).optional(),
    alg: z.enum(['ES256', 'EdDSA']).optional(),
  })
  .refine((k) => !['d', 'k', 'p', 'q', 'dp', 'dq', 'qi'].some((m) => m in k), { message: 'a trusted key must be public (no d, k, p, q, dp, dq, qi)' });

/**
 * A host a card signature's `jku` may point to: `host` or `host:port` (the jku must then be
 * https), or an `http(s)://host[:port]` origin (naming `http://` allows plain http: development
 * only). Matched exactly against the jku's scheme and host (no suffix or prefix matching).
 */
export const TrustedJkuHostSchema = z
  .string()
  .max(300)
  .regex(/^(https?:\/\/)?[A-Za-z0-9.-]+(:\d{1,5})?$|^(https?:\/\/)?\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/, 'a host, host:port, or an http(s)://host[:port] origin (no path)');

/**
 * `requireSignedCard` of the `a2a` runtime: the upstream card must carry at least one signature
 * (A2A v1.0 §8.4: detached JWS over the canonical card without `signatures`) that verifies with a
 * trusted key, or publishing is refused and runs fail (`runtime.upstream_card_unverified`). The
 * trust anchors (at least one): `keys` (public JWKs, matched by `kid`), `jwksUrls` (JWK Sets
 * fetched under the outbound rules, no credentials), `jkuHosts` (a signature's own `jku` is fetched
 * only when its host is one of these; any other jku is never fetched).
 */
export const RequireSignedCardSchema = z
  .strictObject({
    keys: z.array(TrustedCardKeySchema).max(20).optional(),
    jwksUrls: z.array(z.url({ protocol: /^https?$/ }).max(2048)).max(5).optional(),
    jkuHosts: z.array(TrustedJkuHostSchema).max(10).optional(),
  })
  .refine((t) => (t.keys?.length ?? 0) + (t.jwksUrls?.length ?? 0) + (t.jkuHosts?.length ?? 0) > 0, {
    message: 'give at least one trust anchor: keys, jwksUrls or jkuHosts',
  });
export type RequireSignedCard = z.infer<typeof RequireSignedCardSchema>;

/**
 * Config of the `a2a` runtime: the agent fronts an upstream A2A agent. Give `cardUrl` (its Agent
 * Card; the interface is chosen from the card) or `url` (an interface URL, with its
 * `protocolBinding` and `protocolVersion`). Credentials are never stored in a revision:
 * `credentials.secret` names a runtime secret of the organization, or `credentials.secretEnv` a
 * worker variable in its namespace `AAAS_RUNTIME_SECRET_<ORG>_<NAME>` (exactly one); they are sent
 * as `<header>: <scheme> <secret>` (default `Authorization: Bearer …`). `streaming` (default: what
 * the upstream card says; true with `url`) picks SendStreamingMessage over SendMessage plus
 * polling GetTask every `pollIntervalMs`. An upstream task running longer than `timeoutMs` is
 * canceled upstream and the run fails. `requireSignedCard` (with `cardUrl` only): the upstream
 * card's signatures are verified against the given trust anchors at publish and before each run.
 */
export const A2ARuntimeConfigSchema = z
  .strictObject({
    kind: z.literal('a2a'),
    cardUrl: z.url({ protocol: /^https?$/ }).max(2048).optional(),
    url: z.url({ protocol: /^https?$/ }).max(2048).optional(),
    protocolBinding: z.enum(['JSONRPC', 'HTTP+JSON']).default('JSONRPC'),
    protocolVersion: z.enum(['1.0', '0.3']).default('1.0'),
    credentials: z
      .strictObject({
        secret: RuntimeSecretNameSchema.optional(),
        secretEnv: SecretEnvSchema.optional(),
        header: z.string().regex(/^[A-Za-z0-9-]{1,64}$/).default('Authorization'),
        scheme: z.string().regex(/^[A-Za-z0-9._-]{0,32}$/).default('Bearer'),
      })
      .refine(oneSecret, ONE_SECRET)
      .meta(ONE_SECRET_JSON)
      .optional(),
    streaming: z.boolean().optional(),
    pollIntervalMs: z.int().min(100).max(60_000).default(1000),
    timeoutMs: z.int().min(1000).max(24 * 3600_000).default(600_000),
    requireSignedCard: RequireSignedCardSchema.optional(),
  })
  .refine((c) => (c.cardUrl === undefined) !== (c.url === undefined), { message: 'give exactly one of cardUrl, url' })
  .refine((c) => c.requireSignedCard === undefined || c.cardUrl !== undefined, { message: 'requireSignedCard needs cardUrl (a card to verify)', path: ['requireSignedCard'] });
export type A2ARuntimeConfig = z.infer<typeof A2ARuntimeConfigSchema>;

/**
 * An operation's id on the http runtime's wire (optional on every operation, unique within the
 * run): an operation sent again whose id the run's log holds is dropped (a resumed execution).
 */
const WireOperationIdSchema = z.string().min(1).max(200);

/** An agent message on the http runtime's wire. */
const WireMessageSchema = z.strictObject({
  parts: z.array(PartSchema).min(1),
  messageId: z.string().min(1).max(200).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

/**
 * One runtime operation a backend of the `http` runtime answers with (one NDJSON line, one SSE
 * event's data, or an element of a JSON result's `operations`): the same operations a built-in
 * runtime performs through RuntimeContext.
 */
export const HttpRuntimeOperationSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('status'), id: WireOperationIdSchema.optional(), status: z.enum(['working', 'completed', 'failed', 'rejected']), message: WireMessageSchema.optional() }),
  z.strictObject({ op: z.literal('message'), id: WireOperationIdSchema.optional(), message: WireMessageSchema }),
  z.strictObject({
    op: z.literal('artifact'),
    id: WireOperationIdSchema.optional(),
    artifactId: z.string().min(1).max(200),
    name: z.string().max(500).optional(),
    description: z.string().max(2000).optional(),
    parts: z.array(PartSchema).min(1),
    append: z.boolean().optional(),
    lastChunk: z.boolean().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  }),
  z.strictObject({
    op: z.literal('interaction'),
    id: WireOperationIdSchema.optional(),
    kind: z.enum(['input', 'auth', 'confirmation']),
    message: WireMessageSchema.optional(),
    title: z.string().max(200).optional(),
    description: z.string().max(2000).optional(),
    options: z.array(z.strictObject({ id: z.string().min(1).max(64), label: z.string().min(1).max(200), kind: z.enum(['approve', 'reject', 'other']).optional() })).max(20).optional(),
    blocking: z.boolean().optional(),
    expiresInMs: z.int().min(1).max(7 * 24 * 3600 * 1000).optional(),
    onExpire: z.enum(['fail', 'continue']).optional(),
    state: z.unknown().optional(),
  }),
  z.strictObject({ op: z.literal('delegate'), agent: z.string().min(1).max(200), message: WireMessageSchema, kind: z.enum(['delegation', 'subtask', 'handoff']).optional(), state: z.unknown().optional() }),
]);
export type HttpRuntimeOperation = z.infer<typeof HttpRuntimeOperationSchema>;

/** A backend's single JSON answer (`application/json`). */
export const HttpRuntimeResultSchema = z.strictObject({ operations: z.array(HttpRuntimeOperationSchema) });

/** What the `http` runtime POSTs for each execution (JSON); the backend verifies its signature first. */
export const HttpRuntimeRequestSchema = z.object({
  /** The run (A2A task) and its thread (contextId), agent and revision. */
  run: z.object({ runId: z.string(), threadId: z.string(), agentId: z.string(), revisionId: z.string(), orgId: z.string() }),
  /**
   * Why this execution runs: `created`, `continued`, `interaction_responded` / `interaction_expired`
   * (with `interaction`: id, kind, status, decision, optionId, your state), `link_settled` (with
   * `link`: linkId, childRunId, kind, status, your state), `resumed` (the execution before was
   * lost with its worker: `attempt` from 1, `lost` the trigger it was answering, `lastSequence` the
   * run's last recorded sequence, `applied` the ids of the operations the log holds — the wire
   * `id`s, `message:<messageId>` for a message with a messageId and no id,
   * `<execution>:<artifactId>#<n>` for the n-th chunk (from 0) of an artifact sent without id, where
   * `<execution>` is the last part of the `webhook-id`; operations sent again with one of these ids
   * are dropped). The `webhook-id` of a resumed request is the lost one's.
   */
  trigger: z.looseObject({ kind: z.enum(['created', 'continued', 'interaction_responded', 'interaction_expired', 'link_settled', 'resumed']) }),
  /** The user message that triggered it. */
  input: CanonicalMessageSchema,
  /** The thread so far, oldest first (at most 100 messages). */
  history: z.array(CanonicalMessageSchema),
  /** The A2A extensions (URIs) the client activated when it created the run (A2A v1.0 §4.6). */
  extensions: z.array(z.string()),
});
export type HttpRuntimeRequest = z.infer<typeof HttpRuntimeRequestSchema>;

/**
 * The http runtime's contract as JSON Schema: its revision config (`secret` or `secretEnv`, exactly
 * one), the request, one operation, the JSON result.
 */
export function httpRuntimeJsonSchema(): Record<string, unknown> {
  return {
    config: z.toJSONSchema(HttpRuntimeConfigSchema, { io: 'input' }),
    request: z.toJSONSchema(HttpRuntimeRequestSchema, { io: 'input' }),
    operation: z.toJSONSchema(HttpRuntimeOperationSchema),
    result: z.toJSONSchema(HttpRuntimeResultSchema),
  };
}

// ------------------------------------------------------------------ runtime secrets (admin API)

/**
 * A runtime secret's value: printable ASCII without surrounding spaces (it goes into an HTTP header
 * or is a Standard Webhooks key), at most 4096 characters. Stored encrypted; never returned.
 */
export const RuntimeSecretValueSchema = z
  .string()
  .max(4096)
  .regex(/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/, 'printable ASCII, no surrounding spaces, 1..4096 characters');

/** Body of `POST /v1/runtime-secrets`: create a secret of the caller's organization. */
export const CreateRuntimeSecretSchema = z.strictObject({ name: RuntimeSecretNameSchema, value: RuntimeSecretValueSchema });
export type CreateRuntimeSecret = z.infer<typeof CreateRuntimeSecretSchema>;

/** Body of `PUT /v1/runtime-secrets/{name}`: rotate (a new value, version + 1). */
export const RotateRuntimeSecretSchema = z.strictObject({ value: RuntimeSecretValueSchema });
export type RotateRuntimeSecret = z.infer<typeof RotateRuntimeSecretSchema>;

/** A runtime secret as the admin API shows it: never its value. */
export const RuntimeSecretSchema = z.object({
  name: z.string(),
  /** 1 at creation, + 1 per rotation. */
  version: z.int(),
  createdAt: z.string().describe('ISO-8601 timestamp'),
  updatedAt: z.string().describe('ISO-8601 timestamp'),
});
export type RuntimeSecretResponse = z.infer<typeof RuntimeSecretSchema>;
export const RuntimeSecretListSchema = z.object({ runtimeSecrets: z.array(RuntimeSecretSchema) });

/** Any runtime config, discriminated by `kind`. */
export const RuntimeConfigSchema = z.discriminatedUnion('kind', [ScriptedRuntimeConfigSchema, HttpRuntimeConfigSchema, A2ARuntimeConfigSchema]);
export type RuntimeConfig = z.infer<typeof RuntimeConfigSchema>;
