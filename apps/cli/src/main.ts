#!/usr/bin/env node
/**
 * `aaas` — command-line client of the control plane (`npx aaas …` after `npm run build`).
 *
 *   aaas [--json] [--url <url>] [--key <api-key>] <command>
 *   aaas publish <manifest.yaml|.json> [--force]  create / update an agent, publish and activate a revision when its
 *                                                 content changed (else "unchanged"), bind A2A
 *   aaas agents list
 *   aaas runs list [--agent <id|slug>] [--status <s,…>] [--kind execution|reply] [--limit <n>] [--cursor <c>]
 *   aaas runs tail <run-id> [--after <seq>] [--cursor-file <path>] [--interval <ms>] [--retry-for <s>]
 *                                                 print the run's events as they are appended, until it ends;
 *                                                 survives dropped connections, resumes from the cursor file
 *   aaas runs get <run-id> [--events <n>]         state, agent, ages, open interactions, last events
 *   aaas runs export [--agent <id|slug>] [--status <s,…>] [--from <iso>] [--to <iso>] [--limit <n>]
 *        [--cursor <c>] [--output <file> [--resume]] [--retry-for <s>]
 *                                                 runs with their whole log as JSON Lines (run-archive.ts)
 *   aaas runs import <file|->                     re-import an archive into an organization with no runs
 *   aaas interactions list [--run <run-id>] [--open]
 *   aaas interactions answer <run-id> <interaction-id> (--text <t> | --option <id>) [--idempotency-key <k>]
 *   aaas login [--key-stdin] | context list | context use <name>   saved URL + key (cli-config.ts)
 *   aaas send <agent> <text> | chat <agent>       talk to an agent over A2A (a2a-chat.ts)
 *   aaas completion bash|zsh | --version
 *   aaas keys list | keys create <name> --scope <s…> | keys revoke <id>
 *   aaas signing-keys list | signing-keys create [--alg ES256|EdDSA] | signing-keys retire <id>
 *   aaas secrets list | secrets create <name> [--from-env <VAR>] | secrets rotate <name> [--from-env <VAR>]
 *        | secrets delete <name>                runtime secrets (the value from stdin, or a variable of
 *                                                 this shell with --from-env; never printed)
 *   aaas verify-card <card-url> [--trust <url>…] [--jwks <url-or-file>]
 *
 * Admin commands talk to the admin API at --url (AAAS_URL, else the context's, default
 * http://localhost:3000) with --key (AAAS_API_KEY, else the context's; see cli-config.ts). Output is readable (tables, short sentences); `--json` prints the API's
 * JSON instead (one JSON line per event for `runs tail`). Errors and progress go to stderr
 * (`aaas: <message>`).
 * Exit codes: 0 ok, 1 the check failed (e.g. no valid signature), 2 usage, network or API error.
 */
import { readFile } from 'node:fs/promises';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { importJWK, type JWK } from 'jose';
import { verifyAgentCard } from '#libs/trust';
import { AdminClient, ApiError, UsageError } from './admin-client.js';
import { bindingBody, loadManifest, sameBinding, sameRevisionContent } from './manifest.js';
import { ago, short, statusText, table } from './output.js';
import { adminClient, registerSessionCommands } from './session-commands.js';
import { packageVersion } from './version.js';
import { tailRun } from './run-tail.js';
import { exportRuns, importRuns } from './run-archive.js';
import { generateWebhookSecret, initCommand } from './init-agent.js';

const program = new Command('aaas')
  .description('A2A control plane command-line client')
  .configureOutput({ outputError: (str, write) => write(`aaas: ${str.replace(/^error: /, '')}`) })
  .showHelpAfterError('(add --help for usage)')
  .exitOverride()
  .option('--json', 'print JSON for scripts (the API\'s answers; one line per event for runs tail)')
  .option('--url <url>', 'the service (default: AAAS_URL, else http://localhost:3000)')
  .option('--key <api-key>', 'an API key of the organization (default: AAAS_API_KEY, else the context\'s)')
  .option('--context <name>', 'use this saved login (aaas login; default: AAAS_CONTEXT, else the current one)')
  .version(packageVersion(), '-V, --version', "print the CLI's version");

interface GlobalOpts {
  json?: boolean;
  url?: string;
  key?: string;
  context?: string;
}

