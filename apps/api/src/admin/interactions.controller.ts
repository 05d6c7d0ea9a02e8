import { Controller, Get, Query, UseGuards, UsePipes } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InteractionListSchema, ListInteractionsQuerySchema, type InteractionListResponse, type ListInteractionsQuery } from '#libs/contracts';
import type { Principal } from '#libs/registry';
import { RunViews } from '#libs/runs';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { ADMIN_EXAMPLES, AdminRoute } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

/** InteractionRequests across the organization's runs (a run's own are also in GET /v1/runs/{runId}). */
@ApiTags('runs')
@Controller('v1/interactions')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class InteractionsController {
  constructor(private readonly runs: RunViews) {}

  @Get()
  @ApiOperation({ summary: "The organization's interactions (input, auth, confirmation) across runs, newest first; `status=open` for those waiting for an answer" })
  @ApiResponse({ status: 200, standardSchema: InteractionListSchema, example: ADMIN_EXAMPLES.interactions })
  @AdminRoute(422)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListInteractionsQuerySchema }) q: ListInteractionsQuery): Promise<InteractionListResponse> {
    return { interactions: await this.runs.interactions(principal.orgId, { runId: q.runId, status: q.status, limit: q.limit }) };
  }
}
