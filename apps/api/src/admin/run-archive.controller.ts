import { once } from 'node:events';
import { Readable } from 'node:stream';
import { Controller, Get, HttpCode, Post, Query, Req, Res, UseGuards, UsePipes } from '@nestjs/common';
import { ApiConsumes, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '#libs/common';
import { ExportRunsQuerySchema, ImportRunsResultSchema, RUN_ARCHIVE_CONTENT_TYPE, type ExportRunsQuery, type ImportRunsResult } from '#libs/contracts';
import type { Principal } from '#libs/registry';
import { RunArchives } from '#libs/runs';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { AdminRoute } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

const LINE_EXAMPLE =
  '{"cursor":"MTc4MDU2NDkwMDAwMC5kM2Q5NDQ2OC0wMmE0LTRlM2ItOGE1Yy02YjdjOGQ5ZTBmMWE","v":1,"agent":{"slug":"echo","revision":1},"run":{"id":"d3d94468-02a4-4e3b-8a5c-6b7c8d9e0f1a","status":"completed","last_sequence":3,"…":"…"},"events":[{"sequence":1,"type":"run.created","payload":{},"created_at":"2026-05-04T09:15:00+00:00"},"…"],"messages":[],"artifacts":[],"interactions":[],"links":[]}\n';

/**
 * Run archives over the admin API (docs/architecture.md "Archives"): export an organization's runs
 * with their whole log as JSON Lines, streamed with backpressure and resumable by cursor, and
 * import an archive into an organization that has no runs. Maps and delegates to RunArchives.
 */
@ApiTags('runs')
@Controller('v1/run-archive')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class RunArchiveController {
  constructor(private readonly archives: RunArchives) {}

  /**
   * `application/x-ndjson`: one line per run (RunArchiveLineSchema), oldest first by (created_at,
   * id). Each line's `cursor` resumes after it (`?cursor=`): a client that lost the connection asks
   * again from the last complete line it holds and gets no duplicate and no gap. The next line is
   * written only once the socket took the previous one (backpressure); the server holds one page
   * (100 runs) at most. An error before the first line is the admin API's JSON error (422 for a
   * bad cursor or filter); one after it cuts the stream short (no newline-terminated last line).
   */
  @Get()
  @ApiOperation({ summary: "Export the organization's runs with their full event log as JSON Lines (filter by agent, status, creation time; resume by cursor)" })
  @ApiResponse({ status: 200, description: 'JSON Lines: one run per line with its log and projections', content: { [RUN_ARCHIVE_CONTENT_TYPE]: { schema: { type: 'string' }, example: LINE_EXAMPLE } } })
  @AdminRoute(422)
  async export(@CurrentPrincipal() principal: Principal, @Query({ schema: ExportRunsQuerySchema }) q: ExportRunsQuery, @Res() reply: FastifyReply): Promise<void> {
    const lines = this.archives.export(
      principal.orgId,
      {
        ...(q.agentId !== undefined && { agentId: q.agentId }),
        ...(q.status !== undefined && { status: q.status }),
        ...(q.createdFrom !== undefined && { createdFrom: new Date(q.createdFrom) }),
        ...(q.createdTo !== undefined && { createdTo: new Date(q.createdTo) }),
      },
      q.cursor,
      q.limit,
    );
    // the first page is read before the response starts, so its errors are ordinary JSON errors
    let next = await lines.next();
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { 'content-type': `${RUN_ARCHIVE_CONTENT_TYPE}; charset=utf-8`, 'cache-control': 'no-store', 'x-request-id': String(reply.request.id) });
    let gone = false;
    const onClose = () => (gone = true);
    raw.once('close', onClose);
    try {
      while (!next.done && !gone) {
        if (!raw.write(`${next.value}\n`)) await Promise.race([once(raw, 'drain'), once(raw, 'close')]);
        next = await lines.next();
      }
      raw.end();
    } catch {
      // a failure mid-stream: cut it short so the client sees an incomplete archive and resumes
      raw.destroy();
    } finally {
      raw.off('close', onClose);
      await lines.return(undefined);
    }
  }

  /**
   * Import an archive (the body, `application/x-ndjson`, as GET exported it) into the caller's
   * organization, which must have no runs: all or nothing, read line by line as it arrives and
   * written once it has all arrived (RunArchives.import). Errors: 409 `archive.org_not_empty`,
   * 409 `archive.conflict`, 409 `archive.import_in_progress`, 413 `archive.too_large` (also at once
   * for a declared Content-Length past ARCHIVE_IMPORT_MAX_BODY_BYTES), 413 `archive.line_too_long`,
   * 415 for another content type, 422 `archive.too_deep`, 422 `archive.invalid` (with the line
   * number), 403 `org.storage_quota_exceeded`.
   */
  @Post()
  @HttpCode(200)
  @ApiConsumes(RUN_ARCHIVE_CONTENT_TYPE)
  @ApiOperation({ summary: 'Import a run archive (JSON Lines) into this organization, which must have no runs; all or nothing' })
  @ApiResponse({ status: 200, standardSchema: ImportRunsResultSchema, example: { runs: 120, events: 1480, linksSkipped: 0 } })
  @AdminRoute(403, 409, 413, 422)
  async import(@CurrentPrincipal() principal: Principal, @Req() req: FastifyRequest): Promise<ImportRunsResult> {
    const body = req.body;
    if (!(body instanceof Readable)) throw new AppError('request.unsupported_media_type', `an archive is sent as ${RUN_ARCHIVE_CONTENT_TYPE}`);
    try {
      const declared = Number(req.headers['content-length']);
      if (declared > this.archives.maxBodyBytes) {
        throw new AppError('archive.too_large', `the archive is larger than ${this.archives.maxBodyBytes} bytes (ARCHIVE_IMPORT_MAX_BODY_BYTES); split it and import the parts into separate organizations, or ask the operator to raise the limit`, {
          details: { maxBodyBytes: this.archives.maxBodyBytes },
        });
      }
      // an import refused mid-body must still answer: leaving the loop must not destroy the request
      return await this.archives.import(principal.orgId, body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>);
    } finally {
      body.resume(); // drain what an early refusal left unread, so the answer goes out
    }
  }
}