const globals = () => program.opts<GlobalOpts>();
const json = () => globals().json === true;
const out = (line: string) => console.log(line);
const err = (line: string) => console.error(line);
/** `--json`: the value as indented JSON; else the readable text. */
const emit = (value: unknown, readable: () => string) => out(json() ? JSON.stringify(value, null, 2) : readable());

/** The admin API at the URL and key of this invocation: flags > AAAS_URL / AAAS_API_KEY > the saved context. */
function client(): AdminClient {
  return adminClient({ globals, out, err, emit });
}

const seg = (s: string) => encodeURIComponent(s);

function intOption(name: string, min: number) {
  return (v: string): string => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`${name} is a whole number >= ${min}`);
    return v;
  };
}

/** Run `fn` on each item, at most `n` at a time, results in input order. */
async function mapLimit<T, R>(items: readonly T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return results;
}

// ------------------------------------------------------------------ verify-card

async function fetchJson(where: string): Promise<unknown> {
  if (!/^https?:\/\//.test(where)) {
    try {
      return JSON.parse(await readFile(where, 'utf8'));
    } catch (e) {
      throw new UsageError(`cannot read ${where}: ${(e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e))}`);
    }
  }
  const res = await fetch(where, { signal: AbortSignal.timeout(15_000) }).catch((e: unknown) => {
    throw new Error(`GET ${where}: ${(e as { cause?: { code?: string } }).cause?.code ?? String(e)}`);
  });
  if (!res.ok) throw new Error(`GET ${where}: HTTP ${res.status}`);
  return res.json();
}

program
  .command('verify-card')
  .description("fetch an Agent Card, resolve its signing keys (its jku, if trusted, or --jwks) and verify every signature (exit 1 when none is valid)")
  .argument('<card-url>', 'the card URL (…/.well-known/agent-card.json) or a file')
  .option('--trust <url...>', "URLs a signature's jku may point into: same origin, under the path by whole segments (default: the card's own origin)")
  .option('--jwks <url-or-file>', "use this JWKS instead of the signatures' jku")
  .action(async (cardUrl: string, opts: { trust?: string[]; jwks?: string }) => {
    const card = (await fetchJson(cardUrl)) as Record<string, unknown>;
    const trust = opts.trust ?? (/^https?:\/\//.test(cardUrl) ? [`${new URL(cardUrl).origin}/`] : []);
    const sets = new Map<string, JWK[]>();
    const keysOf = async (where: string) => {
      if (!sets.has(where)) sets.set(where, ((await fetchJson(where)) as { keys?: JWK[] }).keys ?? []);
      return sets.get(where)!;
    };
    const result = await verifyAgentCard(
      card,
      async (kid, jku, alg) => {
        const source = opts.jwks ?? jku;
        if (!source) throw new Error('the signature names no jku; pass --jwks');
        const jwk = (await keysOf(source)).find((k) => k.kid === kid);
        return jwk ? ((await importJWK(jwk, alg)) as never) : null;
      },
      { trustedJku: opts.jwks ? [opts.jwks.replace(/[^/]*$/, '')] : trust },
    );
    emit(result, () =>
      [
        `${String(card.name ?? '(no name)')}: ${result.valid ? 'signature verified' : 'NOT verified'}`,
        ...result.checks.map((c) => `  [${c.index}] ${c.alg ?? '?'} kid=${c.kid ?? '?'}: ${c.valid ? 'valid' : `invalid — ${c.reason}`}`),
      ].join('\n'),
    );
    process.exitCode = result.valid ? 0 : 1;
  });

// ------------------------------------------------------------------ publish

program
  .command('publish')
  .description(
    'create or update an agent from a manifest (YAML or JSON: slug, name, description, protocolProfiles, runtime, binding?); ' +
      'publish and activate a new revision only when the active one differs, set the A2A binding only when it differs',
  )
  .argument('<manifest>', 'a .yaml / .yml (YAML) or .json file')
  .option('--force', 'publish a new revision (and put the binding) even when nothing changed')
  .action(async (file: string, o: { force?: boolean }) => {
    const m = await loadManifest(file);
    const c = client();
    const agentPath = `/v1/agents/${seg(m.slug)}`;
    const changes: string[] = [];
    let agent = await c.call('GET', agentPath).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    });
    if (!agent) {
      if (!m.name || !m.description) throw new UsageError(`${file}: a new agent needs name and description`);
      agent = { ...(await c.call('POST', '/v1/agents', { slug: m.slug, name: m.name, description: m.description })), binding: null };
      changes.push('agent');
    }
    const active = agent.activeRevisionId ? await c.call('GET', `${agentPath}/revisions/${seg(agent.activeRevisionId)}`) : null;
    const same = !o.force && active?.status === 'published' && sameRevisionContent(m, active);
    // the draft first: a manifest the service refuses changes nothing
    const revision: { id: string; number: number } = same ? active : await c.call('POST', `${agentPath}/revisions`, { protocolProfiles: m.protocolProfiles, runtime: m.runtime });
    const patch: Record<string, string> = {};
    if (!changes.includes('agent')) {
      if (m.name !== undefined && m.name.trim() !== agent.name) patch.name = m.name;
      if (m.description !== undefined && m.description.trim() !== agent.description) patch.description = m.description;
    }
    if (Object.keys(patch).length > 0) {
      await c.call('PATCH', agentPath, patch);
      changes.push(...Object.keys(patch));
    }
    if (!same) {
      await c.call('POST', `${agentPath}/revisions/${revision.id}/publish`);
      await c.call('PUT', `${agentPath}/active-revision`, { revisionId: revision.id });
      changes.push('revision');
    }
    let path: string | null = agent.binding?.path ?? null;
    let warnings: string[] = [];
    if (o.force || !sameBinding(m, agent.binding)) {
      const bound = await c.call('PUT', `${agentPath}/bindings/a2a`, bindingBody(m));
      path = bound.path ?? path;
      warnings = Array.isArray(bound.warnings) ? bound.warnings : [];
      changes.push('binding');
    }
    for (const w of warnings) err(`aaas: warning: ${w}`);
    const others = changes.filter((x) => x !== 'revision').map((x) => (x === 'agent' ? 'agent created' : x));
    emit({ agent: m.slug, revision: { id: revision.id, number: revision.number }, binding: path, unchanged: changes.length === 0, changes, warnings }, () => {
      const at = path ? `; A2A at ${path}` : '';
      if (changes.length === 0) return `agent ${m.slug}: unchanged (revision ${revision.number} is active)`;
      if (!changes.includes('revision')) return `agent ${m.slug}: updated ${others.join(', ')} (revision ${revision.number} is still active)${at}`;
      return `agent ${m.slug}: revision ${revision.number} published and active${at}${others.length ? `\n  also: ${others.join(', ')}` : ''}`;
    });
  });

