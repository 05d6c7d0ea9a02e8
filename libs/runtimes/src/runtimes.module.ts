import { type DynamicModule, Global, Module } from '@nestjs/common';
import type { AgentRuntime } from './runtime.js';
import { RuntimeRegistry } from './runtime.registry.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';
import { DEFAULT_SCRIPTED_LIMITS, scriptedLimits } from './scripted/scripted-limits.js';
import { HttpRuntime } from './http/http.runtime.js';
import { A2ARuntime } from './a2a/a2a.runtime.js';
import { NO_RUNTIME_SECRETS, RUNTIME_SECRETS, type RuntimeSecrets } from './runtime-secrets.js';
import { answerBudget, DEFAULT_ANSWER_BUDGET } from './answer-budget.js';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { outboundPolicy } from '#libs/outbound';

/**
 * The built-in runtimes of this deployment: `scripted` (held to the SCRIPTED_* budgets), `http` and
 * `a2a` (the last two reach only public addresses, plus what HTTP_RUNTIME_ALLOWED_CIDRS allows, and
 * take their secrets from `secrets`, for the run's organization only; without it every secret
 * reference is refused), and read their backends' and upstreams' answers within
 * RUNTIME_MAX_ANSWER_BYTES / RUNTIME_MAX_EVENT_BYTES.
 */
export function builtInRuntimes(config?: AppConfig, secrets: RuntimeSecrets = NO_RUNTIME_SECRETS): AgentRuntime[] {
  const policy = outboundPolicy(config?.HTTP_RUNTIME_ALLOWED_CIDRS ?? []);
  const budget = config ? answerBudget(config) : DEFAULT_ANSWER_BUDGET;
  return [new ScriptedRuntime(config ? scriptedLimits(config) : DEFAULT_SCRIPTED_LIMITS), new HttpRuntime(policy, secrets, budget), new A2ARuntime(policy, secrets, budget)];
}

/**
 * The one place runtime kinds are registered: provides `RuntimeRegistry` (built-ins plus
 * `runtimes` given here) to the API (draft-time validation, direct replies) and the worker
 * (execution). Global, so every lib injects the same registry. The built-ins get the
 * `RUNTIME_SECRETS` port when the process provides it (libs/registry's global
 * RuntimeSecretsModule, which RegistryModule imports; the worker imports it itself).
 *
 * ```ts
 * RuntimesModule.forRoot({ runtimes: [new MyRuntime()] })   // adds kind 'my-kind'
 * ```
 */
@Global()
@Module({})
export class RuntimesModule {
  static forRoot(opts: { runtimes?: AgentRuntime[] } = {}): DynamicModule {
    return {
      module: RuntimesModule,
      providers: [
        {
          provide: RuntimeRegistry,
          useFactory: (config: AppConfig, secrets: RuntimeSecrets | undefined) => new RuntimeRegistry([...builtInRuntimes(config, secrets ?? NO_RUNTIME_SECRETS), ...(opts.runtimes ?? [])]),
          inject: [APP_CONFIG, { token: RUNTIME_SECRETS, optional: true }],
        },
      ],
      exports: [RuntimeRegistry],
    };
  }
}
