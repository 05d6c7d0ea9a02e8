import { type DynamicModule, Global, Module } from '@nestjs/common';
import type { AgentRuntime } from './runtime.js';
import { RuntimeRegistry } from './runtime.registry.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';
import { HttpRuntime } from './http/http.runtime.js';
import { A2ARuntime } from './a2a/a2a.runtime.js';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { outboundPolicy } from '#libs/outbound';

/**
 * The built-in runtimes of this deployment: `scripted`, `http` and `a2a` (the last two reach only
 * public addresses, plus what HTTP_RUNTIME_ALLOWED_CIDRS allows).
 */
export function builtInRuntimes(config?: Pick<AppConfig, 'HTTP_RUNTIME_ALLOWED_CIDRS'>): AgentRuntime[] {
  const policy = outboundPolicy(config?.HTTP_RUNTIME_ALLOWED_CIDRS ?? []);
  return [new ScriptedRuntime(), new HttpRuntime(policy), new A2ARuntime(policy)];
}

/**
 * The one place runtime kinds are registered: provides `RuntimeRegistry` (built-ins plus
 * `runtimes` given here) to the API (draft-time validation, direct replies) and the worker
 * (execution). Global, so every lib injects the same registry.
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
        { provide: RuntimeRegistry, useFactory: (config: AppConfig) => new RuntimeRegistry([...builtInRuntimes(config), ...(opts.runtimes ?? [])]), inject: [APP_CONFIG] },
      ],
      exports: [RuntimeRegistry],
    };
  }
}
