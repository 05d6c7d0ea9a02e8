import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyListSchema, CreateApiKeySchema, CreatedApiKeySchema, type ApiKeyResponse, type CreateApiKey, type CreatedApiKeyResponse } from '#libs/contracts';
import { ApiKeyService, type Principal } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { toApiKeyResponse, toCreatedApiKeyResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IDEMPOTENCY_HEADER_DOC } from './organizations.controller.js';

@ApiTags('api-keys')
@Controller('v1/api-keys')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class ApiKeysController {
  constructor(private readonly keys: ApiKeyService) {}

  @Post()
  @HttpCode(201)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Create an API key (only scopes the caller holds); the key is shown once' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 201, standardSchema: CreatedApiKeySchema, example: ADMIN_EXAMPLES.createApiKey.response })
  @RequestExamples(ADMIN_EXAMPLES.createApiKey.request)
  @AdminRoute(400, 422)
  async create(@CurrentPrincipal() principal: Principal, @Body({ schema: CreateApiKeySchema }) body: CreateApiKey): Promise<CreatedApiKeyResponse> {
    return toCreatedApiKeyResponse(await this.keys.issue(principal, body.name, body.scopes));
  }

  @Get()
  @ApiOperation({ summary: "The organization's API keys (never their secrets), each with when it was last used (lags by up to 60 s)" })
  @ApiResponse({ status: 200, standardSchema: ApiKeyListSchema, example: ADMIN_EXAMPLES.apiKeys })
  @AdminRoute()
  async list(@CurrentPrincipal() principal: Principal): Promise<{ apiKeys: ApiKeyResponse[] }> {
    return { apiKeys: (await this.keys.list(principal.orgId)).map(toApiKeyResponse) };
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key (other API processes may accept it for up to 5 s more)' })
  @ApiResponse({ status: 204, description: 'Revoked' })
  @AdminRoute(404)
  async revoke(@CurrentPrincipal() principal: Principal, @Param('id') id: string): Promise<void> {
    await this.keys.revoke(principal.orgId, id);
  }
}
