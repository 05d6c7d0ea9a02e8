import { Injectable } from '@nestjs/common';
import { DatabaseService } from '#libs/db';

/**
 * One row per agent with its org, active revision (only when published) and enabled A2A
 * binding; the revision / binding columns are null when missing.
 */
export interface DirectoryRow {
  orgId: string;
  orgSlug: string;
  orgName: string;
  agentId: string;
  agentSlug: string;
  agentName: string;
  description: string;
  provider: { organization: string; url: string } | null;
  documentationUrl: string | null;
  iconUrl: string | null;
  isDefault: boolean;
  revisionId: string | null;
  revisionNumber: number | null;
  protocolProfiles: { a2a?: unknown } | null;
  runtime: unknown;
  publishedAt: Date | null;
  modifiedAt: Date | null;
  bindingId: string | null;
  transports: string[] | null;
  path: string | null;
  security: unknown;
  extensions: unknown;
}

const SELECT = `
  SELECT o.id AS "orgId", o.slug AS "orgSlug", o.name AS "orgName",
         a.id AS "agentId", a.slug AS "agentSlug", a.name AS "agentName", a.description, a.provider,
         a.documentation_url AS "documentationUrl", a.icon_url AS "iconUrl", a.is_default AS "isDefault",
         r.id AS "revisionId", r.number AS "revisionNumber", r.protocol_profiles AS "protocolProfiles",
         r.runtime, r.published_at AS "publishedAt",
         GREATEST(a.updated_at, r.published_at, b.updated_at) AS "modifiedAt",
         b.id AS "bindingId", b.transports, b.path, b.security, b.extensions
    FROM agents a
    JOIN organizations o ON o.id = a.org_id
    LEFT JOIN agent_revisions r ON r.id = a.active_revision_id AND r.status = 'published'
    LEFT JOIN protocol_bindings b ON b.agent_id = a.id AND b.protocol = 'a2a' AND b.enabled`;

/** The read side of AgentDirectory: one statement, one round trip, no cache. */
@Injectable()
export class AgentDirectoryRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Named prepared statement: each pooled connection plans it once and reuses the plan
   * (planning this join costs more than executing it).
   */
  async find(orgSlug: string, agentSlug: string): Promise<DirectoryRow | null> {
    const res = await this.db.pool.query<DirectoryRow>({ name: 'registry.directory.find', text: `${SELECT} WHERE o.slug = $1 AND a.slug = $2`, values: [orgSlug, agentSlug] });
    return res.rows[0] ?? null;
  }

  /** The default agent, only when it is servable (published active revision, enabled binding). */
  async findDefault(): Promise<DirectoryRow | null> {
    const res = await this.db.pool.query<DirectoryRow>({
      name: 'registry.directory.find_default',
      text: `${SELECT} WHERE a.is_default AND r.id IS NOT NULL AND b.id IS NOT NULL ORDER BY a.updated_at DESC LIMIT 1`,
    });
    return res.rows[0] ?? null;
  }

  /**
   * Whether any servable agent of the deployment (published active revision, enabled A2A binding;
   * every organization: a readiness question about this process, nothing of an organization is
   * returned) declares each capability that needs a setting of the process serving its card. Two
   * EXISTS probes, each stopping at the first match.
   */
  async claimsAny(): Promise<{ signedAgentCard: boolean; pushNotifications: boolean }> {
    const probe = (capability: string) => `EXISTS (SELECT 1 FROM agents a
        JOIN agent_revisions r ON r.id = a.active_revision_id AND r.status = 'published'
        JOIN protocol_bindings b ON b.agent_id = a.id AND b.protocol = 'a2a' AND b.enabled
       WHERE r.protocol_profiles #>> '{a2a,capabilities,${capability}}' = 'true')`;
    const res = await this.db.pool.query<{ signedAgentCard: boolean; pushNotifications: boolean }>({
      name: 'registry.directory.claims_any',
      text: `SELECT ${probe('signedAgentCard')} AS "signedAgentCard", ${probe('pushNotifications')} AS "pushNotifications"`,
    });
    return res.rows[0]!;
  }

  /**
   * Servable agents of an organization (published active revision, enabled A2A binding) matching
   * every given filter, ordered by slug, after `afterSlug`, at most `limit` (+1 to tell a next page).
   * `q` matches the agent's name or description, or a skill's name, description or tag
   * (case-insensitive substring); `skill` a skill id; `tag` a skill tag; `inputMode` /
   * `outputMode` the revision's default modes.
   */
  async search(orgSlug: string, f: { q?: string; skill?: string; tag?: string; inputMode?: string; outputMode?: string; afterSlug?: string; limit: number }): Promise<DirectoryRow[]> {
    const like = f.q ? `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
    const res = await this.db.pool.query<DirectoryRow>({
      text: `${SELECT}
        WHERE o.slug = $1 AND r.id IS NOT NULL AND b.id IS NOT NULL
          AND ($2::text IS NULL OR a.name ILIKE $2 OR a.description ILIKE $2 OR EXISTS (
                SELECT 1 FROM jsonb_array_elements(r.protocol_profiles->'a2a'->'skillsProjection') s
                 WHERE s->>'name' ILIKE $2 OR s->>'description' ILIKE $2
                    OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(s->'tags') t WHERE t ILIKE $2)))
          AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM jsonb_array_elements(r.protocol_profiles->'a2a'->'skillsProjection') s WHERE s->>'id' = $3))
          AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM jsonb_array_elements(r.protocol_profiles->'a2a'->'skillsProjection') s
                                            WHERE s->'tags' ? $4))
          AND ($5::text IS NULL OR COALESCE(r.protocol_profiles->'a2a'->'defaultInputModes', '["text/plain"]'::jsonb) ? $5)
          AND ($6::text IS NULL OR COALESCE(r.protocol_profiles->'a2a'->'defaultOutputModes', '["text/plain"]'::jsonb) ? $6)
          AND ($7::text IS NULL OR a.slug > $7)
        ORDER BY a.slug LIMIT $8`,
      values: [orgSlug, like, f.skill ?? null, f.tag ?? null, f.inputMode ?? null, f.outputMode ?? null, f.afterSlug ?? null, f.limit + 1],
    });
    return res.rows;
  }
}
