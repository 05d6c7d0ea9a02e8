import { type DynamicModule, Global, Module } from '@nestjs/common';
import type { A2AExtensionPlugin } from './extension.js';
import { ExtensionRegistry } from './extension.registry.js';
import { builtinExtensionsWith } from './builtin/builtins.js';
import type { StructuredInputLimits } from './builtin/schema-budget.js';

/**
 * Port: the budgets of the structured-input extension (schema size and cost at draft, data and
 * pattern work per message). Extensions do not read the configuration; libs/registry provides
 * this from it (ExtensionLimitsModule, global, imported by RegistryModule). Without it the
 * defaults of libs/config apply.
 */
export const STRUCTURED_INPUT_LIMITS = Symbol('STRUCTURED_INPUT_LIMITS');

/**
 * The one place extensions are registered: `ExtensionsModule.forRoot({ extensions })` adds plugins
 * to the built-ins (global: the registry validates declarations and negotiates requests).
 */
@Global()
@Module({})
export class ExtensionsModule {
  static forRoot(opts: { extensions?: ReadonlyArray<A2AExtensionPlugin<any>> } = {}): DynamicModule {
    return {
      module: ExtensionsModule,
      providers: [
        {
          provide: ExtensionRegistry,
          useFactory: (limits: StructuredInputLimits | undefined) => new ExtensionRegistry([...builtinExtensionsWith(limits), ...(opts.extensions ?? [])]),
          inject: [{ token: STRUCTURED_INPUT_LIMITS, optional: true }],
        },
      ],
      exports: [ExtensionRegistry],
    };
  }
}