// ------------------------------------------------------------------ agents

const agents = program.command('agents').description("the organization's agents");
agents
  .command('list', { isDefault: true })
  .description('slug, name, active revision, default')
  .action(async () => {
    const c = client();
    const r = await c.call<{ agents: Array<{ id: string; slug: string; name: string; activeRevisionId: string | null; isDefault: boolean }> }>('GET', '/v1/agents');
    if (json()) return out(JSON.stringify(r, null, 2));
    if (r.agents.length === 0) return out('no agents');
    const numbers = await mapLimit(r.agents, 8, async (a) =>
      a.activeRevisionId ? c.call<{ number: number }>('GET', `/v1/agents/${a.id}/revisions/${a.activeRevisionId}`).then((x) => `#${x.number}`, () => a.activeRevisionId!.slice(0, 8)) : null,
    );
    out(table(['SLUG', 'NAME', 'ACTIVE REVISION', 'DEFAULT'], r.agents.map((a, i) => [a.slug, short(a.name, 40), numbers[i], a.isDefault ? 'yes' : ''])));
  });

// ------------------------------------------------------------------ runs

const runs = program.command('runs').description('runs (A2A tasks)');
runs
  .command('list')
  .description('id, agent, status, last update; newest status change first')
  .option('--agent <id-or-slug>', 'only this agent')
  .option('--status <statuses>', 'comma-separated statuses (submitted, working, completed, failed, canceled, rejected)')
  .option('--kind <kind>', 'execution (A2A tasks) or reply (direct replies, A2A messages)')
  .option('--limit <n>', 'page size (1..100)', intOption('--limit', 1), '20')
  .option('--cursor <cursor>', "the previous page's nextCursor")
  .action(async (o: { agent?: string; status?: string; kind?: string; limit: string; cursor?: string }) => {
    const c = client();
    const agentId = o.agent && !/^[0-9a-f-]{36}$/i.test(o.agent) ? (await c.call<{ id: string }>('GET', `/v1/agents/${seg(o.agent)}`)).id : o.agent;
    const q = new URLSearchParams({ limit: o.limit, ...(agentId ? { agentId } : {}), ...(o.status ? { status: o.status } : {}), ...(o.kind ? { kind: o.kind } : {}), ...(o.cursor ? { cursor: o.cursor } : {}) });
    const r = await c.call<{ runs: Array<{ id: string; agentId: string; status: string; blockedReason: string | null; updatedAt: string; kind?: string }>; nextCursor: string | null }>('GET', `/v1/runs?${q}`);
    if (json()) return out(JSON.stringify(r, null, 2));
    if (r.runs.length === 0) return out('no runs');
    const slugs = new Map((await c.call<{ agents: Array<{ id: string; slug: string }> }>('GET', '/v1/agents')).agents.map((a) => [a.id, a.slug]));
    out(table(['ID', 'AGENT', 'STATUS', 'UPDATED'], r.runs.map((x) => [x.id, slugs.get(x.agentId) ?? x.agentId, `${statusText(x.status, x.blockedReason)}${x.kind === 'reply' ? ' (reply)' : ''}`, ago(x.updatedAt)])));
    if (r.nextCursor) out(`more: aaas runs list --cursor ${r.nextCursor}`);
  });
