import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, RETRY_AFTER_SECONDS, isDependencyUnavailable } from '#libs/common';
import { CancelRunBodySchema, ErrorResponseSchema, RunDetailSchema, RunEventsStreamQuerySchema, type CancelRunBody, type RunDetailResponse, type RunEventsStreamQuery } from '#libs/contracts';
import type { Principal } from '#libs/registry';
import { CancelRunHandler, RunStreamHub, RunViews, isTerminal } from '#libs/runs';
import { SseHeartbeat } from '../common/sse.js';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { toRunDetail } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import { IDEMPOTENCY_HEADER_DOC } from './organizations.controller.js';

const STREAM_EXAMPLE =
  'id: 1\ndata: {"runId":"d3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a","threadId":"6512bd43-d9ca-4a6e-8b1f-2c3d4e5f6a7b","sequence":1,"occurredAt":"2026-05-04T09:15:00.000Z","event":{"type":"run.created","payload":{}}}\n\n' +
  'id: 2\ndata: {"runId":"d3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a","threadId":"6512bd43-d9ca-4a6e-8b1f-2c3d4e5f6a7b","sequence":2,"occurredAt":"2026-05-04T09:15:01.250Z","event":{"type":"run.status_changed","payload":{"status":"completed","blockedReason":null}}}\n\n' +
  'event: end\ndata: {"status":"completed","lastSequence":2}\n\n';

/**
 * The live side of the admin runs API, for operators (the console, scripts): follow a run's
 * event log over Server-Sent Events, and cancel a run. Reads and writes go through the same lib
 * services as the A2A face (RunStreamHub, CancelRunHandler); nothing here holds policy.
 */
@ApiTags('runs')
@Controller('v1/runs')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RunLiveController {
  constructor(
    private readonly runs: RunViews,
    private readonly hub: RunStreamHub,
    private readonly cancelRun: CancelRunHandler,
    private readonly sse: SseHeartbeat,
  ) {}

  /**
   * `text/event-stream` of SequencedOutputEnvelopes after `after` (or the `Last-Event-ID`
   * header: each frame's `id` is its sequence, so a reconnecting client resumes without gaps or
   * duplicates). Once the run is terminal and every event of it was sent, a last `event: end`
   * frame (`{ status, lastSequence }`) and the stream closes. Errors before the stream opens are
   * the admin API's JSON errors: 404 `run.not_found`, 422, 429 `rate_limited` when the key holds
   * MAX_STREAMS_PER_CALLER streams in this process already, 503 `service.unavailable`. An error
   * after it is one `event: error` frame: `service.unavailable` (resume shortly) or `internal`.
   */
  @Get(':runId/events/stream')
  @ApiOperation({ summary: "Follow a run's event log live over SSE (resume with Last-Event-ID); ends with `event: end` once the run is terminal" })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'The last sequence received; the stream resumes after it (wins over `after`)' })
  @ApiResponse({
    status: 200,
    description: 'SSE frames: `id` = sequence, `data` = a SequencedOutputEnvelope; finally `event: end`',
    content: { 'text/event-stream': { schema: { type: 'string' }, example: STREAM_EXAMPLE } },
  })
  @AdminRoute(404, 422)
  @ApiResponse({
    status: 429,
    description: 'The API key holds MAX_STREAMS_PER_CALLER streams in this process already',
    standardSchema: ErrorResponseSchema,
    example: { error: { code: 'request.rate_limited', message: 'too many open streams for this API key; close one and resume with Last-Event-ID' }, requestId: '0f8fad5b-d9cb-469f-a165-70867728950e' },
  })
  async stream(
    @CurrentPrincipal() principal: Principal,
    @Param('runId') runId: string,
    @Query({ schema: RunEventsStreamQuerySchema }) q: RunEventsStreamQuery,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const lastEventId = req.headers['last-event-id'];
    const resumed = typeof lastEventId === 'string' && /^\d{1,15}$/.test(lastEventId.trim()) ? Number(lastEventId.trim()) : undefined;
    let cursor = resumed ?? q.after;
    const run = await this.runs.require(principal.orgId, runId);
    const release = this.sse.reserve(`admin:${principal.keyId}`);
    if (!release) throw new AppError('request.rate_limited', 'too many open streams for this API key; close one and resume with Last-Event-ID');
    const sse = this.sse.open(reply);
    const ac = new AbortController();
    sse.link(ac);
    const finished = async (status: string, lastSequence: number) => {
      await sse.send({ event: 'end', data: JSON.stringify({ status, lastSequence }) });
    };
    try {
      if (isTerminal(run.status) && cursor >= run.lastSequence) return await finished(run.status, run.lastSequence);
      for await (const env of this.hub.follow(principal.orgId, runId, cursor, ac.signal)) {
        await sse.send({ id: env.sequence, data: JSON.stringify(env) });
        cursor = env.sequence;
        if (!sse.open) break;
        if (env.event.type !== 'run.status_changed') continue;
        // a terminal status is (nearly always) the last event; the run row says whether more followed it
        const now = await this.runs.get(principal.orgId, runId);
        if (now && isTerminal(now.status) && cursor >= now.lastSequence) return await finished(now.status, now.lastSequence);
      }
    } catch (e) {
      // the status is sent already: the frame says whether resuming shortly will do (the database came and went)
      const unavailable = e instanceof AppError ? e.code === 'service.unavailable' : isDependencyUnavailable(e);
      const error = unavailable
        ? { code: 'service.unavailable', message: 'the stream failed: the service is temporarily unavailable; resume with Last-Event-ID shortly', details: { retryAfterSeconds: RETRY_AFTER_SECONDS } }
        : { code: 'internal', message: 'the stream failed; resume with Last-Event-ID' };
      await sse.send({ event: 'error', data: JSON.stringify({ error }) });
    } finally {
      ac.abort();
      release();
      sse.end();
    }
  }

  @Post(':runId/cancel')
  @HttpCode(200)
  @UseInterceptors(IdempotencyInterceptor)
  @ApiOperation({ summary: 'Cancel a run (CancelRunCommand, as A2A CancelTask would; open interactions are canceled with it, then its open children); the run after it' })
  @ApiHeader(IDEMPOTENCY_HEADER_DOC)
  @ApiResponse({ status: 200, standardSchema: RunDetailSchema, example: { ...ADMIN_EXAMPLES.run, run: { ...ADMIN_EXAMPLES.run.run, status: 'canceled', blockedReason: null, openInteractionId: null } } })
  @RequestExamples({
    reason: { summary: 'With a reason (recorded on the status event)', value: { reason: 'stuck on a dead upstream' } },
    plain: { summary: 'Without a reason', value: {} },
  })
  @AdminRoute(404, 409, 422)
  async cancel(@CurrentPrincipal() principal: Principal, @Param('runId') runId: string, @Body({ schema: CancelRunBodySchema }) body: CancelRunBody): Promise<RunDetailResponse> {
    await this.cancelRun.execute({ orgId: principal.orgId, runId, reason: body.reason ?? 'canceled by an operator' });
    const { view, interactions, links } = await this.runs.detail(principal.orgId, runId);
    return toRunDetail(view, interactions, links);
  }
}
