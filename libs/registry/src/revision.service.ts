import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { ExtensionRegistry } from '#libs/extensions';
import { AppError, invalidRequest } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { ProtocolProfilesSchema, SUBSTATES_EXTENSION_URI, type ProtocolProfiles } from '#libs/contracts';
import { RuntimeRegistry } from '#libs/runtimes';
import { ZodError } from 'zod';
import { AgentService } from './agent.service.js';
import { isUuid } from './ids.js';
import { RevisionRepository } from './revision.repository.js';
import { RuntimeSecretService } from './runtime-secret.service.js';
import { CAPABILITY_SETTINGS, servedCapabilities, type A2ACapabilityName } from './served-capabilities.js';
import { SigningKeyService } from './signing-key.service.js';
import type { Agent, Revision } from './registry.types.js';

/**
 * Agent revisions: what an agent says over each protocol (`protocolProfiles`) and how it runs
 * (`runtime`). Lifecycle: draft → published → retired. A draft may be edited; a published or
 * retired revision never changes (service check here, and the database trigger behind it).
 *
 * Errors: `agent.not_found`, `revision.not_found`, `request.invalid` (422, with `issues` whose
 * paths start at `protocolProfiles.` / `runtime.`), `runtime.unknown_kind`, `revision.immutable`,
 * `revision.invalid_transition`, `revision.not_published`, `runtime.secret_not_allowed` (draft and
 * publish: a `secretEnv` outside the org's namespace), `runtime.secret_not_found` (publish: a
 * `secret` the org does not have).
 */
@Injectable()
export class RevisionService {
  constructor(
    private readonly agents: AgentService,
    private readonly revisions: RevisionRepository,
    @Inject(RuntimeRegistry) private readonly runtimes: RuntimeRegistry,
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly secrets: RuntimeSecretService,
    private readonly signingKeys: SigningKeyService,
    @Optional() private readonly extensions?: ExtensionRegistry,
  ) {
    // push needs a key to keep its secrets, signing one to decrypt its keys: without it this process does not serve them
    this.served = servedCapabilities(config);
  }

  private readonly served: Record<A2ACapabilityName, boolean>;

  /** Create a draft numbered after the agent's newest revision. Both parts are validated. */
  async createDraft(orgId: string, agentRef: string, input: { protocolProfiles: unknown; runtime: unknown }): Promise<Revision> {
    const agent = await this.agents.get(orgId, agentRef);
    const { protocolProfiles, runtime } = this.validate(input);
    this.checkSkills(protocolProfiles!, runtime);
    await this.checkSecrets(orgId, runtime, false);
    return this.revisions.insertDraft({ id: randomUUID(), orgId, agentId: agent.id, protocolProfiles: protocolProfiles!, runtime: runtime! });
  }

  /** Newest first. */
  async list(orgId: string, agentRef: string): Promise<Revision[]> {
    const agent = await this.agents.get(orgId, agentRef);
    return this.revisions.list(orgId, agent.id);
  }

  /** Throws `revision.not_found` (also for a revision of another agent). */
  async get(orgId: string, agentRef: string, revisionId: string): Promise<Revision> {
    const agent = await this.agents.get(orgId, agentRef);
    return this.require(agent, revisionId);
  }

  /**
   * Replace `protocolProfiles` and/or `runtime` of a draft. Throws `revision.immutable` when it is
   * published or retired, whether this service sees it first or the database trigger does
   * (a publish racing with the edit).
   */
  async updateDraft(orgId: string, agentRef: string, revisionId: string, patch: { protocolProfiles?: unknown; runtime?: unknown }): Promise<Revision> {
    const agent = await this.agents.get(orgId, agentRef);
    const current = await this.require(agent, revisionId);
    if (current.status !== 'draft') throw immutable(current.id, current.status);
    const valid = this.validate(patch);
    this.checkSkills(valid.protocolProfiles ?? (current.protocolProfiles as ProtocolProfiles), valid.runtime ?? current.runtime);
    if (valid.runtime !== undefined) await this.checkSecrets(orgId, valid.runtime, false);
    try {
      const updated = await this.revisions.updateContent(orgId, agent.id, revisionId, valid);
      if (!updated) throw notFound(revisionId);
      return updated;
    } catch (e) {
      throw e;
    }
  }

