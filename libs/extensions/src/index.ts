/**
 * Extensions — the plugin API for A2A extensions (data-only, profile, method, state-machine): a
 * plugin is a URI, a zod schema of its declared params and hooks; ExtensionRegistry validates
 * declarations and negotiates what a request activates. Built-ins in builtin/.
 */
export { ExtensionRuleError, type A2AExtensionPlugin, type ExtensionMethod, type ExtensionMethodContext, type ExtensionServices } from './extension.js';
export { ExtensionRegistry, parseExtensionsHeader, type Negotiated } from './extension.registry.js';
export { ExtensionsModule, STRUCTURED_INPUT_LIMITS } from './extensions.module.js';
export { DEFAULT_STRUCTURED_INPUT_LIMITS, UNIQUE_ITEMS_MAX_ITEMS, type StructuredInputLimits } from './builtin/schema-budget.js';
export {
  BUILTIN_EXTENSION_BASE,
  COMPLIANCE_EXTENSION_URI,
  STRUCTURED_INPUT_EXTENSION_URI,
  SUBSTATES_EXTENSION_URI,
  TASK_SEARCH_EXTENSION_URI,
  TASK_SEARCH_METHOD,
  builtinExtensions,
  builtinExtensionsWith,
  taskSearchExtension,
  complianceExtension,
  structuredInputExtension,
  substatesExtension,
} from './builtin/builtins.js';