runs
  .command('tail')
  .description("print the run's events as they are appended until the run has ended (readable: #<seq> <type> <summary>; --json: one JSON line each)")
  .argument('<run-id>')
  .option('--after <sequence>', 'start after this sequence', intOption('--after', 0), '0')
  .option('--cursor-file <path>', 'start after the sequence stored there (if the file exists) and store the last printed one, so a restarted tail resumes')
  .option('--interval <ms>', 'poll interval', intOption('--interval', 10), '500')
  .option('--retry-for <seconds>', 'on network errors and 5xx answers, keep retrying this long', intOption('--retry-for', 0), '300')
  .action(async (runId: string, o: { after: string; cursorFile?: string; interval: string; retryFor: string }) => {
    await tailRun({
      client: client(),
      runId,
      after: Number(o.after),
      cursorFile: o.cursorFile,
      intervalMs: Number(o.interval),
      retryForMs: Number(o.retryFor) * 1000,
      json: json(),
      out,
      err,
    });
  });

runs
  .command('export')
  .description('write runs with their whole event log as JSON Lines (one run per line, oldest first) to stdout or --output')
  .option('--agent <id-or-slug>', 'only this agent')
  .option('--status <statuses>', 'comma-separated statuses (submitted, working, completed, failed, canceled, rejected)')
  .option('--from <time>', 'only runs created at or after this ISO 8601 time')
  .option('--to <time>', 'only runs created before this ISO 8601 time')
  .option('--limit <n>', 'at most this many runs', intOption('--limit', 1))
  .option('--cursor <cursor>', "start after the run whose line carried this cursor (each line's \"cursor\")")
  .option('--output <file>', 'write to this file instead of stdout')
  .option('--resume', 'with --output: continue after the last complete line of the file (a torn last line is cut off)')
  .option('--retry-for <seconds>', 'on network errors and 5xx answers, resume from the last line this long', intOption('--retry-for', 0), '300')
  .action(async (o: { agent?: string; status?: string; from?: string; to?: string; limit?: string; cursor?: string; output?: string; resume?: boolean; retryFor: string }) => {
    const c = client();
    const agentId = o.agent && !/^[0-9a-f-]{36}$/i.test(o.agent) ? (await c.call<{ id: string }>('GET', `/v1/agents/${seg(o.agent)}`)).id : o.agent;
    const query: Record<string, string> = {
      ...(agentId ? { agentId } : {}),
      ...(o.status ? { status: o.status } : {}),
      ...(o.from ? { createdFrom: o.from } : {}),
      ...(o.to ? { createdTo: o.to } : {}),
      ...(o.limit ? { limit: o.limit } : {}),
    };
    const n = await exportRuns({ client: c, query, cursor: o.cursor, output: o.output, resume: o.resume === true, retryForMs: Number(o.retryFor) * 1000, err });
    err(`aaas: exported ${n} runs`);
  });
runs
  .command('import')
  .description('import an archive (from runs export) into this organization, which must have no runs; all or nothing')
  .argument('<file>', "the archive ('-': stdin)")
  .action(async (file: string) => {
    const r = await importRuns(client(), file);
    emit(r, () => `imported ${r.runs} runs (${r.events} events)${r.linksSkipped ? `; ${r.linksSkipped} links to runs outside the archive skipped` : ''}`);
  });

