import { AppError } from '#libs/common';
import { z } from 'zod';
import type { AgentRuntime } from './runtime.js';
import { ScriptedRuntime } from './scripted/scripted.runtime.js';

const KindSchema = z.looseObject({ kind: z.string().min(1) });

/** A runtime with a config it validated (RuntimeRegistry.parse). */
export interface ParsedRuntime {
  runtime: AgentRuntime;
  config: unknown;
}

/** The runtimes of this deployment, by `kind`. */
export class RuntimeRegistry {
  private readonly byKind = new Map<string, AgentRuntime>();
  /** Parsed configs of published revisions, by revision id (see `parseRevision`). */
  private readonly revisions = new ParsedRuntimeCache(1000);

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
  parse(raw: unknown): ParsedRuntime {
    const runtime = this.get(KindSchema.parse(raw).kind);
    return { runtime, config: runtime.parseConfig(raw) };
  }

  /**
   * The runtime and parsed config of a published revision — the one parse of a revision's runtime
   * config that every caller uses (the A2A adapter's direct replies, the executor, the lost-execution
   * policy). Published revisions are immutable, so a parsed config is kept by revision id for the
   * process (at most 1000, least recently used out) and `load` (the stored config `{ kind, ... }`)
   * is called only on a miss. Throws what `load` throws, and as `parse` (ZodError,
   * `runtime.unknown_kind`); a config that fails is not kept.
   */
  async parseRevision(revisionId: string, load: () => unknown): Promise<ParsedRuntime> {
    const cached = this.revisions.get(revisionId);
    if (cached) return cached;
    const parsed = this.parse(await load());
    this.revisions.set(revisionId, parsed);
    return parsed;
  }
}

/** The registry with every built-in runtime (currently `scripted`), for code outside Nest. */
export function defaultRuntimeRegistry(): RuntimeRegistry {
  return new RuntimeRegistry([new ScriptedRuntime()]);
}

/** A bounded cache of parsed runtime configs by revision id (published revisions are immutable). */
class ParsedRuntimeCache {
  private readonly entries = new Map<string, ParsedRuntime>();

  constructor(private readonly max = 1000) {}

  get(revisionId: string): ParsedRuntime | undefined {
    const hit = this.entries.get(revisionId);
    if (hit) {
      // least recently used goes first: re-insert on a hit
      this.entries.delete(revisionId);
      this.entries.set(revisionId, hit);
    }
    return hit;
  }

  set(revisionId: string, entry: ParsedRuntime): void {
    this.entries.delete(revisionId);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(revisionId, entry);
  }

  get size(): number {
    return this.entries.size;
  }
}
