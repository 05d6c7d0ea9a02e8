import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, UseGuards, UsePipes } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  CreateRuntimeSecretSchema,
  RotateRuntimeSecretSchema,
  RuntimeSecretListSchema,
  RuntimeSecretSchema,
  type CreateRuntimeSecret,
  type RotateRuntimeSecret,
  type RuntimeSecretResponse,
} from '#libs/contracts';
import { RuntimeSecretService, type Principal, type RuntimeSecretInfo } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

const toResponse = (s: RuntimeSecretInfo): RuntimeSecretResponse => ({ name: s.name, version: s.version, createdAt: s.createdAt.toISOString(), updatedAt: s.updatedAt.toISOString() });

const NAME_PARAM_DOC = { name: 'name', description: 'The runtime secret\'s name in the organization', example: 'helper-webhook' };

/**
 * Runtime secrets of the caller's organization: the keys its `http` runtimes sign with and the
 * credentials its `a2a` runtimes send upstream, referenced by name from revisions
 * (`runtime.secret`, `runtime.credentials.secret`). Values go in and are never returned.
 */
@ApiTags('runtime-secrets')
@Controller('v1/runtime-secrets')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RuntimeSecretsController {
  constructor(private readonly secrets: RuntimeSecretService) {}

  @Post()
  @HttpCode(201)
  @ApiOperation({ summary: 'Store a runtime secret (encrypted; 409 when the name exists: rotate it instead)' })
  @ApiResponse({ status: 201, standardSchema: RuntimeSecretSchema, example: ADMIN_EXAMPLES.createRuntimeSecret.response })
  @RequestExamples(ADMIN_EXAMPLES.createRuntimeSecret.request)
  @AdminRoute(400, 409, 422)
  async create(@CurrentPrincipal() principal: Principal, @Body({ schema: CreateRuntimeSecretSchema }) body: CreateRuntimeSecret): Promise<RuntimeSecretResponse> {
    return toResponse(await this.secrets.create(principal.orgId, body.name, body.value));
  }

  @Get()
  @ApiOperation({ summary: "The organization's runtime secrets: names, versions and times, never values" })
  @ApiResponse({ status: 200, standardSchema: RuntimeSecretListSchema, example: ADMIN_EXAMPLES.runtimeSecrets })
  @AdminRoute()
  async list(@CurrentPrincipal() principal: Principal): Promise<{ runtimeSecrets: RuntimeSecretResponse[] }> {
    return { runtimeSecrets: (await this.secrets.list(principal.orgId)).map(toResponse) };
  }

  @Put(':name')
  @ApiOperation({ summary: 'Rotate a runtime secret: a new value, version + 1 (runs use it within RUNTIME_SECRET_CACHE_TTL_MS)' })
  @ApiParam(NAME_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: RuntimeSecretSchema, example: ADMIN_EXAMPLES.rotateRuntimeSecret.response })
  @RequestExamples(ADMIN_EXAMPLES.rotateRuntimeSecret.request)
  @AdminRoute(400, 404, 422)
  async rotate(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Body({ schema: RotateRuntimeSecretSchema }) body: RotateRuntimeSecret): Promise<RuntimeSecretResponse> {
    return toResponse(await this.secrets.rotate(principal.orgId, name, body.value));
  }

  @Delete(':name')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a runtime secret (revisions referencing it fail their runs and cannot be published until it exists again)' })
  @ApiParam(NAME_PARAM_DOC)
  @ApiResponse({ status: 204, description: 'Deleted' })
  @AdminRoute(404)
  async delete(@CurrentPrincipal() principal: Principal, @Param('name') name: string): Promise<void> {
    await this.secrets.delete(principal.orgId, name);
  }
}