// ------------------------------------------------------------------ interactions

const interactions = program.command('interactions').description('interactions of runs (input, auth, confirmation)');
interactions
  .command('answer')
  .description('answer an open interaction of a run')
  .argument('<run-id>')
  .argument('<interaction-id>')
  .option('--text <text>', 'the answer')
  .option('--option <id>', 'the option chosen (confirmations)')
  .option('--idempotency-key <key>', 'retry safely')
  .action(async (runId: string, interactionId: string, o: { text?: string; option?: string; idempotencyKey?: string }) => {
    if (o.text === undefined && o.option === undefined) throw new UsageError('give --text or --option');
    const body = { ...(o.text !== undefined && { text: o.text }), ...(o.option !== undefined && { optionId: o.option }) };
    const r = await client().call('POST', `/v1/runs/${seg(runId)}/interactions/${seg(interactionId)}/responses`, body, o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {});
    const answered = (r.interactions as Array<{ id: string; status: string }>).find((i) => i.id === interactionId);
    emit({ run: r.run, interactions: r.interactions }, () => `interaction ${interactionId}: ${answered?.status ?? 'answered'}; run ${runId} is ${statusText(r.run.status, r.run.blockedReason)}`);
  });

// ------------------------------------------------------------------ API keys

const keys = program.command('keys').description('API keys of the organization');
keys
  .command('list')
  .description('id, name, scopes, last used, created, revoked (never the secrets)')
  .action(async () => {
    const r = await client().call<{ apiKeys: Array<Record<string, any>> }>('GET', '/v1/api-keys');
    if (json()) return out(JSON.stringify(r, null, 2));
    if (r.apiKeys.length === 0) return out('no API keys');
    // A service from before lastUsedAt sends no such field: no column there, rather than a false "never"
    const lastUsed = r.apiKeys.some((k) => 'lastUsedAt' in k);
    out(
      table(
        ['ID', 'NAME', 'SCOPES', ...(lastUsed ? ['LAST USED'] : []), 'CREATED', 'REVOKED'],
        r.apiKeys.map((k) => [k.id, short(k.name, 40), k.scopes.join(','), ...(lastUsed ? [ago(k.lastUsedAt) ?? 'never'] : []), ago(k.createdAt), ago(k.revokedAt)]),
      ),
    );
  });
keys
  .command('create')
  .description('create a key; its secret is printed this once')
  .argument('<name>')
  .requiredOption('--scope <scopes...>', 'admin, a2a:invoke, a2a:all-tasks')
  .action(async (name: string, o: { scope: string[] }) => {
    const k = await client().call('POST', '/v1/api-keys', { name, scopes: o.scope });
    emit(k, () => [`API key "${k.name}" created (id ${k.id}, scopes ${k.scopes.join(', ')}).`, 'Its secret, shown only this once — store it now:', '', `  ${k.key}`, ''].join('\n'));
  });
keys
  .command('revoke')
  .description('revoke a key (other API processes may accept it for up to 5 s more)')
  .argument('<id>')
  .action(async (id: string) => {
    await client().call('DELETE', `/v1/api-keys/${seg(id)}`);
    emit({ id, revoked: true }, () => `API key ${id} revoked.`);
  });

// ------------------------------------------------------------------ signing keys

const signing = program.command('signing-keys').description('Agent Card signing keys of the organization');
signing
  .command('list')
  .action(async () => {
    const r = await client().call<{ signingKeys: Array<{ id: string; kid: string; alg: string; status: string; createdAt: string; retiredAt: string | null }> }>('GET', '/v1/signing-keys');
    if (json()) return out(JSON.stringify(r, null, 2));
    if (r.signingKeys.length === 0) return out('no signing keys');
    out(table(['ID', 'KID', 'ALG', 'STATUS', 'CREATED', 'RETIRED'], r.signingKeys.map((k) => [k.id, k.kid, k.alg, k.status, ago(k.createdAt), ago(k.retiredAt)])));
  });
signing
  .command('create')
  .option('--alg <alg>', 'ES256 or EdDSA', 'ES256')
  .action(async (o: { alg: string }) => {
    const k = await client().call('POST', '/v1/signing-keys', { alg: o.alg });
    emit(k, () => `signing key ${k.kid} (${k.alg}) created and active; id ${k.id}.`);
  });
