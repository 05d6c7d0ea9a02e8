import { Module } from '@nestjs/common';
import { AgentDirectory } from './agent-directory.js';
import { AgentDirectoryRepository } from './agent-directory.repository.js';
import { AgentRepository } from './agent.repository.js';
import { AgentService } from './agent.service.js';
import { ApiKeyRepository } from './api-key.repository.js';
import { ApiKeyService } from './api-key.service.js';
import { BindingRepository } from './binding.repository.js';
import { BindingService } from './binding.service.js';
import { BootstrapService } from './bootstrap.service.js';
import { OrganizationRepository } from './organization.repository.js';
import { OrganizationService } from './organization.service.js';
import { RevisionRepository } from './revision.repository.js';
import { RevisionService } from './revision.service.js';
import { SigningKeyRepository } from './signing-key.repository.js';
import { SigningKeyService } from './signing-key.service.js';
import { RuntimeSecretsModule } from './runtime-secrets.module.js';
import { CardSignatureRepository } from './card-signature.repository.js';
import { CardSignatureService } from './card-signature.service.js';
import { CardClaimsModule } from './served-capabilities.js';
import { ExtensionLimitsModule } from './extension-limits.module.js';

/**
 * The registry bounded context: organizations, API keys, agents, revisions, bindings, and the
 * AgentDirectory the A2A adapter reads, and (through RuntimeSecretsModule, global) the
 * organizations' runtime secrets, and (ExtensionLimitsModule, global) the structured-input
 * extension's budgets. Needs DbModule, ConfigModule and RuntimesModule (global).
 * Importing it also runs BootstrapService at application bootstrap.
 */
@Module({
  imports: [RuntimeSecretsModule, CardClaimsModule, ExtensionLimitsModule],
  providers: [
    OrganizationRepository,
    ApiKeyRepository,
    AgentRepository,
    RevisionRepository,
    BindingRepository,
    AgentDirectoryRepository,
    OrganizationService,
    ApiKeyService,
    AgentService,
    RevisionService,
    BindingService,
    AgentDirectory,
    BootstrapService,
    SigningKeyRepository,
    SigningKeyService,
    CardSignatureRepository,
    CardSignatureService,
  ],
  exports: [OrganizationService, ApiKeyService, AgentService, RevisionService, BindingService, AgentDirectory, SigningKeyService, CardSignatureService, CardClaimsModule],
})
export class RegistryModule {}
