import { Body, Controller, Get, HttpCode, Param, Patch, Post, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CreateRevisionSchema, RevisionListSchema, RevisionSchema, UpdateRevisionSchema, type CreateRevision, type RevisionResponse, type UpdateRevision } from '#libs/contracts';
import { RevisionService, type Principal } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { toRevisionResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { AGENT_PARAM_DOC } from './agents.controller.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IDEMPOTENCY_HEADER_DOC } from './organizations.controller.js';
import { RegistryCacheInterceptor } from './registry-cache.interceptor.js';

@ApiTags('revisions')
@Controller('v1/agents/:agent/revisions')
@UseInterceptors(RegistryCacheInterceptor)
@ApiParam(AGENT_PARAM_DOC)
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RevisionsController {
  constructor(private readonly revisions: RevisionService) {}

  @Post()
  @HttpCode(201)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Create a draft revision (protocolProfiles and runtime are validated)' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 201, standardSchema: RevisionSchema, example: ADMIN_EXAMPLES.createRevision.response })
  @RequestExamples(ADMIN_EXAMPLES.createRevision.request)
  @AdminRoute(400, 404, 422)
  async create(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Body({ schema: CreateRevisionSchema }) body: CreateRevision): Promise<RevisionResponse> {
    return toRevisionResponse(await this.revisions.createDraft(principal.orgId, agentRef, body));
  }

  @Get()
  @ApiOperation({ summary: "The agent's revisions, newest first" })
  @ApiResponse({ status: 200, standardSchema: RevisionListSchema, example: ADMIN_EXAMPLES.revisions })
  @AdminRoute(404)
  async list(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string): Promise<{ revisions: RevisionResponse[] }> {
    return { revisions: (await this.revisions.list(principal.orgId, agentRef)).map(toRevisionResponse) };
  }

  @Get(':revisionId')
  @ApiOperation({ summary: 'A revision' })
  @ApiResponse({ status: 200, standardSchema: RevisionSchema, example: ADMIN_EXAMPLES.revision })
  @AdminRoute(404)
  async get(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Param('revisionId') revisionId: string): Promise<RevisionResponse> {
    return toRevisionResponse(await this.revisions.get(principal.orgId, agentRef, revisionId));
  }

  @Patch(':revisionId')
  @ApiOperation({ summary: 'Edit a draft (409 revision.immutable once published)' })
  @ApiResponse({ status: 200, standardSchema: RevisionSchema, example: ADMIN_EXAMPLES.updateRevision.response })
  @RequestExamples(ADMIN_EXAMPLES.updateRevision.request)
  @AdminRoute(400, 404, 409, 422)
  async update(
    @CurrentPrincipal() principal: Principal,
    @Param('agent') agentRef: string,
    @Param('revisionId') revisionId: string,
    @Body({ schema: UpdateRevisionSchema }) body: UpdateRevision,
  ): Promise<RevisionResponse> {
    return toRevisionResponse(await this.revisions.updateDraft(principal.orgId, agentRef, revisionId, body));
  }

  @Post(':revisionId/publish')
  @HttpCode(200)
  @ApiOperation({ summary: 'draft → published (a no-op when already published)' })
  @ApiResponse({ status: 200, standardSchema: RevisionSchema, example: ADMIN_EXAMPLES.publishRevision })
  @AdminRoute(404, 409, 422)
  async publish(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Param('revisionId') revisionId: string): Promise<RevisionResponse> {
    return toRevisionResponse(await this.revisions.publish(principal.orgId, agentRef, revisionId));
  }

  @Post(':revisionId/retire')
  @HttpCode(200)
  @ApiOperation({ summary: 'published → retired (not the active revision)' })
  @ApiResponse({ status: 200, standardSchema: RevisionSchema, example: ADMIN_EXAMPLES.retireRevision })
  @AdminRoute(404, 409)
  async retire(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Param('revisionId') revisionId: string): Promise<RevisionResponse> {
    return toRevisionResponse(await this.revisions.retire(principal.orgId, agentRef, revisionId));
  }
}
