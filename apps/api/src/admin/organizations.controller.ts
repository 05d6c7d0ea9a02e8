import { Body, Controller, Get, HttpCode, Param, Post, Put, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  CreatedOrganizationSchema,
  CreateOrganizationSchema,
  OrganizationSchema,
  SetStorageQuotaSchema,
  StorageUsageSchema,
  type CreatedOrganizationResponse,
  type CreateOrganization,
  type OrganizationResponse,
  type SetStorageQuota,
  type StorageUsageResponse,
} from '#libs/contracts';
import { OrganizationService, type Principal } from '#libs/registry';
import { StorageQuotas, type StorageUsage } from '#libs/runs';
import { AdminAuthGuard, CurrentPrincipal, RequireScope } from './admin-auth.guard.js';
import { toOrganizationResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

const USAGE_EXAMPLE: StorageUsageResponse = { orgId: '5b0e8c3a-2f4d-4c61-9a57-1d2e3f4a5b6c', storedBytes: 1_843_200, storageQuotaBytes: 10_737_418_240, quotaSource: 'organization' };

const toUsageResponse = (u: StorageUsage): StorageUsageResponse => ({ orgId: u.orgId, storedBytes: u.storedBytes, storageQuotaBytes: u.quotaBytes, quotaSource: u.quotaSource });

export const IDEMPOTENCY_HEADER_DOC = { name: 'Idempotency-Key', required: false, description: 'Replays the first response for a retried identical request (24 h).' };

@ApiTags('organizations')
@Controller('v1')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class OrganizationsController {
  constructor(
    private readonly orgs: OrganizationService,
    private readonly quotas: StorageQuotas,
  ) {}

  @Post('organizations')
  @HttpCode(201)
  @RequireScope('platform')
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Create an organization with its first admin API key (platform scope)' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 201, description: 'Created; adminKey.key is shown only here', standardSchema: CreatedOrganizationSchema, example: ADMIN_EXAMPLES.createOrganization.response })
  @RequestExamples(ADMIN_EXAMPLES.createOrganization.request)
  @AdminRoute(400, 409, 422)
  async create(@Body({ schema: CreateOrganizationSchema }) body: CreateOrganization): Promise<CreatedOrganizationResponse> {
    const { organization, adminKey } = await this.orgs.create(body.slug, body.name);
    return { ...toOrganizationResponse(organization), adminKey: { id: adminKey.id, key: adminKey.key, prefix: adminKey.prefix, scopes: adminKey.scopes } };
  }

  @Get('organization')
  @ApiOperation({ summary: "The caller's organization" })
  @ApiResponse({ status: 200, standardSchema: OrganizationSchema, example: ADMIN_EXAMPLES.organization })
  @AdminRoute()
  async current(@CurrentPrincipal() principal: Principal): Promise<OrganizationResponse> {
    return toOrganizationResponse(await this.orgs.get(principal.orgId));
  }

  @Get('organization/usage')
  @ApiOperation({ summary: "The caller's organization's storage: bytes of messages and artifacts stored, and the quota in force (null = unlimited)" })
  @ApiResponse({ status: 200, standardSchema: StorageUsageSchema, example: USAGE_EXAMPLE })
  @AdminRoute()
  async usage(@CurrentPrincipal() principal: Principal): Promise<StorageUsageResponse> {
    return toUsageResponse(await this.quotas.usage(principal.orgId));
  }

  @Put('organizations/:orgId/storage-quota')
  @RequireScope('platform')
  @ApiOperation({ summary: "Set an organization's storage quota in bytes (platform scope): null = the deployment default ORG_STORAGE_QUOTA_BYTES, 0 = unlimited; its storage after" })
  @ApiResponse({ status: 200, standardSchema: StorageUsageSchema, example: USAGE_EXAMPLE })
  @RequestExamples({
    limit: { summary: 'A quota of 10 GiB', value: { storageQuotaBytes: 10_737_418_240 } },
    default: { summary: 'Back to the deployment default', value: { storageQuotaBytes: null } },
  })
  @AdminRoute(400, 404, 422)
  async setStorageQuota(@Param('orgId') orgId: string, @Body({ schema: SetStorageQuotaSchema }) body: SetStorageQuota): Promise<StorageUsageResponse> {
    await this.orgs.setStorageQuota(orgId, body.storageQuotaBytes);
    // this process refuses or admits by the new quota at once; other instances within STORAGE_USAGE_TTL_MS
    this.quotas.forget(orgId);
    return toUsageResponse(await this.quotas.usage(orgId));
  }
}
