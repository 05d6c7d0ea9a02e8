import { randomUUID } from 'node:crypto';
import type { DatabaseService } from '#libs/db';

/** Minimal org → agent → published revision rows, written with Prisma (no API involved). */
export async function seedAgent(db: DatabaseService, runtime: unknown = { kind: 'scripted', rules: [] }, opts: { orgId?: string } = {}) {
  const orgId = opts.orgId ?? randomUUID();
  const agentId = randomUUID();
  const revisionId = randomUUID();
  const slug = `org-${orgId.slice(0, 8)}`;
  if (!opts.orgId) await db.prisma.organization.create({ data: { id: orgId, slug, name: slug } });
  await db.prisma.agent.create({ data: { id: agentId, orgId, slug: opts.orgId ? `agent-${agentId.slice(0, 8)}` : 'agent', name: 'Agent', description: 'test agent' } });
  await db.prisma.agentRevision.create({
    data: { id: revisionId, orgId, agentId, number: 1, status: 'published', publishedAt: new Date(), protocolProfiles: { a2a: {} }, runtime: runtime as object },
  });
  await db.prisma.agent.update({ where: { id: agentId }, data: { activeRevisionId: revisionId } });
  return { orgId, agentId, revisionId, orgSlug: slug };
}
