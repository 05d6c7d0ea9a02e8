import { type DynamicModule, Global, Module } from '@nestjs/common';
import type { A2AExtensionPlugin } from './extension.js';
import { ExtensionRegistry } from './extension.registry.js';
import { builtinExtensions } from './builtin/builtins.js';

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
      providers: [{ provide: ExtensionRegistry, useValue: new ExtensionRegistry([...builtinExtensions, ...(opts.extensions ?? [])]) }],
      exports: [ExtensionRegistry],
    };
  }
}
