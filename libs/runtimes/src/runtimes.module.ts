import { type DynamicModule, Global, Module } from '@nestjs/common';
import type { AgentRuntime } from './runtime.js';
import { RuntimeRegistry } from './runtime.registry.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';

/** The built-in runtimes of this deployment. */
export function builtInRuntimes(): AgentRuntime[] {
  return [new ScriptedRuntime()];
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
      providers: [{ provide: RuntimeRegistry, useFactory: () => new RuntimeRegistry([...builtInRuntimes(), ...(opts.runtimes ?? [])]) }],
      exports: [RuntimeRegistry],
    };
  }
}
