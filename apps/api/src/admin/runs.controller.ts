import { randomUUID } from 'node:crypto';
import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { AppError, invalidRequest } from '#libs/common';

const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import {
  ListRunsQuerySchema,
  RunDetailSchema,
  RunEventsQuerySchema,
  RunEventsSchema,
  RunListSchema,
  RespondInteractionBodySchema,
  PushConfigListSchema,
  type BlockedReason,
  type Part,
  type RespondInteractionBody,
  type ListRunsQuery,
  type RunDetailResponse,
  type RunEventsQuery,
  type RunListResponse,
  type SequencedOutputEnvelope,
} from '#libs/contracts';
import type { Principal } from '#libs/registry';
import { RespondInteractionHandler, RunViews, isUuid, type RunState } from '#libs/runs';
import { PushConfigService, type PushConfigAudit } from '#libs/push';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IDEMPOTENCY_HEADER_DOC } from './organizations.controller.js';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { decodeRunCursor, encodeRunCursor, toRunDetail, toRunSummary } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

@ApiTags('runs')
@Controller('v1/runs')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RunsController {
  constructor(
    private readonly runs: RunViews,
    private readonly respondInteraction: RespondInteractionHandler,
    private readonly push: PushConfigService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  @ApiOperation({ summary: "The organization's runs, newest status change first (keyset pagination)" })
  @ApiResponse({ status: 200, standardSchema: RunListSchema, example: ADMIN_EXAMPLES.runs })
  @AdminRoute(422)
  async list(@CurrentPrincipal() principal: Principal, @Query({ schema: ListRunsQuerySchema }) q: ListRunsQuery): Promise<RunListResponse> {
    // `statusTo` is the keyset bound (statusTo, the greatest uuid): runs whose status changed at or before it
    const before = q.cursor !== undefined ? decodeRunCursor(q.cursor, this.config.PAGE_TOKEN_SECRET) : q.statusTo !== undefined ? { statusAt: new Date(q.statusTo), id: MAX_UUID } : undefined;
    let rows: RunState[];
    if (q.q !== undefined) {
      if (q.agentId === undefined || [q.status, q.blocked, q.contextId, q.kind, q.statusFrom, q.statusTo].some((v) => v !== undefined)) {
        throw invalidRequest([{ path: ['q'], message: 'text search needs agentId and combines with no other filter' }]);
      }
      rows = await this.runs.search(principal.orgId, q.agentId, { query: q.q, before, limit: q.limit });
    } else {
      const blocked = q.blocked === undefined ? undefined : q.blocked[0] === 'none' ? ('none' as const) : (q.blocked as BlockedReason[]);
      rows = await this.runs.list(principal.orgId, {
        agentId: q.agentId,
        threadId: q.contextId,
        kind: q.kind,
        status: q.status,
        blocked,
        ...(q.statusFrom !== undefined && { statusFrom: new Date(q.statusFrom) }),
        before,
        limit: q.limit,
      });
    }
    const page = rows.slice(0, q.limit);
    return { runs: page.map(toRunSummary), nextCursor: rows.length > q.limit ? encodeRunCursor(page.at(-1)!, this.config.PAGE_TOKEN_SECRET) : null };
  }

  @Get(':runId')
  @ApiOperation({ summary: 'A run with its history, artifacts, interactions (open and closed) and links (children and parents)' })
  @ApiResponse({ status: 200, standardSchema: RunDetailSchema, example: ADMIN_EXAMPLES.run })
  @AdminRoute(404)
  async get(@CurrentPrincipal() principal: Principal, @Param('runId') runId: string): Promise<RunDetailResponse> {
    return this.detail(principal.orgId, runId);
  }

  @Post(':runId/interactions/:interactionId/responses')
  @HttpCode(200)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Answer an interaction of the run (RespondInteractionCommand, as an A2A message on the task would); the run after it' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 200, standardSchema: RunDetailSchema, example: ADMIN_EXAMPLES.respondInteraction.response })
  @RequestExamples(ADMIN_EXAMPLES.respondInteraction.request)
  @AdminRoute(404, 409, 422)
  async respond(
    @CurrentPrincipal() principal: Principal,
    @Param('runId') runId: string,
    @Param('interactionId') interactionId: string,
    @Body({ schema: RespondInteractionBodySchema }) body: RespondInteractionBody,
  ): Promise<RunDetailResponse> {
    if (!isUuid(interactionId)) throw new AppError('interaction.not_found', `run ${runId} has no interaction ${interactionId}`);
    const parts: Part[] = body.parts ?? (body.text !== undefined ? [{ text: body.text }] : [{ data: { optionId: body.optionId } }]);
    await this.respondInteraction.execute({
      orgId: principal.orgId,
      runId,
      interactionId,
      message: { messageId: body.messageId ?? randomUUID(), role: 'user', parts },
      ...(body.optionId !== undefined && { optionId: body.optionId }),
      submittedBy: principal.keyId,
    });
    return this.detail(principal.orgId, runId);
  }

  @Get(':runId/push-configs')
  @ApiOperation({ summary: "A run's push notification configs with their delivery state and newest attempts (status, latency, error)" })
  @ApiResponse({ status: 200, standardSchema: PushConfigListSchema, example: ADMIN_EXAMPLES.pushConfigs })
  @AdminRoute(404)
  async pushConfigs(@CurrentPrincipal() principal: Principal, @Param('runId') runId: string): Promise<{ configs: PushConfigAudit[] }> {
    await this.runs.require(principal.orgId, runId);
    return { configs: await this.push.audit(principal.orgId, runId) };
  }

  private async detail(orgId: string, runId: string): Promise<RunDetailResponse> {
    const { view, interactions, links } = await this.runs.detail(orgId, runId);
    return toRunDetail(view, interactions, links);
  }

  @Get(':runId/events')
  @ApiOperation({ summary: "A run's event log after a sequence (SequencedOutputEnvelope[])" })
  @ApiResponse({ status: 200, standardSchema: RunEventsSchema, example: ADMIN_EXAMPLES.runEvents })
  @AdminRoute(404, 422)
  async events(
    @CurrentPrincipal() principal: Principal,
    @Param('runId') runId: string,
    @Query({ schema: RunEventsQuerySchema }) q: RunEventsQuery,
  ): Promise<{ events: SequencedOutputEnvelope[]; nextAfter: number }> {
    await this.runs.require(principal.orgId, runId);
    const events = await this.runs.events(principal.orgId, runId, q.after, q.limit);
    return { events, nextAfter: events.at(-1)?.sequence ?? q.after };
  }
}
