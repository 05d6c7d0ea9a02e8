import { z } from 'zod';
import { AppError } from '#libs/common';
import { SUBSTATES_EXTENSION_URI } from '#libs/contracts';
import type { A2AExtensionPlugin } from '../extension.js';
import { structuredInputExtension } from './structured-input.js';
import type { StructuredInputLimits } from './schema-budget.js';

/** URIs of the built-in extensions (their specification is served at the URI's path). */
export const BUILTIN_EXTENSION_BASE = 'https://aaas.dev/extensions';
export const COMPLIANCE_EXTENSION_URI = `${BUILTIN_EXTENSION_BASE}/compliance/v1`;
export { STRUCTURED_INPUT_EXTENSION_URI, structuredInputExtension } from './structured-input.js';
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

/** The built-in extensions, the structured-input one held to `limits` (default: libs/config's defaults). */
export function builtinExtensionsWith(limits?: StructuredInputLimits): ReadonlyArray<A2AExtensionPlugin<any>> {
  return [complianceExtension, structuredInputExtension(limits), substatesExtension, taskSearchExtension];
}

/** The built-in extensions with the default limits. */
export const builtinExtensions: ReadonlyArray<A2AExtensionPlugin<any>> = builtinExtensionsWith();