signing
  .command('retire')
  .argument('<id>')
  .action(async (id: string) => {
    const k = await client().call('POST', `/v1/signing-keys/${seg(id)}/retire`);
    emit(k, () => `signing key ${k.kid} retired.`);
  });

// ------------------------------------------------------------------ runtime secrets

/**
 * A secret's value: the variable `fromEnv` of this shell, else stdin until EOF (one trailing
 * newline dropped, so `echo "$X" | aaas secrets create name` stores $X). Never echoed.
 */
async function secretValue(fromEnv: string | undefined): Promise<string> {
  if (fromEnv !== undefined) {
    const v = process.env[fromEnv];
    if (!v) throw new UsageError(`the variable ${fromEnv} is not set (or empty) in this shell`);
    return v;
  }
  if (process.stdin.isTTY) err('aaas: type the value, then Ctrl-D (or pipe it in, or use --from-env <VAR>)');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const v = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  if (v === '') throw new UsageError('no value on stdin (pipe it in, or use --from-env <VAR>)');
  return v;
}

interface RuntimeSecretView {
  name: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

const secrets = program
  .command('secrets')
  .description('runtime secrets of the organization (http runtime signing keys, a2a upstream credentials), referenced by name from revisions; values are stored encrypted and never shown');
secrets
  .command('list')
  .description('names, versions and times (never values)')
  .action(async () => {
    const r = await client().call<{ runtimeSecrets: RuntimeSecretView[] }>('GET', '/v1/runtime-secrets');
    if (json()) return out(JSON.stringify(r, null, 2));
    if (r.runtimeSecrets.length === 0) return out('no runtime secrets');
    out(table(['NAME', 'VERSION', 'CREATED', 'UPDATED'], r.runtimeSecrets.map((s) => [s.name, String(s.version), ago(s.createdAt), ago(s.updatedAt)])));
  });
secrets
  .command('create')
  .description('store a new secret (the value from stdin, or --from-env, or --generate)')
  .argument('<name>')
  .option('--from-env <VAR>', 'take the value from this variable of the shell instead of stdin')
  .option('--generate', 'generate a Standard Webhooks key (whsec_ + 32 random bytes, base64) and print it this once, for your http runtime backend')
  .action(async (name: string, o: { fromEnv?: string; generate?: boolean }) => {
    if (o.generate && o.fromEnv !== undefined) throw new UsageError('give --generate or --from-env, not both');
    const value = o.generate ? generateWebhookSecret() : await secretValue(o.fromEnv);
    const s = await client().call<RuntimeSecretView>('POST', '/v1/runtime-secrets', { name, value });
    const ref = `Reference it from a revision's runtime as "secret": "${s.name}"`;
    if (o.generate) return emit({ ...s, value }, () => [`runtime secret "${s.name}" created (version ${s.version}). ${ref}.`, 'Its value, shown only this once — give it to your backend (AAAS_WEBHOOK_SECRET):', '', `  ${value}`, ''].join('\n'));
    emit(s, () => `runtime secret "${s.name}" created (version ${s.version}). ${ref} (a2a: "credentials": { "secret": "${s.name}" }).`);
  });
secrets
  .command('rotate')
  .description('replace the value (version + 1); runs use it within a few seconds')
  .argument('<name>')
  .option('--from-env <VAR>', 'take the value from this variable of the shell instead of stdin')
  .action(async (name: string, o: { fromEnv?: string }) => {
    const s = await client().call<RuntimeSecretView>('PUT', `/v1/runtime-secrets/${seg(name)}`, { value: await secretValue(o.fromEnv) });
    emit(s, () => `runtime secret "${s.name}" rotated (version ${s.version}).`);
  });
secrets
  .command('delete')
  .description('delete a secret (runs of revisions referencing it fail until it exists again)')
  .argument('<name>')
  .action(async (name: string) => {
    await client().call('DELETE', `/v1/runtime-secrets/${seg(name)}`);
    emit({ name, deleted: true }, () => `runtime secret "${name}" deleted.`);
  });

registerSessionCommands(program, { globals, out, err, emit });
initCommand(program, out);

program.parseAsync().catch((e: unknown) => {
  // commander has already printed its own message (usage errors) or the help (exit 0)
  if (e instanceof CommanderError) {
    process.exitCode = e.exitCode === 0 ? 0 : 2;
    return;
  }
  console.error(`aaas: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 2;
});
