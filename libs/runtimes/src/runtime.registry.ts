import { AppError } from '#libs/common';
import { z } from 'zod';
import type { AgentRuntime } from './runtime.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';

const KindSchema = z.looseObject({ kind: z.string().min(1) });

/** The runtimes of this deployment, by `kind`. */
export class RuntimeRegistry {
  private readonly byKind = new Map<string, AgentRuntime>();

  /** Throws when two runtimes claim the same kind (a wiring bug). */
  constructor(runtimes: AgentRuntime[]) {
    for (const runtime of runtimes) {
      if (this.byKind.has(runtime.kind)) throw new Error(`duplicate runtime kind '${runtime.kind}'`);
      this.byKind.set(runtime.kind, runtime);
    }
  }

  /** The runtime owning `kind`. Throws `AppError` `runtime.unknown_kind` when there is none. */
  get(kind: string): AgentRuntime {
    const runtime = this.byKind.get(kind);
    if (!runtime) {
      throw new AppError('runtime.unknown_kind', `unknown runtime kind '${kind}'`, {
        details: { kind, known: [...this.byKind.keys()] },
      });
    }
    return runtime;
  }

  /**
   * Validate a revision's runtime config (`{ kind, ... }`) with the runtime owning its kind.
   * Throws a `ZodError` when `raw` has no string `kind` or fails the runtime's schema, and
   * `AppError` `runtime.unknown_kind` when no runtime owns the kind.
   */
  parse(raw: unknown): { runtime: AgentRuntime; config: unknown } {
    const runtime = this.get(KindSchema.parse(raw).kind);
    return { runtime, config: runtime.parseConfig(raw) };
  }
}

/** The registry with every built-in runtime (currently `scripted`). */
export function defaultRuntimeRegistry(): RuntimeRegistry {
  return new RuntimeRegistry([new ScriptedRuntime()]);
}