  /**
   * draft → published (sets `publishedAt`); the runtime config and the declared extensions are
   * validated again against this deployment's runtimes and extensions. Publishing a published
   * revision again is a no-op (safe to retry). Throws `revision.invalid_transition` for a
   * retired revision, `request.invalid` for a declared extension this deployment refuses.
   */
  async publish(orgId: string, agentRef: string, revisionId: string): Promise<Revision> {
    const agent = await this.agents.get(orgId, agentRef);
    const current = await this.require(agent, revisionId);
    if (current.status === 'draft') {
      this.validate({ runtime: current.runtime });
      // a draft made before the namespace rule, or a secret deleted since: refused here
      await this.checkSecrets(orgId, current.runtime, true);
      // declared extensions again: this deployment's plugins (params, dependencies) may have changed since the draft
      this.extensions?.validate((current.protocolProfiles as ProtocolProfiles).a2a?.extensions ?? [], 'protocolProfiles.a2a.extensions');
      const declared = (current.protocolProfiles as { a2a?: { capabilities?: Record<string, unknown> } }).a2a?.capabilities ?? {};
      const unserved = Object.entries(this.served).filter(([name, served]) => declared[name] === true && !served).map(([name]) => name);
      if (unserved.length > 0) {
        const hint = unserved.map((c) => CAPABILITY_SETTINGS[c as A2ACapabilityName]).filter(Boolean).map((s) => ` (${s} is not set)`).join('');
        throw new AppError('revision.unsupported_capability', `this deployment does not serve ${unserved.join(', ')}${hint}: remove it from protocolProfiles.a2a.capabilities`, {
          details: { revisionId, capabilities: unserved.join(',') },
        });
      }
      if (declared.signedAgentCard === true && (await this.signingKeys.activeKids(orgId)).length === 0) {
        throw new AppError('revision.unsupported_capability', 'signedAgentCard needs an active signing key of the organization: create one (POST /v1/signing-keys) first', {
          details: { revisionId, capabilities: 'signedAgentCard' },
        });
      }
      const profiles = await this.withRuntimeDefaults(orgId, current.protocolProfiles as ProtocolProfiles, current.runtime);
      const published = await this.revisions.publish(orgId, agent.id, revisionId, profiles);
      if (published) return published;
    }
    const now = await this.require(agent, revisionId);
    if (now.status === 'published') return now;
    throw new AppError('revision.invalid_transition', `revision ${revisionId} is ${now.status} and cannot be published`, {
      details: { revisionId, status: now.status },
    });
  }

  /**
   * published → retired. Retiring a retired revision is a no-op. Throws
   * `revision.invalid_transition` for a draft, or for the agent's active revision (activate
   * another one first).
   */
  async retire(orgId: string, agentRef: string, revisionId: string): Promise<Revision> {
    const agent = await this.agents.get(orgId, agentRef);
    if (!isUuid(revisionId)) throw notFound(revisionId);
    const step = await this.revisions.retire(orgId, agent.id, revisionId);
    if (step.ok) return step.value;
    if (step.reason === 'not_found') throw notFound(revisionId);
    if (step.reason === 'active') {
      throw new AppError('revision.invalid_transition', `revision ${revisionId} is the agent's active revision; activate another one first`, {
        details: { revisionId, status: 'published', active: true },
      });
    }
    if (step.status === 'retired') return this.require(agent, revisionId);
    throw new AppError('revision.invalid_transition', `revision ${revisionId} is ${step.status}; only a published revision can be retired`, {
      details: { revisionId, status: step.status },
    });
  }

  /**
   * Make a published revision the one the agent serves. Throws `revision.not_found`,
   * `revision.not_published` (draft or retired).
   */
  async setActive(orgId: string, agentRef: string, revisionId: string): Promise<Agent> {
    const agent = await this.agents.get(orgId, agentRef);
    if (!isUuid(revisionId)) throw notFound(revisionId);
    const step = await this.revisions.setActive(orgId, agent.id, revisionId);
    if (step.ok) return step.value;
    if (step.reason === 'not_found') throw notFound(revisionId);
    throw new AppError('revision.not_published', `revision ${revisionId} is ${step.status}; only a published revision can be active`, {
      details: { revisionId, status: step.status },
    });
  }

  private async require(agent: Agent, revisionId: string): Promise<Revision> {
    const revision = isUuid(revisionId) ? await this.revisions.find(agent.orgId, agent.id, revisionId) : null;
    if (!revision) throw notFound(revisionId);
    return revision;
  }

  /**
   * A2A requires at least one skill: declared, or suggested at publish by the runtime (one with
   * `prepare`, e.g. `a2a`). Throws `request.invalid` at `protocolProfiles.a2a.skillsProjection`.
   */
  private checkSkills(profiles: ProtocolProfiles, runtime: unknown): void {
    if ((profiles.a2a.skillsProjection ?? []).length > 0) return;
    let suggests = false;
    try {
      suggests = typeof this.runtimes.parse(runtime).runtime.prepare === 'function';
    } catch {
      /* reported by validate */
    }
    if (!suggests) throw invalidRequest([{ path: ['protocolProfiles', 'a2a', 'skillsProjection'], message: 'A2A requires at least one skill' }], 'revision');
  }

