import { Injectable } from '@nestjs/common';
import { PushConfigService, type AdmittedPushConfig, type PushConfigInput, type PushConfigView } from '#libs/push';
import type { ResolvedA2AAgent } from '#libs/registry';
import { RunViews } from '#libs/runs';
import { A2AError } from '../a2a.errors.js';
import type { A2ACaller, A2AProtocolVersion } from '../a2a.types.js';
import { requireVisibleRun } from '../task-visibility.js';


/**
 * The push notification config operations of A2A (v1.0 §3.1.7–3.1.10; v0.3
 * `tasks/pushNotificationConfig/*`), version-neutral. Every operation requires that the agent's
 * revision declares `capabilities.pushNotifications` and that the deployment can keep push
 * secrets (else PushNotificationNotSupported, §3.3.4), and that the task is this agent's (else
 * TaskNotFound). Configs are scoped to the caller's principal: another caller's configs are
 * invisible. A new config starts after the task's current sequence (one set with a new task
 * gets the task's whole story).
 */
@Injectable()
export class A2APushService {
  constructor(
    private readonly configs: PushConfigService,
    private readonly runs: RunViews,
  ) {}

  /** PushNotificationNotSupported unless this agent offers push here. */
  require(agent: ResolvedA2AAgent): void {
    if (!agent.revision.a2a.capabilities.pushNotifications) {
      throw new A2AError('PushNotificationNotSupported', 'push notifications are not supported by this agent (capabilities.pushNotifications is false)');
    }
    if (!this.configs.enabled) {
      throw new A2AError('PushNotificationNotSupported', 'push notifications are not configured on this deployment');
    }
  }

  /**
   * A config sent with SendMessage, checked before the message's command runs (PushConfigService.admit:
   * URL policy, size, counts; for more input on a task, that the task is visible to the caller), so
   * a refused config leaves no task and no message behind. Errors as `create`'s. The result goes to
   * `create` for that task (more input), or for the task the message created (not one a retry found).
   */
  async admit(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string | undefined, input: PushConfigInput): Promise<AdmittedPushConfig> {
    this.require(agent);
    const runId = taskId === undefined ? undefined : (await requireVisibleRun(this.runs, agent.org.id, agent.agent.id, caller, taskId)).id;
    return await this.configs.admit({ orgId: agent.org.id, runId, createdBy: caller.id }, input);
  }

  /**
   * Set a config on a task. `fromSequence` absent: a config operation (starts at the task's
   * current sequence, returns the signing secret); given: inside SendMessage (the secret is shown
   * by the caller's first get / list). `admitted`: see `admit`.
   */
  async create(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string, input: PushConfigInput, version: A2AProtocolVersion, fromSequence?: number, admitted?: AdmittedPushConfig): Promise<PushConfigView> {
    this.require(agent);
    const run = await requireVisibleRun(this.runs, agent.org.id, agent.agent.id, caller, taskId);
    return await this.configs.set({ orgId: agent.org.id, runId: run.id, agentId: agent.agent.id, createdBy: caller.id }, input, version, fromSequence ?? run.lastSequence, fromSequence === undefined, admitted);
  }

  async get(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string, configId: string | undefined): Promise<PushConfigView> {
    const scope = await this.scope(agent, caller, taskId);
    if (configId !== undefined && configId !== '') return await this.configs.get(scope, configId);
    // v0.3 get without an id: the task's config when it has exactly one
    const all = await this.configs.list(scope);
    if (all.length === 1) return all[0]!;
    throw new A2AError('InvalidParams', all.length === 0 ? `task ${taskId} has no push notification config` : 'pushNotificationConfigId is required: the task has several configs');
  }

  async list(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string): Promise<PushConfigView[]> {
    return await this.configs.list(await this.scope(agent, caller, taskId));
  }

  async delete(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string, configId: string): Promise<void> {
    await this.configs.delete(await this.scope(agent, caller, taskId), configId);
  }

  private async scope(agent: ResolvedA2AAgent, caller: A2ACaller, taskId: string) {
    this.require(agent);
    const run = await requireVisibleRun(this.runs, agent.org.id, agent.agent.id, caller, taskId);
    return { orgId: agent.org.id, runId: run.id, createdBy: caller.id };
  }

}
