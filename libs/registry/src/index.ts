/**
 * libs/registry: organizations, API keys, agents, revisions and A2A bindings, the organizations'
 * runtime secrets, and the AgentDirectory through which the A2A adapter finds what to serve.
 */
export type { A2ABinding, Agent, AgentProvider, ApiKeyInfo, CreatedApiKey, Organization, Principal, ResolvedA2AAgent, Revision } from './registry.types.js';
export { AgentDirectory } from './agent-directory.js';
export { AgentService } from './agent.service.js';
export { ApiKeyService, AUTH_CACHE_TTL_MS, AUTH_CACHE_MAX_ENTRIES, canInvokeA2A, hasScope } from './api-key.service.js';
export { API_KEY_PATTERN, parseApiKey } from './api-key.js';
export { BindingService, DEFAULT_A2A_BINDING, OPEN_BINDING_WARNING, a2aBindingPath, bindingWarnings, type A2ABindingInput } from './binding.service.js';
export { BOOTSTRAP_KEY_SCOPES } from './bootstrap.service.js';
export { NEW_ORG_ADMIN_SCOPES, OrganizationService } from './organization.service.js';
export { RevisionService } from './revision.service.js';
export { RegistryModule } from './registry.module.js';
export { CardSignatureService } from './card-signature.service.js';
export { CardClaimsModule, CardClaimsReadiness, CAPABILITY_SETTINGS, servedCapabilities, type A2ACapabilityName, type UnservedClaim } from './served-capabilities.js';
export { SigningKeyService, type ActiveSigningKey, type SigningKeyInfo } from './signing-key.service.js';
export { RuntimeSecretService, type RuntimeSecretInfo } from './runtime-secret.service.js';
export { RuntimeSecretsModule } from './runtime-secrets.module.js';
