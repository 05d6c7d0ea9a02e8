import { PushModule } from '#libs/push';
import { Module } from '@nestjs/common';
import { RegistryModule } from '#libs/registry';
import { RunsModule } from '#libs/runs';
import { AdminAuthGuard } from './admin-auth.guard.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { AgentsController } from './agents.controller.js';
import { ApiKeysController } from './api-keys.controller.js';
import { BindingsController } from './bindings.controller.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { InteractionsController } from './interactions.controller.js';
import { OrganizationsController } from './organizations.controller.js';
import { RevisionsController } from './revisions.controller.js';
import { RunsController } from './runs.controller.js';
import { RunLiveController } from './run-live.controller.js';
import { RunArchiveController } from './run-archive.controller.js';
import { RetentionController } from './retention.controller.js';
import { SseHeartbeat } from '../common/sse.js';
import { ReadYourWrites } from '../common/read-your-writes.js';
import { SigningKeysController } from './signing-keys.controller.js';
import { RuntimeSecretsController } from './runtime-secrets.controller.js';
import { HttpRuntimeSchemaController } from './http-runtime-schema.controller.js';
import { RegistryCacheInterceptor } from './registry-cache.interceptor.js';

/**
 * Admin REST API (`/v1/...`): organizations, API keys, agents, revisions, A2A bindings, runtime
 * secrets, and read access to runs. Every route needs an API key (AdminAuthGuard) with scope `admin`
 * (`platform` to create organizations); every query is scoped by the key's organization.
 */
@Module({
  imports: [RegistryModule, RunsModule, PushModule],
  controllers: [OrganizationsController, ApiKeysController, AgentsController, RevisionsController, BindingsController, RunsController, InteractionsController, RunLiveController, RunArchiveController, RetentionController, SigningKeysController, RuntimeSecretsController, HttpRuntimeSchemaController],
  providers: [AdminAuthGuard, AdminValidationPipe, IdempotencyInterceptor, IdempotencyRepository, RegistryCacheInterceptor, SseHeartbeat, ReadYourWrites],
})
export class AdminModule {}
