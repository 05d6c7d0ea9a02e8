import { Injectable } from '@nestjs/common';
import type { RunStatus } from '#libs/contracts';
import { DatabaseService } from '#libs/db';

/** Filter of an archive export; every bound optional. */
export interface ArchiveFilter {
  agentId?: string;
  status?: RunStatus[];
  /** created_at >= createdFrom */
  createdFrom?: Date;
  /** created_at < createdTo */
  createdTo?: Date;
}

/** The keyset position of an export: the last run written, by (created_at, id). */
export interface ArchivePosition {
  createdAt: Date;
  id: string;
}

/** One run's archive line (JSON text without its cursor) and its keyset position. */
export interface ArchiveRow extends ArchivePosition {
  line: string;
}

const STRIP_RUN = `- 'org_id' - 'agent_id' - 'revision_id' - 'lease_owner' - 'lease_trigger' - 'lease_expires_at' - 'execution_epoch'`;

/** The select list of one archive line per run `r` of organization `$1` (its agent `a`, revision `rv`). */
const LINE_SELECT = `
SELECT r.id, r.created_at AS "createdAt", jsonb_build_object(
  'v', 1,
  'agent', jsonb_build_object('slug', a.slug, 'revision', rv.number),
  'run', to_jsonb(r) ${STRIP_RUN},
  'events', (SELECT coalesce(jsonb_agg(jsonb_build_object('sequence', e.sequence, 'type', e.type, 'payload', e.payload, 'created_at', e.created_at) ORDER BY e.sequence), '[]'::jsonb)
               FROM run_events e WHERE e.run_id = r.id AND e.org_id = $1),
  'messages', (SELECT coalesce(jsonb_agg(to_jsonb(m) - 'org_id' - 'agent_id' - 'run_id' ORDER BY m.sequence, m.id), '[]'::jsonb)
               FROM messages m WHERE m.run_id = r.id AND m.org_id = $1),
  'artifacts', (SELECT coalesce(jsonb_agg(to_jsonb(x) - 'org_id' - 'run_id' ORDER BY x.sequence, x.id), '[]'::jsonb)
               FROM artifacts x WHERE x.run_id = r.id AND x.org_id = $1),
  'interactions', (SELECT coalesce(jsonb_agg(to_jsonb(i) - 'org_id' - 'run_id' ORDER BY i.sequence, i.id), '[]'::jsonb)
               FROM interaction_requests i WHERE i.run_id = r.id AND i.org_id = $1),
  'links', (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'org_id' ORDER BY l.sequence, l.id), '[]'::jsonb)
               FROM run_links l WHERE l.child_run_id = r.id AND l.org_id = $1)
)::text AS line
`;
const LINE_FROM = `
  FROM runs r
  JOIN agents a ON a.id = r.agent_id AND a.org_id = $1
  JOIN agent_revisions rv ON rv.id = r.revision_id AND rv.org_id = $1`;

/**
 * One page of an organization's runs as archive lines, built in PostgreSQL (one statement per
 * page): each run's row, its whole log in sequence order and its projection rows, keyed by
 * `(created_at, id)` (index runs_org_id_created_at_id_idx), so a page costs the same at any depth.
 */
const PAGE_SQL = `${LINE_SELECT}${LINE_FROM}
 WHERE r.org_id = $1
   AND ($2::uuid IS NULL OR r.agent_id = $2::uuid)
   AND ($3::run_status[] IS NULL OR r.status = ANY($3::run_status[]))
   AND ($4::timestamptz IS NULL OR r.created_at >= $4::timestamptz)
   AND ($5::timestamptz IS NULL OR r.created_at < $5::timestamptz)
   AND ($6::timestamptz IS NULL OR (r.created_at, r.id) > ($6::timestamptz, $7::uuid))
 ORDER BY r.created_at, r.id
 LIMIT $8`;

/** The archive lines of the given runs of organization $1 ($2: ids), oldest first: what retention archives. */
export const LINES_OF_RUNS_SQL = `${LINE_SELECT}${LINE_FROM}
 WHERE r.org_id = $1 AND r.id = ANY($2::uuid[])
 ORDER BY r.created_at, r.id`;

/**
 * Reads for run archives (export) and the agent revisions an import maps to. Every query is
 * scoped by organization. The import's writes are the event log's bulk-load path
 * (`EventLogRepository.restore`).
 */
@Injectable()
export class RunArchiveRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * The next `limit` runs after `after` (exclusive) matching `filter`, oldest first. A lag-tolerant
   * read (the read replica may serve it, DatabaseService.readQuery). Retention archives through
   * LINES_OF_RUNS_SQL on the primary instead.
   */
  async page(orgId: string, filter: ArchiveFilter, after: ArchivePosition | null, limit: number): Promise<ArchiveRow[]> {
    return this.db.readQuery<ArchiveRow>(
      PAGE_SQL,
      [orgId, filter.agentId ?? null, filter.status ?? null, filter.createdFrom ?? null, filter.createdTo ?? null, after?.createdAt ?? null, after?.id ?? null, limit],
      'runs.archive_page',
    );
  }

  /** Whether the organization has any run (an import's early refusal; the write transaction checks again). */
  async hasRuns(orgId: string): Promise<boolean> {
    const [row] = await this.db.query<{ taken: boolean }>(`SELECT EXISTS (SELECT 1 FROM runs WHERE org_id = $1) AS taken`, [orgId], 'runs.archive_has_runs');
    return row!.taken;
  }

  /** The organization's revisions keyed `<agent slug>#<revision number>` → the agent and revision ids. */
  async revisions(orgId: string): Promise<Map<string, { agentId: string; revisionId: string }>> {
    const rows = await this.db.query<{ slug: string; number: number; agentId: string; revisionId: string }>(
      `SELECT a.slug, r.number, a.id AS "agentId", r.id AS "revisionId"
         FROM agents a JOIN agent_revisions r ON r.agent_id = a.id AND r.org_id = $1
        WHERE a.org_id = $1`,
      [orgId],
      'runs.archive_revisions',
    );
    return new Map(rows.map((r) => [`${r.slug}#${r.number}`, { agentId: r.agentId, revisionId: r.revisionId }]));
  }
}
