import { Body, Controller, Get, HttpCode, Param, Patch, Post, Put, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  AgentDetailSchema,
  AgentListSchema,
  AgentSchema,
  CreateAgentSchema,
  SetActiveRevisionSchema,
  UpdateAgentSchema,
  type AgentDetailResponse,
  type AgentResponse,
  type CreateAgent,
  type SetActiveRevision,
  type UpdateAgent,
} from '#libs/contracts';
import { AppError } from '#libs/common';
import { AgentService, BindingService, RevisionService, hasScope, type Principal } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { toAgentDetailResponse, toAgentResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IDEMPOTENCY_HEADER_DOC } from './organizations.controller.js';
import { RegistryCacheInterceptor } from './registry-cache.interceptor.js';

export const AGENT_PARAM_DOC = { name: 'agent', description: 'Agent id or slug' };

@ApiTags('agents')
@Controller('v1/agents')
@UseInterceptors(RegistryCacheInterceptor)
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class AgentsController {
  constructor(
    private readonly agents: AgentService,
    private readonly revisions: RevisionService,
    private readonly bindings: BindingService,
  ) {}

  @Post()
  @HttpCode(201)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Create an agent (isDefault: true moves the deployment default here)' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 201, standardSchema: AgentSchema, example: ADMIN_EXAMPLES.createAgent.response })
  @RequestExamples(ADMIN_EXAMPLES.createAgent.request)
  @AdminRoute(400, 409, 422)
  async create(@CurrentPrincipal() principal: Principal, @Body({ schema: CreateAgentSchema }) body: CreateAgent): Promise<AgentResponse> {
    requireDefaultScope(principal, body.isDefault);
    return toAgentResponse(await this.agents.create(principal.orgId, body));
  }

  @Get()
  @ApiOperation({ summary: "The organization's agents" })
  @ApiResponse({ status: 200, standardSchema: AgentListSchema, example: ADMIN_EXAMPLES.agents })
  @AdminRoute()
  async list(@CurrentPrincipal() principal: Principal): Promise<{ agents: AgentResponse[] }> {
    return { agents: (await this.agents.list(principal.orgId)).map(toAgentResponse) };
  }

  @Get(':agent')
  @ApiOperation({ summary: 'An agent, with its active revision id and A2A binding' })
  @ApiParam(AGENT_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: AgentDetailSchema, example: ADMIN_EXAMPLES.agent })
  @AdminRoute(404)
  async get(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string): Promise<AgentDetailResponse> {
    const agent = await this.agents.get(principal.orgId, agentRef);
    return toAgentDetailResponse(agent, await this.bindings.find(principal.orgId, agent.id));
  }

  @Patch(':agent')
  @ApiOperation({ summary: 'Change identity fields or isDefault (null clears an optional field)' })
  @ApiParam(AGENT_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: AgentSchema, example: ADMIN_EXAMPLES.updateAgent.response })
  @RequestExamples(ADMIN_EXAMPLES.updateAgent.request)
  @AdminRoute(400, 404, 422)
  async update(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Body({ schema: UpdateAgentSchema }) body: UpdateAgent): Promise<AgentResponse> {
    requireDefaultScope(principal, body.isDefault);
    return toAgentResponse(await this.agents.update(principal.orgId, agentRef, body));
  }

  @Put(':agent/active-revision')
  @HttpCode(200)
  @ApiOperation({ summary: 'Serve a published revision' })
  @ApiParam(AGENT_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: AgentSchema, example: ADMIN_EXAMPLES.setActiveRevision.response })
  @RequestExamples(ADMIN_EXAMPLES.setActiveRevision.request)
  @AdminRoute(400, 404, 409, 422)
  async setActive(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Body({ schema: SetActiveRevisionSchema }) body: SetActiveRevision): Promise<AgentResponse> {
    return toAgentResponse(await this.revisions.setActive(principal.orgId, agentRef, body.revisionId));
  }
}

/**
 * The default agent is served at the host root for the whole deployment, across organizations:
 * only a `platform` key may make an agent the default (403 `auth.forbidden` otherwise).
 */
function requireDefaultScope(principal: Principal, isDefault: boolean | undefined | null): void {
  if (isDefault && !hasScope(principal, 'platform')) {
    throw new AppError('auth.forbidden', 'only a platform key may make an agent the deployment default', { details: { requiredScope: 'platform' } });
  }
}
