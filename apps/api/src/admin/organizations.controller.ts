import { Body, Controller, Get, HttpCode, Post, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CreatedOrganizationSchema, CreateOrganizationSchema, OrganizationSchema, type CreatedOrganizationResponse, type CreateOrganization, type OrganizationResponse } from '#libs/contracts';
import { OrganizationService, type Principal } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal, RequireScope } from './admin-auth.guard.js';
import { toOrganizationResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

export const IDEMPOTENCY_HEADER_DOC = { name: 'Idempotency-Key', required: false, description: 'Replays the first response for a retried identical request (24 h).' };

@ApiTags('organizations')
@Controller('v1')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class OrganizationsController {
  constructor(private readonly orgs: OrganizationService) {}

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
}
