import { createHmac, timingSafeEqual } from 'node:crypto';
import { Controller, Get, Inject, Param, Query, Req } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, invalidRequest } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AgentDirectory } from '#libs/registry';
import { publicBaseUrl } from './a2a-http.js';

const SearchQuerySchema = z.strictObject({
  q: z.string().min(1).max(200).optional(),
  skill: z.string().min(1).max(200).optional(),
  tag: z.string().min(1).max(200).optional(),
  inputMode: z.string().min(1).max(200).optional(),
  outputMode: z.string().min(1).max(200).optional(),
  pageSize: z.coerce.number().int().min(1).max(100).default(20),
  pageToken: z.string().max(512).optional(),
});

const TOKEN_DOMAIN = 'aaas.registry.search/v1\n';

/**
 * The curated registry (our API; A2A leaves discovery beyond the well-known card open): search an
 * organization's published agents by free text, skill id, tag and input / output mode, in pages.
 * Public — a registry lists what anyone may discover; each result carries its card URL.
 *
 *   GET /registry/<org>/agents?q=&skill=&tag=&inputMode=&outputMode=&pageSize=&pageToken=
 *   → { agents: [{ slug, name, description, skills: [{ id, name, tags }], inputModes, outputModes, cardUrl }], nextPageToken }
 *
 * Errors (admin error shape): 422 `request.invalid` for a bad filter or a page token this
 * service did not issue for the same filters (tokens are HMAC-signed).
 */
@ApiTags('registry')
@Controller('registry')
export class RegistryController {
  constructor(
    private readonly directory: AgentDirectory,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get(':org/agents')
  @ApiOperation({ summary: "Search an organization's published agents (public)" })
  async search(@Param('org') org: string, @Query() raw: Record<string, unknown>, @Req() req: FastifyRequest) {
    const parsed = SearchQuerySchema.safeParse(raw);
    if (!parsed.success) throw invalidRequest(parsed.error.issues, 'query');
    const { pageSize, pageToken, ...filters } = parsed.data;
    const fingerprint = JSON.stringify([org, filters.q, filters.skill, filters.tag, filters.inputMode, filters.outputMode]);
    const afterSlug = pageToken !== undefined ? this.decode(pageToken, fingerprint) : undefined;
    const { agents, more } = await this.directory.search(org, { ...filters, afterSlug, limit: pageSize });
    const base = publicBaseUrl(this.config, req);
    return {
      agents: agents.map((a) => ({
        slug: a.agent.slug,
        name: a.revision.a2a.identityProjection.name ?? a.agent.name,
        description: a.revision.a2a.identityProjection.description ?? a.agent.description,
        skills: a.revision.a2a.skillsProjection.map((s) => ({ id: s.id, name: s.name, tags: s.tags })),
        inputModes: a.revision.a2a.defaultInputModes,
        outputModes: a.revision.a2a.defaultOutputModes,
        cardUrl: `${base}${a.binding.path}/.well-known/agent-card.json`,
      })),
      nextPageToken: more && agents.length > 0 ? this.encode(agents.at(-1)!.agent.slug, fingerprint) : '',
    };
  }

  private mac(slug: string, fingerprint: string): string {
    return createHmac('sha256', this.config.PAGE_TOKEN_SECRET).update(`${TOKEN_DOMAIN}${fingerprint}\n${slug}`).digest('base64url').slice(0, 22);
  }

  private encode(slug: string, fingerprint: string): string {
    return `${Buffer.from(slug, 'utf8').toString('base64url')}.${this.mac(slug, fingerprint)}`;
  }

  private decode(token: string, fingerprint: string): string {
    const [s, m] = token.split('.');
    const slug = s ? Buffer.from(s, 'base64url').toString('utf8') : '';
    const expected = Buffer.from(this.mac(slug, fingerprint));
    const given = Buffer.from(m ?? '');
    if (!slug || expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new AppError('request.invalid', 'invalid pageToken', { details: { issues: [{ path: 'pageToken', message: 'not a token returned by this search' }] } });
    }
    return slug;
  }
}
