#!/usr/bin/env node
/**
 * `aaas` — command-line client of the control plane (`npx aaas …` after `npm run build`).
 *
 *   aaas verify-card <card-url> [--trust <url-prefix>…] [--jwks <url-or-file>] [--json]
 *   aaas publish <manifest.json>                 create / update an agent, publish and activate a revision, bind A2A
 *   aaas agents list
 *   aaas runs list [--agent <id>] [--status <s,…>] [--limit <n>]
 *   aaas runs tail <run-id> [--after <seq>]      print the run's events as they are appended, until it ends
 *   aaas interactions answer <run-id> <interaction-id> (--text <t> | --option <id>)
 *   aaas keys list | keys create <name> --scope <s…>
 *   aaas signing-keys list | signing-keys create [--alg ES256|EdDSA] | signing-keys retire <id>
 *
 * Admin commands talk to the admin API at --url (AAAS_URL, default http://localhost:3000) with
 * --key (AAAS_API_KEY), and print JSON.
 * Exit codes: 0 ok, 1 the check failed (e.g. no valid signature), 2 usage or network error.
 */
import { readFile } from 'node:fs/promises';
import { Command } from 'commander';
import { importJWK, type JWK } from 'jose';
import { verifyAgentCard } from '#libs/trust';

async function fetchJson(where: string): Promise<unknown> {
  if (!/^https?:\/\//.test(where)) return JSON.parse(await readFile(where, 'utf8'));
  const res = await fetch(where, { signal: AbortSignal.timeout(15_000) });
  if (!res.ok) throw new Error(`GET ${where}: HTTP ${res.status}`);
  return res.json();
}

const program = new Command('aaas').description('A2A control plane command-line client').showHelpAfterError();

program
  .command('verify-card')
  .description("fetch an Agent Card, resolve its signing keys (its jku, if trusted, or --jwks) and verify every signature")
  .argument('<card-url>', 'the card URL (…/.well-known/agent-card.json) or a file')
  .option('--trust <prefix...>', "URL prefixes a signature's jku may point into (default: the card's own origin)")
  .option('--jwks <url-or-file>', 'use this JWKS instead of the signatures\' jku')
  .option('--json', 'print the result as JSON')
  .action(async (cardUrl: string, opts: { trust?: string[]; jwks?: string; json?: boolean }) => {
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
    if (opts.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(`${String(card.name ?? '(no name)')}: ${result.valid ? 'signature verified' : 'NOT verified'}`);
      for (const c of result.checks) console.log(`  [${c.index}] ${c.alg ?? '?'} kid=${c.kid ?? '?'}: ${c.valid ? 'valid' : `invalid — ${c.reason}`}`);
    }
    process.exitCode = result.valid ? 0 : 1;
  });

// ------------------------------------------------------------------ admin API commands

interface AdminOpts {
  url?: string;
  key?: string;
}

program.option('--url <url>', 'the service (default: AAAS_URL, else http://localhost:3000)').option('--key <api-key>', 'an API key of the organization (default: AAAS_API_KEY)');

/** One admin API call; throws with the API's error code and message on a non-2xx answer. */
async function admin(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const opts = program.opts<AdminOpts>();
  const base = (opts.url ?? process.env.AAAS_URL ?? 'http://localhost:3000').replace(/\/+$/, '');
  const key = opts.key ?? process.env.AAAS_API_KEY;
  if (!key) throw new Error('an API key is needed: --key or AAAS_API_KEY');
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${json?.error?.code ?? ''} ${json?.error?.message ?? text}`.trim());
  return json;
}

const print = (v: unknown) => console.log(JSON.stringify(v, null, 2));

/**
 * An agent manifest: `{ slug, name, description, protocolProfiles, runtime, binding?: { transports,
 * security, extensions } }` (the admin API's bodies, together).
 */
program
  .command('publish')
  .description('create or update an agent from a manifest, publish and activate a new revision, and bind A2A')
  .argument('<manifest>', 'a JSON manifest file')
  .action(async (file: string) => {
    const m = JSON.parse(await readFile(file, 'utf8')) as { slug: string; name: string; description: string; protocolProfiles: unknown; runtime: unknown; binding?: Record<string, unknown> };
    if (!m.slug || !m.protocolProfiles || !m.runtime) throw new Error('a manifest needs slug, protocolProfiles and runtime');
    try {
      await admin('GET', `/v1/agents/${m.slug}`);
      await admin('PATCH', `/v1/agents/${m.slug}`, { name: m.name, description: m.description });
    } catch (e) {
      if (!String(e).includes('HTTP 404')) throw e;
      await admin('POST', '/v1/agents', { slug: m.slug, name: m.name, description: m.description });
    }
    const rev = await admin('POST', `/v1/agents/${m.slug}/revisions`, { protocolProfiles: m.protocolProfiles, runtime: m.runtime });
    await admin('POST', `/v1/agents/${m.slug}/revisions/${rev.id}/publish`);
    await admin('PUT', `/v1/agents/${m.slug}/active-revision`, { revisionId: rev.id });
    const binding = await admin('PUT', `/v1/agents/${m.slug}/bindings/a2a`, m.binding ?? { transports: ['JSONRPC'] });
    print({ agent: m.slug, revision: { id: rev.id, number: rev.number }, binding: binding.path ?? binding.binding?.path ?? null });
  });

program
  .command('agents')
  .description("the organization's agents")
  .argument('[action]', 'list', 'list')
  .action(async () => print(await admin('GET', '/v1/agents')));

const runs = program.command('runs').description('runs (A2A tasks)');
runs
  .command('list')
  .option('--agent <id>', 'only this agent (id)')
  .option('--status <statuses>', 'comma-separated statuses')
  .option('--limit <n>', 'page size (1..100)', '20')
  .action(async (o: { agent?: string; status?: string; limit: string }) => {
    const q = new URLSearchParams({ limit: o.limit, ...(o.agent ? { agentId: o.agent } : {}), ...(o.status ? { status: o.status } : {}) });
    print(await admin('GET', `/v1/runs?${q}`));
  });
runs
  .command('tail')
  .description("print the run's events (one JSON line each) as they are appended, until the run has ended")
  .argument('<run-id>')
  .option('--after <sequence>', 'start after this sequence', '0')
  .option('--interval <ms>', 'poll interval', '500')
  .action(async (runId: string, o: { after: string; interval: string }) => {
    let after = Number(o.after);
    for (;;) {
      const page = await admin('GET', `/v1/runs/${runId}/events?after=${after}&limit=100`);
      for (const e of page.events) console.log(JSON.stringify({ sequence: e.sequence, type: e.event.type, payload: e.event.payload }));
      after = page.nextAfter;
      if (page.events.length === 100) continue;
      const run = (await admin('GET', `/v1/runs/${runId}`)).run;
      if (['completed', 'failed', 'canceled', 'rejected'].includes(run.status) && run.lastSequence <= after) return;
      await new Promise((r) => setTimeout(r, Number(o.interval)));
    }
  });

program
  .command('interactions')
  .description('answer an interaction of a run (input, auth, confirmation)')
  .argument('<action>', 'answer')
  .argument('<run-id>')
  .argument('<interaction-id>')
  .option('--text <text>', 'the answer')
  .option('--option <id>', 'the option chosen (confirmations)')
  .option('--idempotency-key <key>', 'retry safely')
  .action(async (action: string, runId: string, interactionId: string, o: { text?: string; option?: string; idempotencyKey?: string }) => {
    if (action !== 'answer') throw new Error(`unknown action ${action}: answer`);
    if (o.text === undefined && o.option === undefined) throw new Error('give --text or --option');
    const body = { ...(o.text !== undefined && { text: o.text }), ...(o.option !== undefined && { optionId: o.option }) };
    const r = await admin('POST', `/v1/runs/${runId}/interactions/${interactionId}/responses`, body, o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {});
    print({ run: r.run, interactions: r.interactions });
  });

const keys = program.command('keys').description('API keys of the organization');
keys.command('list').action(async () => print(await admin('GET', '/v1/api-keys')));
keys
  .command('create')
  .argument('<name>')
  .requiredOption('--scope <scopes...>', 'admin, a2a:invoke, a2a:all-tasks')
  .action(async (name: string, o: { scope: string[] }) => print(await admin('POST', '/v1/api-keys', { name, scopes: o.scope })));

const signing = program.command('signing-keys').description('Agent Card signing keys of the organization');
signing.command('list').action(async () => print(await admin('GET', '/v1/signing-keys')));
signing
  .command('create')
  .option('--alg <alg>', 'ES256 or EdDSA', 'ES256')
  .action(async (o: { alg: string }) => print(await admin('POST', '/v1/signing-keys', { alg: o.alg })));
signing
  .command('retire')
  .argument('<id>')
  .action(async (id: string) => print(await admin('POST', `/v1/signing-keys/${id}/retire`)));

program.parseAsync().catch((e: unknown) => {
  console.error(`aaas: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 2;
});
