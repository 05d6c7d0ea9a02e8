/**
 * The CLI's saved logins: `${XDG_CONFIG_HOME:-~/.config}/aaas/config.json`, named contexts each
 * with a service URL, an API key and the key's organization slug, and the current context.
 *
 * The file holds API keys, so it is written with mode 0600 in a directory with mode 0700 (both
 * re-applied on every save, also to a file or directory that existed with wider modes), and
 * atomically (a temporary file in the same directory, then rename): a reader sees the old or the
 * new file, never half of one. Nothing here prints a key.
 *
 * Which URL and key a command uses: flags (`--url`, `--key`) > environment (`AAAS_URL`,
 * `AAAS_API_KEY`) > the context (`--context NAME`, else `AAAS_CONTEXT`, else the current one).
 * A context's key is only ever sent to that context's own URL: with a URL from a flag or the
 * environment that differs from it, the key must come from a flag or the environment too.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { UsageError } from './admin-client.js';

export interface CliContext {
  url: string;
  key: string;
  /** The key's organization (from GET /v1/organization at login): the `<org>` of A2A paths. */
  orgSlug?: string;
}

export interface CliConfig {
  current: string | null;
  contexts: Record<string, CliContext>;
}

export const DEFAULT_URL = 'http://localhost:3000';
export const DEFAULT_CONTEXT = 'default';
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The config file's path for this environment. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(homedir(), '.config');
  return path.join(base, 'aaas', 'config.json');
}

/** The saved config; an empty one when the file does not exist. Throws `UsageError` on a file that is not one. */
export function loadConfig(file = configPath()): CliConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { current: null, contexts: {} };
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new UsageError(`${file} is not valid JSON (fix or delete it, then aaas login again)`);
  }
  const c = raw as Partial<CliConfig> | null;
  if (!c || typeof c !== 'object' || typeof c.contexts !== 'object' || c.contexts === null) throw new UsageError(`${file} is not an aaas config (no "contexts")`);
  for (const [name, ctx] of Object.entries(c.contexts)) {
    if (typeof ctx?.url !== 'string' || typeof ctx?.key !== 'string') throw new UsageError(`${file}: context "${name}" needs url and key`);
  }
  return { current: typeof c.current === 'string' ? c.current : null, contexts: c.contexts };
}

/** Write the config atomically with mode 0600 in a 0700 directory. */
export function saveConfig(config: CliConfig, file = configPath()): void {
  const dir = path.dirname(file);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

/** Throws `UsageError` unless `name` can name a context. */
export function checkContextName(name: string): string {
  if (!NAME_RE.test(name)) throw new UsageError(`a context name is 1..64 letters, digits, ".", "_" or "-" (got "${name}")`);
  return name;
}

export interface Resolved {
  url: string;
  key: string | undefined;
  /** The context used (for its key or URL), if any. */
  context: { name: string; value: CliContext } | null;
}

/**
 * URL and key by precedence (see the file's docstring). `contextName`: `--context`; an unknown
 * one is a `UsageError` (a typo must not silently fall back to another organization).
 */
export function resolveTarget(flags: { url?: string; key?: string; contextName?: string }, env: NodeJS.ProcessEnv, config: CliConfig): Resolved {
  const wanted = flags.contextName ?? (env.AAAS_CONTEXT || undefined);
  if (wanted !== undefined && !config.contexts[wanted]) throw new UsageError(`no context "${wanted}" (aaas context list)`);
  const name = wanted ?? config.current ?? undefined;
  const ctx = name !== undefined && config.contexts[name] ? { name, value: config.contexts[name]! } : null;
  const url = flags.url ?? (env.AAAS_URL || undefined) ?? ctx?.value.url ?? DEFAULT_URL;
  const explicitKey = flags.key ?? (env.AAAS_API_KEY || undefined);
  if (explicitKey !== undefined) return { url, key: explicitKey, context: ctx };
  if (ctx && sameService(ctx.value.url, url)) return { url, key: ctx.value.key, context: ctx };
  return { url, key: undefined, context: null };
}

function sameService(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}
