import { Ajv } from 'ajv';
import { z } from 'zod';
import { AppError } from '#libs/common';
import { SUBSTATES_EXTENSION_URI, type CanonicalMessage } from '#libs/contracts';
import { ExtensionRuleError, type A2AExtensionPlugin } from '../extension.js';

/** URIs of the built-in extensions (their specification is served at the URI's path). */
export const BUILTIN_EXTENSION_BASE = 'https://aaas.dev/extensions';
export const COMPLIANCE_EXTENSION_URI = `${BUILTIN_EXTENSION_BASE}/compliance/v1`;
export const STRUCTURED_INPUT_EXTENSION_URI = `${BUILTIN_EXTENSION_BASE}/structured-input/v1`;
export { SUBSTATES_EXTENSION_URI } from '#libs/contracts';

const ComplianceParams = z.strictObject({
  /** ISO 3166-1 alpha-2 regions where data is stored and processed. */
  dataResidency: z.array(z.string().regex(/^[A-Z]{2}$/, 'an ISO 3166-1 alpha-2 code')).min(1),
  /** e.g. SOC2, ISO27001 */
  certifications: z.array(z.string().min(1).max(64)).default([]),
  /** How long task data is kept (days). */
  retentionDays: z.int().min(0).max(36500).optional(),
  /** Where the agent's data-processing terms are. */
  termsUrl: z.url({ protocol: /^https?$/ }).optional(),
});

/** Data-only: structured compliance / data-residency facts on the card. No behaviour. */
export const complianceExtension: A2AExtensionPlugin<z.infer<typeof ComplianceParams>> = {
  uri: COMPLIANCE_EXTENSION_URI,
  description: 'Compliance and data residency of the agent (data-only).',
  params: ComplianceParams,
  dataOnly: true,
  specDocument: `# Compliance (data-only A2A extension)

URI: \`${COMPLIANCE_EXTENSION_URI}\`

An agent declares in \`capabilities.extensions[].params\`:

| param | type | meaning |
|---|---|---|
| \`dataResidency\` | string[] (ISO 3166-1 alpha-2) | regions where task data is stored and processed |
| \`certifications\` | string[] | e.g. SOC2, ISO27001 |
| \`retentionDays\` | integer | how long task data is kept |
| \`termsUrl\` | URL | data-processing terms |

Data only: activating it changes nothing; it may not be required.
`,
};

const ajv = new Ajv({ allErrors: false, strict: false });

const StructuredInputParams = z.strictObject({
  /** JSON Schema (draft 2020-12 subset Ajv supports) every message's DataPart must satisfy. */
  schema: z.record(z.string(), z.unknown()).refine((s) => {
    try {
      ajv.compile(s);
      return true;
    } catch {
      return false;
    }
  }, 'not a JSON Schema Ajv can compile'),
});

const compiled = new WeakMap<object, ReturnType<typeof ajv.compile>>();

/**
 * Profile: every user message of a request that activates it must carry a DataPart valid against
 * the JSON Schema in `params.schema` (A2A "profile" extension: it constrains messages without
 * adding fields).
 */
export const structuredInputExtension: A2AExtensionPlugin<z.infer<typeof StructuredInputParams>> = {
  uri: STRUCTURED_INPUT_EXTENSION_URI,
  description: 'Every message carries a DataPart valid against the declared JSON Schema (profile).',
  params: StructuredInputParams,
  specDocument: `# Structured input (profile A2A extension)

URI: \`${STRUCTURED_INPUT_EXTENSION_URI}\`

Declared with \`params.schema\`: a JSON Schema. When a request activates the extension
(\`A2A-Extensions: ${STRUCTURED_INPUT_EXTENSION_URI}\`), every message it sends must contain at least one
DataPart (\`{"data": …}\`) whose value is valid against that schema; otherwise the request fails with
InvalidParams naming this extension and the rule broken. The agent may declare it \`required\`.
`,
  onMessage(message: CanonicalMessage, params) {
    let validate = compiled.get(params.schema);
    if (!validate) {
      validate = ajv.compile(params.schema);
      compiled.set(params.schema, validate);
    }
    const data = message.parts.filter((p) => p.data !== undefined);
    if (data.length === 0) throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, 'the message must carry a DataPart valid against the declared schema');
    if (!data.some((p) => validate!(p.data))) {
      const why = (validate.errors ?? []).map((e) => `${e.instancePath || '(data)'} ${e.message ?? ''}`.trim()).join('; ');
      throw new ExtensionRuleError(STRUCTURED_INPUT_EXTENSION_URI, `no DataPart is valid against the declared schema: ${why}`);
    }
  },
};

