import { Injectable } from '@nestjs/common';
import { AppError, TtlLruCache } from '#libs/common';
import { A2AExtensionSchema, A2AProfileSchema, A2ATransportSchema, BindingSecuritySchema } from '#libs/contracts';
import { z } from 'zod';
import { AgentDirectoryRepository, type DirectoryRow } from './agent-directory.repository.js';
import type { ResolvedA2AAgent } from './registry.types.js';

const TransportsSchema = z.array(A2ATransportSchema);
const ExtensionsSchema = z.array(A2AExtensionSchema);

/** Most entries the resolve cache keeps (least recently used evicted first). */
const CACHE_MAX = 10_000;

/**
 * What the A2A adapter asks the registry: which agent, revision and binding serve a path.
 * One round trip per uncached call.
 *
 * Caching: `resolve(…, { maxAgeMs })` may answer from a per-process cache no older than
 * `maxAgeMs` (the SendMessage hot path uses AGENT_CACHE_TTL_MS). Any registry write through this
 * process clears the cache at once (`invalidate`); another instance sees a publish, activation or
 * disabled binding within `maxAgeMs`. Cards and admin reads use `maxAgeMs: 0` (always fresh).
 */
@Injectable()
export class AgentDirectory {
  // no TTL of its own: each lookup says how old an answer it takes (maxAgeMs)
  private readonly cache = new TtlLruCache<string, ResolvedA2AAgent>(CACHE_MAX, 0);

  constructor(private readonly repo: AgentDirectoryRepository) {}

  /**
   * The agent served at `/a2a/<orgSlug>/<agentSlug>`.
   * Throws AppError `agent.not_found` when the org or the agent is unknown; `agent.not_published`
   * when the agent has no active published revision or no enabled A2A binding (never cached).
   */
  async resolve(orgSlug: string, agentSlug: string, opts: { maxAgeMs?: number } = {}): Promise<ResolvedA2AAgent> {
    const key = `${orgSlug}/${agentSlug}`;
    const maxAge = opts.maxAgeMs ?? 0;
    if (maxAge > 0) {
      const hit = this.cache.get(key, maxAge);
      if (hit) return hit;
    }
    const row = await this.repo.find(orgSlug, agentSlug);
    if (!row) throw new AppError('agent.not_found', `agent ${orgSlug}/${agentSlug} not found`, { details: { orgSlug, agentSlug } });
    const agent = toResolved(row);
    this.cache.set(key, agent);
    return agent;
  }

  /** Forget every cached resolution (called after any registry write in this process). */
  invalidate(): void {
    this.cache.clear();
  }

  /**
   * Search an organization's servable agents (the curated registry): filters as
   * AgentDirectoryRepository.search, ordered by slug, keyset after `afterSlug`. Returns at most
   * `limit` agents and whether another page follows. Agents whose stored profile no longer
   * parses are left out rather than failing the search.
   */
  async search(
    orgSlug: string,
    f: { q?: string; skill?: string; tag?: string; inputMode?: string; outputMode?: string; afterSlug?: string; limit: number },
  ): Promise<{ agents: ResolvedA2AAgent[]; more: boolean }> {
    const rows = await this.repo.search(orgSlug, f);
    const agents: ResolvedA2AAgent[] = [];
    for (const row of rows.slice(0, f.limit)) {
      try {
        agents.push(toResolved(row));
      } catch {
        // a revision stored before a schema change: not searchable, still resolvable elsewhere
      }
    }
    return { agents, more: rows.length > f.limit };
  }

  /**
   * The agent marked `isDefault` (served at the host root), when it has an active published
   * revision and an enabled A2A binding. Throws `agent.not_published` otherwise.
   */
  async resolveDefault(): Promise<ResolvedA2AAgent> {
    const row = await this.repo.findDefault();
    if (!row) throw new AppError('agent.not_published', 'no default agent is published');
    return toResolved(row);
  }
}

function toResolved(row: DirectoryRow): ResolvedA2AAgent {
  if (row.revisionId === null || row.bindingId === null || row.publishedAt === null || row.path === null) {
    throw new AppError('agent.not_published', `agent ${row.orgSlug}/${row.agentSlug} is not published`, {
      details: { orgSlug: row.orgSlug, agentSlug: row.agentSlug },
    });
  }
  return {
    org: { id: row.orgId, slug: row.orgSlug, name: row.orgName },
    agent: {
      id: row.agentId,
      slug: row.agentSlug,
      name: row.agentName,
      description: row.description,
      provider: row.provider ?? null,
      documentationUrl: row.documentationUrl,
      iconUrl: row.iconUrl,
      isDefault: row.isDefault,
    },
    revision: {
      id: row.revisionId,
      number: row.revisionNumber!,
      a2a: parseStored(A2AProfileSchema, row.protocolProfiles?.a2a, row, 'protocolProfiles.a2a'),
      runtime: row.runtime,
      publishedAt: row.publishedAt,
    },
    modifiedAt: row.modifiedAt ?? row.publishedAt,
    binding: {
      id: row.bindingId,
      transports: parseStored(TransportsSchema, row.transports, row, 'binding.transports'),
      path: row.path,
      security: parseStored(BindingSecuritySchema, row.security, row, 'binding.security'),
      extensions: parseStored(ExtensionsSchema, row.extensions ?? [], row, 'binding.extensions'),
    },
  };
}

/** Stored data was validated on write; a failure here is a data bug, reported as `internal`. */
function parseStored<S extends z.ZodType>(schema: S, value: unknown, row: DirectoryRow, what: string): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AppError('internal', `stored ${what} of agent ${row.orgSlug}/${row.agentSlug} is invalid`, { cause: parsed.error });
  }
  return parsed.data;
}
