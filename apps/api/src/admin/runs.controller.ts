import { Controller, Get, Inject, Param, Query, UseGuards, UsePipes } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  ListRunsQuerySchema,
  RunDetailSchema,
  RunEventsQuerySchema,
  RunEventsSchema,
  RunListSchema,
  type ListRunsQuery,
  type RunDetailResponse,
  type RunEventsQuery,
  type RunListResponse,
  type SequencedOutputEnvelope,
} from '#libs/contracts';
import type { Principal } from '#libs/registry';
import { RunQueries } from '#libs/runs';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { decodeRunCursor, encodeRunCursor, toRunDetail, toRunSummary } from './admin.mappers.js';
import { AdminRoute } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

@ApiTags('runs')
@Controller('v1/runs')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RunsController {
  constructor(
    private readonly runs: RunQueries,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  @ApiOperation({ summary: "The organization's runs, newest status change first (keyset pagination)" })
  @ApiResponse({ status: 200, standardSchema: RunListSchema })
  @AdminRoute(422)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListRunsQuerySchema }) q: ListRunsQuery): Promise<RunListResponse> {
    const before = q.cursor !== undefined ? decodeRunCursor(q.cursor, this.config.PAGE_TOKEN_SECRET) : undefined;
    const rows = await this.runs.list(principal.orgId, { agentId: q.agentId, threadId: q.contextId, status: q.status, before, limit: q.limit });
    const page = rows.slice(0, q.limit);
    return { runs: page.map(toRunSummary), nextCursor: rows.length > q.limit ? encodeRunCursor(page.at(-1)!, this.config.PAGE_TOKEN_SECRET) : null };
  }

  @Get(':runId')
  @ApiOperation({ summary: 'A run with its history and artifacts' })
  @ApiResponse({ status: 200, standardSchema: RunDetailSchema })
  @AdminRoute(404)
  async get(@CurrentPrincipal() principal: Principal, @Param('runId') runId: string): Promise<RunDetailResponse> {
    return toRunDetail(await this.runs.view(principal.orgId, runId));
  }

  @Get(':runId/events')
  @ApiOperation({ summary: "A run's event log after a sequence (SequencedOutputEnvelope[])" })
  @ApiResponse({ status: 200, standardSchema: RunEventsSchema })
  @AdminRoute(404, 422)
  async events(
    @CurrentPrincipal() principal: Principal,
    @Param('runId') runId: string,
    @Query({ schema: RunEventsQuerySchema }) q: RunEventsQuery,
  ): Promise<{ events: SequencedOutputEnvelope[]; nextAfter: number }> {
    await this.runs.requireRun(principal.orgId, runId);
    const events = await this.runs.readEvents(principal.orgId, runId, q.after, q.limit);
    return { events, nextAfter: events.at(-1)?.sequence ?? q.after };
  }
}