  /**
   * Publish-time: let the runtime check its config (e.g. the upstream card is reachable: else its
   * error, such as `runtime.upstream_unreachable`) and fill what the profile leaves out (skills,
   * card name and description). Null when nothing changes.
   */
  private async withRuntimeDefaults(orgId: string, profiles: ProtocolProfiles, rawRuntime: unknown): Promise<ProtocolProfiles | null> {
    const { runtime, config } = this.runtimes.parse(rawRuntime);
    const defaults = runtime.prepare ? await runtime.prepare(config, { orgId }) : undefined;
    const a2a = profiles.a2a;
    if ((a2a.skillsProjection ?? []).length === 0 && !defaults?.skills?.length) {
      throw invalidRequest([{ path: ['protocolProfiles', 'a2a', 'skillsProjection'], message: 'A2A requires at least one skill (the upstream card has none)' }], 'revision');
    }
    if (!defaults) return null;
    const next: ProtocolProfiles['a2a'] = {
      ...a2a,
      skillsProjection: a2a.skillsProjection?.length ? a2a.skillsProjection : defaults.skills!,
      identityProjection: {
        ...a2a.identityProjection,
        ...(!a2a.identityProjection?.name && defaults.name && { name: defaults.name }),
        ...(!a2a.identityProjection?.description && defaults.description && { description: defaults.description }),
      },
    };
    return { ...profiles, a2a: next };
  }

  /**
   * The secrets a (valid) runtime config references, checked for the org: `secretEnv` inside its
   * namespace (always), `secret` existing (at publish). Throws `runtime.secret_not_allowed` /
   * `runtime.secret_not_found`.
   */
  private async checkSecrets(orgId: string, rawRuntime: unknown, publish: boolean): Promise<void> {
    const { runtime, config } = this.runtimes.parse(rawRuntime);
    const uses = runtime.secretRefs?.(config) ?? [];
    if (uses.length > 0) await this.secrets.check(orgId, uses, { publish });
  }

  /** Validate the given parts; every issue of both is reported at once, paths prefixed. */
  private validate(input: { protocolProfiles?: unknown; runtime?: unknown }): { protocolProfiles?: ProtocolProfiles; runtime?: unknown } {
    const issues: Array<{ path: PropertyKey[]; message: string }> = [];
    const out: { protocolProfiles?: ProtocolProfiles; runtime?: unknown } = {};
    if (input.protocolProfiles !== undefined) {
      const parsed = ProtocolProfilesSchema.safeParse(input.protocolProfiles);
      if (parsed.success) out.protocolProfiles = parsed.data;
      else issues.push(...parsed.error.issues.map((i) => ({ path: ['protocolProfiles', ...i.path], message: i.message })));
    }
    if (input.runtime !== undefined) {
      try {
        out.runtime = this.runtimes.parse(input.runtime).config;
      } catch (e) {
        if (!(e instanceof ZodError)) throw e;
        issues.push(...e.issues.map((i) => ({ path: ['runtime', ...i.path], message: i.message })));
      }
    }
    if (issues.length > 0) throw invalidRequest(issues, 'revision');
    // declared extensions: known ones' params against their schemas; unknown ones data-only
    if (out.protocolProfiles?.a2a) this.extensions?.validate(out.protocolProfiles.a2a.extensions, 'protocolProfiles.a2a.extensions');
    if (out.protocolProfiles?.a2a && out.runtime !== undefined) checkSubstates(out.protocolProfiles.a2a.extensions, out.runtime);
    return out;
  }
}

/**
 * The sub-states a runtime emits (scripted `substate` steps, anywhere in its config) must be
 * declared by the working sub-states extension (`params.states`): a client reads only declared ones.
 */
function checkSubstates(extensions: ReadonlyArray<{ uri: string; params?: Record<string, unknown> }>, runtime: unknown): void {
  const used = new Set<string>();
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (v === null || typeof v !== 'object') return;
    const o = v as Record<string, unknown>;
    if (o.type === 'substate' && typeof o.state === 'string') used.add(o.state);
    Object.values(o).forEach(walk);
  };
  walk(runtime);
  if (used.size === 0) return;
  const declared = extensions.find((e) => e.uri === SUBSTATES_EXTENSION_URI)?.params?.states;
  const states = Array.isArray(declared) ? declared : [];
  const undeclared = [...used].filter((s) => !states.includes(s));
  if (undeclared.length > 0) {
    throw invalidRequest([{ path: ['runtime'], message: `sub-state${undeclared.length > 1 ? 's' : ''} ${undeclared.join(', ')} not declared: list them in the ${SUBSTATES_EXTENSION_URI} extension's params.states` }], 'revision');
  }
}

function notFound(revisionId: string): AppError {
  return new AppError('revision.not_found', `revision ${revisionId} not found`, { details: { revisionId } });
}

function immutable(revisionId: string, status: string, cause?: unknown): AppError {
  return new AppError('revision.immutable', `revision ${revisionId} is ${status} and cannot be modified`, { details: { revisionId, status }, cause });
}
