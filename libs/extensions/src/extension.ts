import type { ZodType } from 'zod';
import type { CanonicalMessage } from '#libs/contracts';

/**
 * A broken rule of an activated extension (e.g. a message without the DataPart a profile
 * extension demands). The A2A adapter answers InvalidParams naming the extension and the rule.
 */
export class ExtensionRuleError extends Error {
  constructor(
    readonly uri: string,
    readonly rule: string,
  ) {
    super(`extension ${uri}: ${rule}`);
    this.name = 'ExtensionRuleError';
  }
}

/**
 * An A2A extension the service implements (A2A "Extensions": data-only, profile, method and
 * state-machine extensions; an extension adds data through `metadata`, never fields or enum
 * values). Registered once in ExtensionsModule.forRoot; a revision or binding declares it by
 * `uri` with `params` (validated by `params` when drafted / published).
 *
 * Hooks run only for requests that activated the extension (`A2A-Extensions` header).
 */
export interface A2AExtensionPlugin<P = Record<string, unknown>> {
  /** Exact URI (a `/v2` is another extension than `/v1`). */
  readonly uri: string;
  readonly description: string;
  /** Schema of the declaration's `params` (absent: no params). */
  readonly params?: ZodType<P>;
  /** Extensions a request must activate together with this one. */
  readonly dependsOn?: readonly string[];
  /** Data only (no behaviour): may not be declared `required`. */
  readonly dataOnly?: boolean;
  /** Markdown specification, served at the URI's path on this service. */
  readonly specDocument?: string;
  /**
   * Check (and optionally transform) an incoming user message of a request that activated the
   * extension. Throw ExtensionRuleError to refuse it; return a message to replace it.
   */
  onMessage?(message: CanonicalMessage, params: P): CanonicalMessage | void;
  /**
   * Method extension: JSON-RPC methods this extension adds (both versions), callable only by
   * requests that activate it, after the same authentication, tenancy and rate limits as core
   * methods. `params` is the caller's (untrusted: validate it). Throw an AppError / A2AError.
   */
  readonly methods?: Readonly<Record<string, ExtensionMethod>>;
  /**
   * Annotate what a request that activated the extension receives: the metadata of status
   * (status updates and tasks) and of artifacts. Gets a copy of the current metadata (possibly
   * empty) and returns the metadata to send; the log is not changed.
   */
  annotate?(target: 'status' | 'artifact', metadata: Record<string, unknown>, params: P): Record<string, unknown>;
}

/** What an extension method gets: the caller and agent, its params, and the services it may use. */
export interface ExtensionMethodContext {
  orgId: string;
  agentId: string;
  caller: { id: string | null; allTasks: boolean };
  version: '1.0' | '0.3';
  params: unknown;
  services: ExtensionServices;
}

export type ExtensionMethod = (ctx: ExtensionMethodContext) => Promise<unknown>;

/** Services the A2A adapter offers extension methods (results already in the call's version shape). */
export interface ExtensionServices {
  /**
   * Full-text search over the caller's own tasks of the agent (all of them with `allTasks`):
   * matching tasks, newest status first, and the next page's token ('' on the last page).
   * InvalidParams for a bad page token.
   */
  searchTasks(q: { query: string; pageSize: number; pageToken?: string; historyLength?: number }): Promise<{ tasks: unknown[]; nextPageToken: string }>;
}
