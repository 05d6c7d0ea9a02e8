import { Injectable } from '@nestjs/common';
import type { ProtocolProfiles, RevisionStatus } from '#libs/contracts';
import { AppError } from '#libs/common';
import { DatabaseService, PG_UNIQUE_VIOLATION, Prisma, sqlState, translated } from '#libs/db';
import { toAgent } from './agent.repository.js';
import type { Agent, Revision } from './registry.types.js';

interface RevisionRow {
  id: string;
  orgId: string;
  agentId: string;
  number: number;
  status: RevisionStatus;
  protocolProfiles: unknown;
  runtime: unknown;
  createdAt: Date;
  publishedAt: Date | null;
  retiredAt: Date | null;
}

const toRevision = (row: RevisionRow): Revision => ({
  id: row.id,
  orgId: row.orgId,
  agentId: row.agentId,
  number: row.number,
  status: row.status,
  protocolProfiles: row.protocolProfiles as ProtocolProfiles,
  runtime: row.runtime,
  createdAt: row.createdAt,
  publishedAt: row.publishedAt,
  retiredAt: row.retiredAt,
});

const REVISION_COLUMNS = `id, org_id AS "orgId", agent_id AS "agentId", number, status::text AS status,
  protocol_profiles AS "protocolProfiles", runtime, created_at AS "createdAt",
  published_at AS "publishedAt", retired_at AS "retiredAt"`;

/** Outcome of a lifecycle step taken under the agent's row lock. */
export type LockedStep<T> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'wrong_status' | 'active'; status?: RevisionStatus };

type Tx = Prisma.TransactionClient;

/**
 * Data access for `agent_revisions` (and the agent's `active_revision_id`). Every query is
 * scoped by org and agent. A published or retired revision's content is also protected by the
 * `agent_revisions_immutable` trigger (SQLSTATE 23514), which `updateContent` lets through to
 * its caller.
 */
@Injectable()
export class RevisionRepository {
  constructor(private readonly db: DatabaseService) {}

  /**
   * Insert a draft numbered max(number)+1 for the agent, in one statement. Two concurrent
   * inserts may pick the same number; the loser hits the (agent_id, number) unique index and
   * retries with the next number.
   */
  async insertDraft(row: { id: string; orgId: string; agentId: string; protocolProfiles: ProtocolProfiles; runtime: unknown }): Promise<Revision> {
    for (let attempt = 0; ; attempt++) {
      try {
        const rows = await this.db.query<RevisionRow>(
          `INSERT INTO agent_revisions (id, org_id, agent_id, number, status, protocol_profiles, runtime)
           SELECT $1, $2, $3, COALESCE(MAX(number), 0) + 1, 'draft', $4::jsonb, $5::jsonb
             FROM agent_revisions WHERE agent_id = $3
           RETURNING ${REVISION_COLUMNS}`,
          [row.id, row.orgId, row.agentId, JSON.stringify(row.protocolProfiles), JSON.stringify(row.runtime)],
        );
        return toRevision(rows[0]!);
      } catch (e) {
        if (sqlState(e) !== PG_UNIQUE_VIOLATION || attempt >= 10) throw e;
      }
    }
  }

  async find(orgId: string, agentId: string, id: string): Promise<Revision | null> {
    const row = await this.db.prisma.agentRevision.findFirst({ where: { id, orgId, agentId } });
    return row ? toRevision(row) : null;
  }

  /** Newest first. */
  async list(orgId: string, agentId: string): Promise<Revision[]> {
    const rows = await this.db.prisma.agentRevision.findMany({ where: { orgId, agentId }, orderBy: { number: 'desc' } });
    return rows.map(toRevision);
  }

