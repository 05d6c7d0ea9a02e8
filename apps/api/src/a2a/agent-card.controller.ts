import { createHash } from 'node:crypto';
import { Controller, Get, Inject, Param, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GrpcEndpoint, negotiateVersion, projectAgentCard, toV03AgentCard } from '#libs/a2a';
import { AppError } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AgentDirectory, SigningKeyService, type ResolvedA2AAgent } from '#libs/registry';
import { publicBaseUrl, requestedVersion, sendJson } from './a2a-http.js';
import { AgentCardSigner } from './agent-card.signer.js';

/** Cards change when a revision is activated or a binding edited: cache briefly, revalidate by ETag. */
const CARD_CACHE_CONTROL = 'public, max-age=60';

/**
 * Agent Cards (A2A v1.0 §8.2, RFC 8615): `/a2a/:org/:agent/.well-known/agent-card.json` for each
 * published agent, and `/.well-known/agent-card.json` at the host root for the deployment's
 * default agent. Public (no credentials). `ETag` is a hash of the body; `If-None-Match` → 304.
 * Unknown or unpublished agent → 404 with the admin error body (AppExceptionFilter).
 *
 * The v1.0 card is served unless the caller asks for `A2A-Version: 0.3` explicitly, which gets
 * the same card in the v0.3 shape (`Vary: A2A-Version`), signed by the same keys over its own
 * canonical form (`canonicalCard` of libs/trust). A header-less fetch gets v1.0: cards
 * are discovery documents that browsers and tools fetch without the header, while the v1.0
 * interfaces it lists still say which URL answers 0.3 calls.
 */
@ApiExcludeController()
@Controller()
export class AgentCardController {
  constructor(
    private readonly directory: AgentDirectory,
    private readonly keys: SigningKeyService,
    private readonly signer: AgentCardSigner,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly grpc: GrpcEndpoint,
  ) {}

  /**
   * The organization's public signing keys (JWKS, RFC 7517): every active key, so verifiers of
   * its cards find the `kid` of each signature (`jku` of the signatures points here).
   */
  @Get('a2a/:org/.well-known/jwks.json')
  async jwks(@Param('org') org: string, @Res() reply: FastifyReply): Promise<void> {
    sendJson(reply, 200, await this.keys.jwks(org), { 'cache-control': 'public, max-age=60' });
  }

  @Get('a2a/:org/:agent/.well-known/agent-card.json')
  async agentCard(@Param('org') org: string, @Param('agent') agent: string, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await this.send(await this.directory.resolve(org, agent), req, reply);
  }

  @Get('.well-known/agent-card.json')
  async defaultAgentCard(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await this.send(await this.directory.resolveDefault(), req, reply);
  }

  private async send(resolved: ResolvedA2AAgent, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const base = publicBaseUrl(this.config, req);
    const projected = projectAgentCard(resolved, base, this.grpc);
    const v1 = projected ? await this.signer.sign(projected as unknown as Record<string, unknown>, resolved, base) : null;
    let card = v1;
    if (v1 && wantsV03(req)) {
      // the v0.3 shape is signed over itself: a v0.3 verifier checks the card it received
      const v03 = toV03AgentCard(projected!);
      card = v03 && (await this.signer.sign(v03 as unknown as Record<string, unknown>, resolved, base));
    }
    if (!card) {
      throw new AppError('agent.not_published', `agent ${resolved.org.slug}/${resolved.agent.slug} has no A2A transport this deployment serves`);
    }
    const body = JSON.stringify(card);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
    // the newest change of anything the card is made of: agent, revision, binding, signing keys
    const keysChangedAt = (await this.keys.list(resolved.org.id)).reduce((t, k) => Math.max(t, k.createdAt.getTime(), k.retiredAt?.getTime() ?? 0), 0);
    const modified = Math.floor(Math.max(new Date(resolved.modifiedAt).getTime(), keysChangedAt) / 1000) * 1000;
    const headers = { 'cache-control': CARD_CACHE_CONTROL, etag, 'last-modified': new Date(modified).toUTCString(), vary: 'A2A-Version' };
    const inm = req.headers['if-none-match'];
    const ims = req.headers['if-modified-since'];
    // RFC 9110 §13.2.2: If-None-Match wins; If-Modified-Since only when it is absent
    const notModified =
      typeof inm === 'string'
        ? inm.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^W\//, '') === etag)
        : typeof ims === 'string' && !Number.isNaN(Date.parse(ims)) && modified <= Date.parse(ims);
    if (notModified) {
      void reply.status(304).headers(headers).send();
      return;
    }
    sendJson(reply, 200, card, headers);
  }
}

/** True when the caller explicitly asked for A2A 0.3 (an absent header gets the v1.0 card). */
function wantsV03(req: FastifyRequest): boolean {
  const raw = requestedVersion(req);
  if (raw === undefined || raw.trim() === '') return false;
  try {
    return negotiateVersion(raw) === '0.3';
  } catch {
    return false;
  }
}
