import { Global, Module } from '@nestjs/common';
import { RUNTIME_SECRETS } from '#libs/runtimes';
import { RuntimeSecretRepository } from './runtime-secret.repository.js';
import { RuntimeSecretService } from './runtime-secret.service.js';

/**
 * Runtime secrets per organization: RuntimeSecretService (admin operations, draft/publish checks)
 * and the `RUNTIME_SECRETS` port the built-in runtimes resolve secrets through (RuntimesModule
 * injects it). Global, so RuntimesModule sees the port in every process that imports this module:
 * RegistryModule does (the API), and the worker imports it in its root module.
 * Needs DbModule and ConfigModule (global).
 */
@Global()
@Module({
  providers: [RuntimeSecretRepository, RuntimeSecretService, { provide: RUNTIME_SECRETS, useExisting: RuntimeSecretService }],
  exports: [RuntimeSecretService, RUNTIME_SECRETS],
})
export class RuntimeSecretsModule {}
