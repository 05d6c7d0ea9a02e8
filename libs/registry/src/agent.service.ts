import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import type { CreateAgent, UpdateAgent } from '#libs/contracts';
import { AgentRepository } from './agent.repository.js';
import type { Agent } from './registry.types.js';

/**
 * Agents of an organization: identity (slug, name, description, provider, links) and the
 * deployment-wide default flag. Everything is scoped by `orgId`; another org's agent is
 * `agent.not_found`, never a permission error.
 */
@Injectable()
export class AgentService {
  constructor(private readonly agents: AgentRepository) {}

  /**
   * Create an agent. `isDefault: true` clears the flag on every other agent of the deployment
   * in the same transaction. Throws `agent.conflict` when the slug is taken in the org.
   */
  async create(orgId: string, input: CreateAgent): Promise<Agent> {
    return await this.agents.create({
      id: randomUUID(),
      orgId,
      slug: input.slug,
      name: input.name,
      description: input.description,
      provider: input.provider ?? null,
      documentationUrl: input.documentationUrl ?? null,
      iconUrl: input.iconUrl ?? null,
      isDefault: input.isDefault ?? false,
    });
  }

  /** Oldest first. */
  list(orgId: string): Promise<Agent[]> {
    return this.agents.list(orgId);
  }

  /** By id or slug. Throws `agent.not_found`. */
  async get(orgId: string, agentRef: string): Promise<Agent> {
    const agent = await this.agents.findByRef(orgId, agentRef);
    if (!agent) throw new AppError('agent.not_found', `agent ${agentRef} not found`, { details: { agent: agentRef } });
    return agent;
  }

  /**
   * Change identity fields and/or `isDefault` (true moves the deployment's default here, in one
   * transaction). The slug never changes (it is part of the A2A path). Throws `agent.not_found`.
   */
  async update(orgId: string, agentRef: string, patch: UpdateAgent): Promise<Agent> {
    const agent = await this.get(orgId, agentRef);
    const updated = await this.agents.update(orgId, agent.id, patch);
    if (!updated) throw new AppError('agent.not_found', `agent ${agentRef} not found`, { details: { agent: agentRef } });
    return updated;
  }
}
