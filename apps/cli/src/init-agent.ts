/**
 * `aaas init agent <dir> [--lang node|python]`: scaffold a backend for the `http` runtime
 * (docs/runtimes.md) — the backend (`agent.mjs`, Node built-ins only, or `agent.py`, Python's
 * standard library only), its manifest for `aaas publish` (`agent.yaml`) and a README — from the
 * templates in apps/cli/templates/agent/. And `generateWebhookSecret()`, the `whsec_…` value
 * `aaas secrets create <name> --generate` stores.
 *
 * Templates hold `{{key}}` placeholders, replaced by `renderTemplate`; nothing else is touched, so
 * a template stays a runnable, readable file of its language.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { AgentSlugSchema, RuntimeSecretNameSchema } from '#libs/contracts';
import { UsageError } from './admin-client.js';

export type AgentLanguage = 'node' | 'python';

/** A fresh Standard Webhooks signing key: `whsec_` + base64 of 32 random bytes (256 bits). */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** What differs per language: the backend file, how to start it, what it needs. */
const LANGUAGES: Record<AgentLanguage, { file: string; start: string; langName: string; deps: string }> = {
  node: { file: 'agent.mjs', start: 'node agent.mjs', langName: 'Node >= 20', deps: 'no dependencies beyond node: built-ins' },
  python: { file: 'agent.py', start: 'python3 agent.py', langName: 'Python >= 3.8', deps: 'standard library only' },
};

/** The keyword that makes the scaffolded backend ask for a confirmation. */
export const CONFIRM_KEYWORD = 'confirm';

/**
 * apps/cli/templates/agent, found from this module both as source (apps/cli/src) and as built
 * (dist/apps/cli/src). Throws when neither exists (a CLI copied without its templates).
 */
function templatesDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.resolve(here, '../templates/agent'), path.resolve(here, '../../../../apps/cli/templates/agent')];
  const found = candidates.find((c) => existsSync(c));
  if (!found) throw new Error(`the agent templates are missing (looked in ${candidates.join(', ')})`);
  return found;
}

/** Replace each `{{key}}` of `values` in `text`; an unknown `{{key}}` is a bug in a template and throws. */
export function renderTemplate(text: string, values: Record<string, string>): string {
  return text.replace(/\{\{(\w+)\}\}/g, (_m, key: string) => {
    const v = values[key];
    if (v === undefined) throw new Error(`template placeholder {{${key}}} has no value`);
    return v;
  });
}

export interface InitAgentOptions {
  lang: AgentLanguage;
  /** The agent's slug (default: the directory's name, lowercased, other characters as `-`). */
  slug?: string;
  /** The port the backend listens on and the manifest's runtime.url points at (default 8787). */
  port?: number;
  /** The runtime secret's name the manifest references (default `<slug>-webhook`). */
  secret?: string;
}

/** One file written by `initAgent`: its path and its text. */
export interface ScaffoldedFile {
  path: string;
  text: string;
}

/** The slug `dir` suggests: its base name, lowercased, runs of other characters as `-`. */
export function slugFromDir(dir: string): string {
  return path.basename(path.resolve(dir)).toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63) || 'my-agent';
}

/**
 * Write the scaffold into `dir` (created when missing). Refuses (`UsageError`) an invalid slug or
 * secret name, or a `dir` where one of the files already exists — nothing is overwritten.
 * Returns the files written.
 */
export async function initAgent(dir: string, opts: InitAgentOptions): Promise<ScaffoldedFile[]> {
  const lang = LANGUAGES[opts.lang];
  const slug = opts.slug ?? slugFromDir(dir);
  if (!AgentSlugSchema.safeParse(slug).success) throw new UsageError(`"${slug}" is not an agent slug (lowercase letters, digits and hyphens, 1..63 characters); give --slug`);
  const secret = opts.secret ?? `${slug}-webhook`.replace(/^[^a-z]+/, 'agent-').slice(0, 64);
  if (!RuntimeSecretNameSchema.safeParse(secret).success) throw new UsageError(`"${secret}" is not a runtime secret name (letters, digits, _ and -, starting with a letter); give --secret`);
  const name = slug
    .split('-')
    .filter(Boolean)
    .map((w, i) => (i === 0 ? w[0]!.toUpperCase() + w.slice(1) : w))
    .join(' ');
  const values = {
    slug,
    name,
    nameYaml: JSON.stringify(name),
    port: String(opts.port ?? 8787),
    secret,
    keyword: CONFIRM_KEYWORD,
    file: lang.file,
    start: lang.start,
    langName: lang.langName,
    deps: lang.deps,
  };
  const from = templatesDir();
  const sources: Array<[string, string]> = [
    [path.join(from, opts.lang, lang.file), lang.file],
    [path.join(from, 'agent.yaml'), 'agent.yaml'],
    [path.join(from, 'README.md'), 'README.md'],
  ];
  const files: ScaffoldedFile[] = [];
  for (const [source, target] of sources) {
    files.push({ path: path.join(dir, target), text: renderTemplate(await readFile(source, 'utf8'), values) });
  }
  const taken = files.filter((f) => existsSync(f.path)).map((f) => f.path);
  if (taken.length > 0) throw new UsageError(`${taken.join(', ')} already exist${taken.length === 1 ? 's' : ''}; nothing was written (choose another directory)`);
  await mkdir(dir, { recursive: true });
  for (const f of files) await writeFile(f.path, f.text, { flag: 'wx', mode: f.path.endsWith(lang.file) ? 0o755 : 0o644 });
  return files;
}

/** Add the `init` command group (`aaas init agent …`) to the CLI's `program` (it inherits its output and exit settings). */
export function initCommand(program: Command, print: (line: string) => void = console.log): Command {
  const init = program.command('init').description('scaffold new things locally (no service needed)');
  init
    .command('agent')
    .description('scaffold a backend for the http runtime (signature check, streamed NDJSON operations, a confirmation), its manifest and a README')
    .argument('<dir>', 'the directory to create (or an empty one)')
    .addOption(new Option('--lang <lang>', 'the backend language').choices(['node', 'python']).default('node'))
    .option('--slug <slug>', "the agent's slug (default: from the directory name)")
    .option('--port <port>', 'the port the backend listens on', (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('a port is 1..65535');
      return String(n);
    }, '8787')
    .option('--secret <name>', 'the runtime secret the manifest references (default: <slug>-webhook)')
    .action(async (dir: string, o: { lang: AgentLanguage; slug?: string; port: string; secret?: string }) => {
      const files = await initAgent(dir, { lang: o.lang, slug: o.slug, port: Number(o.port), secret: o.secret });
      const yaml = files.find((f) => f.path.endsWith('agent.yaml'))!.text;
      const secret = /^\s*secret:\s*(\S+)/m.exec(yaml)![1];
      const lang = LANGUAGES[o.lang];
      print(
        [
          `created ${files.map((f) => f.path).join(', ')}`,
          '',
          'next:',
          `  aaas secrets create ${secret} --generate          # prints the whsec_… value once`,
          `  cd ${dir} && AAAS_WEBHOOK_SECRET=whsec_… PORT=${o.port} ${lang.start}`,
          `  aaas publish ${path.join(dir, 'agent.yaml')}`,
        ].join('\n'),
      );
    });
  return init;
}
