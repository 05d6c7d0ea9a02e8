import { Body, Controller, Delete, Get, HttpCode, Param, Put, UseGuards, UsePipes } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { RetentionPolicySchema, SetRetentionBodySchema, type RetentionPolicyResponse, type SetRetentionBody } from '#libs/contracts';
import { AgentService, type Principal } from '#libs/registry';
import { RunRetention } from '#libs/runs';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { AGENT_PARAM_DOC } from './agents.controller.js';

const EXAMPLE = { retentionDays: 90, agents: [{ agentId: 'a5f0c1de-6b1f-4c59-9a4e-3d2b1c0f9e8d', retentionDays: 7 }] };

/**
 * The organization's retention policy (docs/architecture.md "Retention"): how many days terminal
 * runs are kept (null: forever, the default), overridable per agent. The worker's retention job
 * removes what expired. Maps and delegates to RunRetention.
 */
@ApiTags('runs')
@Controller('v1/retention-policy')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RetentionController {
  constructor(
    private readonly retention: RunRetention,
    private readonly agents: AgentService,
  ) {}

  @Get()
  @ApiOperation({ summary: "The organization's retention policy and its agents' overrides" })
  @ApiResponse({ status: 200, standardSchema: RetentionPolicySchema, example: EXAMPLE })
  @AdminRoute()
  get(@CurrentPrincipal() principal: Principal): Promise<RetentionPolicyResponse> {
    return this.retention.policy(principal.orgId);
  }

  @Put()
  @ApiOperation({ summary: 'Set how many days terminal runs are kept (null: forever)' })
  @ApiResponse({ status: 200, standardSchema: RetentionPolicySchema, example: EXAMPLE })
  @RequestExamples({ days: { summary: 'Keep terminal runs 90 days', value: { retentionDays: 90 } }, forever: { summary: 'Keep forever (the default)', value: { retentionDays: null } } })
  @AdminRoute(422)
  async set(@CurrentPrincipal() principal: Principal, @Body({ schema: SetRetentionBodySchema }) body: SetRetentionBody): Promise<RetentionPolicyResponse> {
    await this.retention.setPolicy(principal.orgId, null, body.retentionDays);
    return this.retention.policy(principal.orgId);
  }

  @Put('agents/:agent')
  @ApiOperation({ summary: "Override the organization's retention for one agent (null: keep its runs forever)" })
  @ApiParam(AGENT_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: RetentionPolicySchema, example: EXAMPLE })
  @RequestExamples({ days: { summary: "Keep this agent's terminal runs 7 days", value: { retentionDays: 7 } }, forever: { summary: "Keep this agent's runs forever", value: { retentionDays: null } } })
  @AdminRoute(404, 422)
  async setAgent(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Body({ schema: SetRetentionBodySchema }) body: SetRetentionBody): Promise<RetentionPolicyResponse> {
    const agent = await this.agents.get(principal.orgId, agentRef);
    await this.retention.setPolicy(principal.orgId, agent.id, body.retentionDays);
    return this.retention.policy(principal.orgId);
  }

  @Delete('agents/:agent')
  @HttpCode(200)
  @ApiOperation({ summary: "Drop an agent's override: it follows the organization's retention again" })
  @ApiParam(AGENT_PARAM_DOC)
  @ApiResponse({ status: 200, standardSchema: RetentionPolicySchema, example: EXAMPLE })
  @AdminRoute(404)
  async clearAgent(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string): Promise<RetentionPolicyResponse> {
    const agent = await this.agents.get(principal.orgId, agentRef);
    await this.retention.clearAgentPolicy(principal.orgId, agent.id);
    return this.retention.policy(principal.orgId);
  }
}
