#!/usr/bin/env node
/**
 * `aaas` — command-line client of the control plane (`npx aaas …` after `npm run build`).
 *
 *   aaas verify-card <card-url> [--trust <url-prefix>…] [--jwks <url-or-file>] [--json]
 *
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

program.parseAsync().catch((e: unknown) => {
  console.error(`aaas: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 2;
});
