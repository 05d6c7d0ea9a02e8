import { randomUUID } from 'node:crypto';
import { Injectable, Optional } from '@nestjs/common';
import { ExtensionRegistry } from '#libs/extensions';
import { AppError } from '#libs/common';
import type { A2AExtension, A2ATransport, BindingSecurity } from '#libs/contracts';
import { AgentService } from './agent.service.js';
import { BindingRepository, type A2ABindingFields } from './binding.repository.js';
import { OrganizationService } from './organization.service.js';
import type { A2ABinding, Agent } from './registry.types.js';

/** Fields of an A2A binding a caller may set; omitted ones take DEFAULT_A2A_BINDING's value. */
export interface A2ABindingInput {
  transports?: A2ATransport[];
  security?: BindingSecurity;
  extensions?: A2AExtension[];
  enabled?: boolean;
}

/** Defaults of a new (or replaced) A2A binding. */
export const DEFAULT_A2A_BINDING: A2ABindingFields = {
  transports: ['JSONRPC'],
  security: { scheme: 'none' },
  extensions: [],
  enabled: true,
};

/** The warning of an open binding (security `none`), as the admin API's binding PUT returns it. */
export const OPEN_BINDING_WARNING =
  'security is "none": anyone who can reach the service can call this agent (no API key or token is checked); set security to apiKey or jwt to restrict it';

/** Warnings about a binding's settings (see BindingService.put), [] when none. */
export function bindingWarnings(binding: Pick<A2ABinding, 'security' | 'enabled'>): string[] {
  return binding.enabled && binding.security.scheme === 'none' ? [OPEN_BINDING_WARNING] : [];
}

/** Mount path of an agent's A2A endpoints. */
export function a2aBindingPath(orgSlug: string, agentSlug: string): string {
  return `/a2a/${orgSlug}/${agentSlug}`;
}

/**
 * The A2A protocol binding of an agent (one per agent): which transports it serves, who may
 * call it, extra extensions, and whether it is enabled. Its `path` is always
 * `/a2a/<orgSlug>/<agentSlug>`. Errors: `agent.not_found`, `binding.not_found`, `binding.conflict`.
 */
@Injectable()
export class BindingService {
  constructor(
    private readonly agents: AgentService,
    private readonly orgs: OrganizationService,
    private readonly bindings: BindingRepository,
    @Optional() private readonly extensions?: ExtensionRegistry,
  ) {}

  /** Throws `binding.not_found` when the agent has no A2A binding. */
  async get(orgId: string, agentRef: string): Promise<A2ABinding> {
    const agent = await this.agents.get(orgId, agentRef);
    const binding = await this.bindings.findA2A(orgId, agent.id);
    if (!binding) throw notFound(agent);
    return binding;
  }

  /** The agent's binding or null (for an agent already loaded by the caller). */
  find(orgId: string, agentId: string): Promise<A2ABinding | null> {
    return this.bindings.findA2A(orgId, agentId);
  }

  /** Create the binding. Throws `binding.conflict` when the agent has one. */
  async create(orgId: string, agentRef: string, input: A2ABindingInput): Promise<A2ABinding> {
    const agent = await this.agents.get(orgId, agentRef);
    try {
      return await this.insert(agent, input);
    } catch (e) {
      if (e instanceof AppError && e.code === 'binding.conflict') throw conflict(agent);
      throw e;
    }
  }

  /**
   * Create the binding, or replace every field of the existing one (omitted fields go back to
   * their defaults). `created` says which happened; `warnings` (sentences for the operator, [] when
   * none) say what the caller may not have meant — today: an open binding (security `none`, also
   * the default) lets anyone who can reach the service call the agent.
   */
  async put(orgId: string, agentRef: string, input: A2ABindingInput): Promise<{ binding: A2ABinding; created: boolean; warnings: string[] }> {
    const { binding, created } = await this.replace(orgId, agentRef, input);
    return { binding, created, warnings: bindingWarnings(binding) };
  }

  private async replace(orgId: string, agentRef: string, input: A2ABindingInput): Promise<{ binding: A2ABinding; created: boolean }> {
    if (input.extensions) this.extensions?.validate(input.extensions, 'extensions');
    const agent = await this.agents.get(orgId, agentRef);
    const fields = { ...DEFAULT_A2A_BINDING, ...defined(input) };
    let raced = false;
    if (!(await this.bindings.findA2A(orgId, agent.id))) {
      try {
        return { binding: await this.insert(agent, fields), created: true };
      } catch (e) {
        // created concurrently: fall through to a replace
        if (!(e instanceof AppError && e.code === 'binding.conflict')) throw e;
        raced = true;
      }
    }
    const binding = await this.bindings.updateA2A(orgId, agent.id, { ...fields, path: await this.path(agent) });
    // a unique violation with no binding of this agent: the path itself is taken
    if (!binding) throw raced ? conflict(agent) : notFound(agent);
    return { binding, created: false };
  }

  /** Change only the given fields (`{ enabled: false }` disables it). Throws `binding.not_found`. */
  async update(orgId: string, agentRef: string, patch: A2ABindingInput): Promise<A2ABinding> {
    if (patch.extensions) this.extensions?.validate(patch.extensions, 'extensions');
    const agent = await this.agents.get(orgId, agentRef);
    const binding = await this.bindings.updateA2A(orgId, agent.id, defined(patch));
    if (!binding) throw notFound(agent);
    return binding;
  }

  private async insert(agent: Agent, input: A2ABindingInput): Promise<A2ABinding> {
    return this.bindings.insertA2A({
      id: randomUUID(),
      orgId: agent.orgId,
      agentId: agent.id,
      path: await this.path(agent),
      ...DEFAULT_A2A_BINDING,
      ...defined(input),
    });
  }

  private async path(agent: Agent): Promise<string> {
    const org = await this.orgs.get(agent.orgId);
    return a2aBindingPath(org.slug, agent.slug);
  }
}

/** Drop undefined values so they do not override defaults. */
function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function notFound(agent: Agent): AppError {
  return new AppError('binding.not_found', `agent ${agent.slug} has no A2A binding`, { details: { agentId: agent.id, protocol: 'a2a' } });
}

function conflict(agent: Agent): AppError {
  return new AppError('binding.conflict', `agent ${agent.slug} already has an A2A binding`, { details: { agentId: agent.id, protocol: 'a2a' } });
}
