import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { DatabaseService, Prisma, translated } from '#libs/db';
import { isUuid } from './ids.js';
import type { Agent, AgentProvider } from './registry.types.js';

export interface NewAgentRow {
  id: string;
  orgId: string;
  slug: string;
  name: string;
  description: string;
  provider: AgentProvider | null;
  documentationUrl: string | null;
  iconUrl: string | null;
  isDefault: boolean;
}

export type AgentPatch = Partial<Pick<NewAgentRow, 'name' | 'description' | 'provider' | 'documentationUrl' | 'iconUrl' | 'isDefault'>>;

interface AgentRow {
  id: string;
  orgId: string;
  slug: string;
  name: string;
  description: string;
  provider: unknown;
  documentationUrl: string | null;
  iconUrl: string | null;
  isDefault: boolean;
  activeRevisionId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const toAgent = (row: AgentRow): Agent => ({
  id: row.id,
  orgId: row.orgId,
  slug: row.slug,
  name: row.name,
  description: row.description,
  provider: (row.provider ?? null) as AgentProvider | null,
  documentationUrl: row.documentationUrl,
  iconUrl: row.iconUrl,
  isDefault: row.isDefault,
  activeRevisionId: row.activeRevisionId,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

const jsonOrNull = (v: AgentProvider | null | undefined) => (v === undefined ? undefined : v === null ? Prisma.DbNull : (v as unknown as Prisma.InputJsonValue));

type Tx = Prisma.TransactionClient;

/**
 * Data access for `agents`. Every query is scoped by org, except the deployment-wide
 * "one default agent" rule: marking an agent default clears the flag on every other agent,
 * serialized by a transaction-scoped advisory lock so two concurrent moves cannot both win.
 */
@Injectable()
export class AgentRepository {
  constructor(private readonly db: DatabaseService) {}

  /** Errors: `agent.conflict` when (org, slug) is taken. */
  async create(row: NewAgentRow): Promise<Agent> {
    const data = { ...row, provider: jsonOrNull(row.provider) };
    const conflict = () => new AppError('agent.conflict', `an agent with slug '${row.slug}' exists`, { details: { slug: row.slug } });
    if (!row.isDefault) return toAgent(await translated(this.db.prisma.agent.create({ data }), { unique: conflict }));
    return translated(
      this.db.prisma.$transaction(async (tx) => {
        await clearDefault(tx, row.id);
        return toAgent(await tx.agent.create({ data }));
      }),
      { unique: conflict },
    );
  }

  /** An agent of the org by id or slug (an id wins; slugs can never have the form of a UUID). */
  async findByRef(orgId: string, ref: string): Promise<Agent | null> {
    const rows = await this.db.prisma.agent.findMany({
      where: isUuid(ref) ? { orgId, OR: [{ id: ref }, { slug: ref }] } : { orgId, slug: ref },
      take: 2,
    });
    const row = rows.find((r) => r.id === ref) ?? rows[0];
    return row ? toAgent(row) : null;
  }

  async list(orgId: string): Promise<Agent[]> {
    const rows = await this.db.prisma.agent.findMany({ where: { orgId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    return rows.map(toAgent);
  }

  /** Null when the org has no such agent. */
  async update(orgId: string, id: string, patch: AgentPatch): Promise<Agent | null> {
    const data = { ...patch, provider: jsonOrNull(patch.provider) };
    const run = async (tx: Tx): Promise<Agent | null> => {
      if (patch.isDefault) await clearDefault(tx, id);
      const res = await tx.agent.updateMany({ where: { id, orgId }, data });
      if (res.count === 0) return null;
      const row = await tx.agent.findUnique({ where: { id } });
      return row ? toAgent(row) : null;
    };
    return patch.isDefault ? this.db.prisma.$transaction(run) : run(this.db.prisma);
  }
}

/** Inside a transaction: take the default-agent lock and clear the flag on every other agent. */
async function clearDefault(tx: Tx, keepId: string): Promise<void> {
  await tx.$queryRaw`SELECT 1 AS locked FROM pg_advisory_xact_lock(hashtext('agents.is_default'))`;
  await tx.agent.updateMany({ where: { isDefault: true, NOT: { id: keepId } }, data: { isDefault: false } });
}