const SubstatesParams = z.strictObject({
  /** The sub-states the agent emits while working, e.g. `generating-image`. */
  states: z.array(z.string().regex(/^[a-z][a-z0-9-]{0,63}$/, 'lowercase words joined by hyphens')).min(1),
});

/**
 * State machine: while a task is working, `status.message.metadata["<uri>"].state` names a
 * declared sub-state (the runtime emits it; the scripted runtime's `substate` step). It adds no
 * task state: the core state stays TASK_STATE_WORKING.
 */
export const substatesExtension: A2AExtensionPlugin<z.infer<typeof SubstatesParams>> = {
  uri: SUBSTATES_EXTENSION_URI,
  description: 'Working sub-states in status message metadata (state machine).',
  params: SubstatesParams,
  specDocument: `# Working sub-states (state-machine A2A extension)

URI: \`${SUBSTATES_EXTENSION_URI}\`

Declared with \`params.states\`: the sub-states the agent emits while working. Each working status
update then carries \`status.message.metadata["${SUBSTATES_EXTENSION_URI}"] = { "state": "<sub-state>" }\`.
The task's state stays TASK_STATE_WORKING: the extension adds no state, only its metadata.
`,
};

export const TASK_SEARCH_EXTENSION_URI = `${BUILTIN_EXTENSION_BASE}/task-search/v1`;
/** The JSON-RPC method the task-search extension adds. */
export const TASK_SEARCH_METHOD = 'SearchTasks';

const SearchParams = z.strictObject({
  /** Words that must all occur in a message of the task. */
  query: z.string().trim().min(1).max(200),
  pageSize: z.int().min(1).max(50).default(20),
  pageToken: z.string().max(256).optional(),
  historyLength: z.int().min(0).max(1000).optional(),
});

/**
 * Method extension: `SearchTasks` — full-text search over the caller's own tasks of the agent and
 * their messages, paginated. Untrusted params are validated here; results are the call's
 * version's Task shapes.
 */
export const taskSearchExtension: A2AExtensionPlugin = {
  uri: TASK_SEARCH_EXTENSION_URI,
  description: 'SearchTasks: full-text search over your own tasks and their messages (method).',
  specDocument: `# Task search (method A2A extension)

URI: \`${TASK_SEARCH_EXTENSION_URI}\`

Adds the JSON-RPC method \`${TASK_SEARCH_METHOD}\` (both protocol versions), callable by a request that activates
the extension (\`A2A-Extensions: ${TASK_SEARCH_EXTENSION_URI}\`):

params: \`{ "query": string, "pageSize"?: 1..50 (20), "pageToken"?: string, "historyLength"?: int }\`

result: \`{ "tasks": Task[], "nextPageToken": string }\` — the caller's own tasks of the agent (every
task for a caller with \`a2a:all-tasks\`) with a message containing every word of \`query\`, newest
status first; \`nextPageToken\` is \`""\` on the last page. Bad params: InvalidParams.
`,
  methods: {
    [TASK_SEARCH_METHOD]: async (ctx) => {
      const parsed = SearchParams.safeParse(ctx.params ?? {});
      if (!parsed.success) {
        throw new AppError('request.invalid', `invalid ${TASK_SEARCH_METHOD} params: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`).join('; ')}`);
      }
      return ctx.services.searchTasks(parsed.data);
    },
  },
};

/** The built-in extensions, registered by default. */
export const builtinExtensions: ReadonlyArray<A2AExtensionPlugin<any>> = [complianceExtension, structuredInputExtension, substatesExtension, taskSearchExtension];