  /**
   * Replace the content of a revision. Does not look at the status itself: on a published or
   * retired revision the immutability trigger rejects the update (SQLSTATE 23514, thrown as is).
   * Null when the org/agent has no such revision.
   */
  async updateContent(orgId: string, agentId: string, id: string, patch: { protocolProfiles?: ProtocolProfiles; runtime?: unknown }): Promise<Revision | null> {
    const data: Prisma.AgentRevisionUpdateManyMutationInput = {};
    if (patch.protocolProfiles !== undefined) data.protocolProfiles = patch.protocolProfiles as unknown as Prisma.InputJsonValue;
    if (patch.runtime !== undefined) data.runtime = patch.runtime as Prisma.InputJsonValue;
    const res = await translated(this.db.prisma.agentRevision.updateMany({ where: { id, orgId, agentId }, data }), {
      check: () => new AppError('revision.immutable', `revision ${id} is published and cannot be modified`, { details: { revisionId: id, status: 'published' } }),
    });
    return res.count === 0 ? null : this.find(orgId, agentId, id);
  }

  /**
   * draft → published (sets published_at), with the final `protocolProfiles` when given (defaults
   * a runtime filled in). Null when it is not a draft of this agent (any more).
   */
  async publish(orgId: string, agentId: string, id: string, protocolProfiles?: ProtocolProfiles | null): Promise<Revision | null> {
    const rows = await this.db.query<RevisionRow>(
      `UPDATE agent_revisions SET status = 'published', published_at = now(),
              protocol_profiles = COALESCE($4::jsonb, protocol_profiles)
        WHERE id = $1 AND org_id = $2 AND agent_id = $3 AND status = 'draft'
        RETURNING ${REVISION_COLUMNS}`,
      [id, orgId, agentId, protocolProfiles ? JSON.stringify(protocolProfiles) : null],
    );
    return rows[0] ? toRevision(rows[0]) : null;
  }

  /**
   * published → retired, unless it is the agent's active revision. Runs under the agent's row
   * lock, which `setActive` also takes: a revision can never be made active and retired at once.
   */
  async retire(orgId: string, agentId: string, id: string): Promise<LockedStep<Revision>> {
    return this.db.prisma.$transaction(async (tx) => {
      const agent = await lockAgent(tx, orgId, agentId);
      if (!agent) return { ok: false, reason: 'not_found' };
      const current = await tx.agentRevision.findFirst({ where: { id, orgId, agentId } });
      if (!current) return { ok: false, reason: 'not_found' };
      if (current.status !== 'published') return { ok: false, reason: 'wrong_status', status: current.status };
      if (agent.activeRevisionId === id) return { ok: false, reason: 'active' };
      const row = await tx.agentRevision.update({ where: { id }, data: { status: 'retired', retiredAt: new Date() } });
      return { ok: true, value: toRevision(row) };
    });
  }

  /** Point the agent at a published revision of its own, under the agent's row lock. */
  async setActive(orgId: string, agentId: string, id: string): Promise<LockedStep<Agent>> {
    return this.db.prisma.$transaction(async (tx) => {
      const agent = await lockAgent(tx, orgId, agentId);
      if (!agent) return { ok: false, reason: 'not_found' };
      const revision = await tx.agentRevision.findFirst({ where: { id, orgId, agentId }, select: { status: true } });
      if (!revision) return { ok: false, reason: 'not_found' };
      if (revision.status !== 'published') return { ok: false, reason: 'wrong_status', status: revision.status };
      const row = await tx.agent.update({ where: { id: agentId }, data: { activeRevisionId: id } });
      return { ok: true, value: toAgent(row) };
    });
  }
}

/** SELECT ... FOR UPDATE on the agent row: serializes lifecycle steps of one agent. */
async function lockAgent(tx: Tx, orgId: string, agentId: string): Promise<{ activeRevisionId: string | null } | null> {
  const rows = await tx.$queryRaw<Array<{ activeRevisionId: string | null }>>`
    SELECT active_revision_id::text AS "activeRevisionId" FROM agents WHERE id = ${agentId}::uuid AND org_id = ${orgId}::uuid FOR UPDATE`;
  return rows[0] ?? null;
}
