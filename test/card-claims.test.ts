import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCard, verifyAgentCardSignature } from '@a2a-js/sdk';
import { createLocalJWKSet, type JWK } from 'jose';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { testEnv } from './support/env.js';
import { freePort } from './support/redis-server.js';

/**
 * A card never changes with the instance that answers (AaaS A2A profile: `signedAgentCard` is a
 * capability of the revision's profile). Three API processes as deployed (the compiled app in
 * dist/, as test/multi-process-resume.test.ts runs them) over one PostgreSQL: A and B configured
 * alike (SIGNING_KEY_ENCRYPTION_SECRET, one PUBLIC_BASE_URL), C without the secret. A signed card
 * is byte-identical from A and B (ES256 signatures are randomized: only stored signatures make
 * that true), C serves the same stored bytes or refuses (503), never an unsigned card, and C
 * reports not ready while a served card claims what it cannot serve (a signed card, push); so does
 * a worker (W2) that cannot read push secrets, which it would have to deliver.
 */
const SECRET = 'test-signing-secret-claims-0123456789';
const PUBLIC = 'https://agents.claims.example';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const alnum = (n: number) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join('');

const children: ChildProcess[] = [];
function start(env: Record<string, string>, app: 'api' | 'worker' = 'api'): void {
  children.push(spawn(process.execPath, [`dist/apps/${app}/src/main.js`], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] }));
}

async function waitListening(base: string): Promise<void> {
  const deadline = Date.now() + 100_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${base} did not start`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const built = existsSync('dist/apps/api/src/main.js');
let baseA: string;
let baseB: string;
let baseC: string;
/** Workers' /readyz ports: with the secret (W1) and without (W2). */
let workerW1: string;
let workerW2: string;
let adminKey: string;
let orgSlug: string;

beforeAll(async () => {
  if (!built) return;
  adminKey = `aaas_${alnum(8)}_${alnum(32)}`;
  orgSlug = `org-${randomUUID().slice(0, 8)}`;
  const env = {
    ...testEnv(),
    LOG_LEVEL: 'error',
    REDIS_PREFIX: `aaas-test-${randomUUID().slice(0, 8)}`,
    BOOTSTRAP_ORG_SLUG: orgSlug,
    BOOTSTRAP_ADMIN_KEY: adminKey,
    HOST: '127.0.0.1',
    // every instance writes the same origin into cards, as behind one load balancer
    PUBLIC_BASE_URL: PUBLIC,
  };
  const [a, b, c] = [await freePort(), await freePort(), await freePort()];
  [baseA, baseB, baseC] = [a, b, c].map((p) => `http://127.0.0.1:${p}`);
  start({ ...env, PORT: String(a), SIGNING_KEY_ENCRYPTION_SECRET: SECRET });
  start({ ...env, PORT: String(b), SIGNING_KEY_ENCRYPTION_SECRET: SECRET });
  start({ ...env, PORT: String(c) });
  const [w1, w2] = [await freePort(), await freePort()];
  [workerW1, workerW2] = [w1, w2].map((p) => `http://127.0.0.1:${p}`);
  start({ ...env, WORKER_METRICS_PORT: String(w1), SIGNING_KEY_ENCRYPTION_SECRET: SECRET }, 'worker');
  start({ ...env, WORKER_METRICS_PORT: String(w2) }, 'worker');
  await Promise.all([waitListening(baseA), waitListening(baseB), waitListening(baseC), waitListening(workerW1), waitListening(workerW2)]);
}, 120_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), 5000).unref();
        }),
    ),
  );
});

const cardOf = async (base: string, agent: PublishedAgent, version?: string) => {
  const res = await fetch(`${base}${agent.basePath}/.well-known/agent-card.json`, { headers: version ? { 'a2a-version': version } : {} });
  return { status: res.status, etag: res.headers.get('etag'), text: await res.text() };
};
const readiness = async (base: string) => {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, body: (await res.json()) as { error?: Record<string, { status: string; unserved?: Array<{ capability: string; needs: string }> }> } };
};

describe.skipIf(!built)('cards across API processes (compiled app)', () => {
  it('a signed card: identical bytes from two processes, the stored bytes (or a refusal) from one that cannot sign; an unsigned profile stays unsigned with keys present', async () => {
    expect((await adminRequest(baseA, adminKey, 'POST', '/v1/signing-keys', { alg: 'ES256' })).status).toBe(201);
    const signed = await publishAgent(baseA, adminKey, { slug: 'signed', a2a: { capabilities: { signedAgentCard: true } } });
    const plain = await publishAgent(baseA, adminKey, { slug: 'plain' });

    // the first to serve a version signs and stores it (B here), the others serve the stored row
    for (const version of [undefined, '0.3']) {
      const fromB = await cardOf(baseB, signed, version);
      const fromA = await cardOf(baseA, signed, version);
      expect(fromB.status).toBe(200);
      expect(JSON.parse(fromB.text).signatures).toHaveLength(1);
      expect(fromA.text).toBe(fromB.text);
      expect(fromA.etag).toBe(fromB.etag);
      // C has no secret, but the version is stored: the same bytes
      expect((await cardOf(baseC, signed, version)).text).toBe(fromB.text);
    }
    const card = JSON.parse((await cardOf(baseA, signed)).text) as Record<string, unknown>;
    const set = createLocalJWKSet((await (await fetch(`${baseA}/a2a/${orgSlug}/.well-known/jwks.json`)).json()) as { keys: JWK[] });
    await expect(verifyAgentCardSignature((kid) => set({ alg: 'ES256', kid }) as never)(AgentCard.fromJSON(card))).resolves.toBeUndefined();

    // no signedAgentCard in the profile: unsigned everywhere, although the organization has a key
    const plainCards = await Promise.all([baseA, baseB, baseC].map((b) => cardOf(b, plain)));
    expect(new Set(plainCards.map((c) => c.text)).size).toBe(1);
    expect(JSON.parse(plainCards[0]!.text).signatures).toBeUndefined();

    // a version nobody signed yet: C refuses (503) rather than serving it unsigned; once A signed it, C serves A's bytes
    const fresh = await publishAgent(baseA, adminKey, { slug: 'signed-fresh', a2a: { capabilities: { signedAgentCard: true } } });
    const refused = await cardOf(baseC, fresh);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.text).error.code).toBe('signing.unavailable');
    const fromA = await cardOf(baseA, fresh);
    expect(fromA.status).toBe(200);
    expect((await cardOf(baseC, fresh)).text).toBe(fromA.text);
  });

  it('readiness: the process that cannot sign (or keep push secrets) is not ready while a served card claims it; the configured ones are', async () => {
    // the previous test published a signed card; now a card claiming push notifications too
    await publishAgent(baseA, adminKey, { slug: 'pushy', a2a: { capabilities: { pushNotifications: true } } });
    const c = await readiness(baseC);
    expect(c.status).toBe(503);
    expect(c.body.error!.cardClaims!.status).toBe('down');
    expect(c.body.error!.cardClaims!.unserved).toEqual([
      { capability: 'signedAgentCard', needs: 'SIGNING_KEY_ENCRYPTION_SECRET' },
      { capability: 'pushNotifications', needs: 'PUSH_ENCRYPTION_SECRET (or SIGNING_KEY_ENCRYPTION_SECRET)' },
    ]);
    for (const base of [baseA, baseB]) expect((await readiness(base)).status).toBe(200);
    // C still claims nothing of its own: the card it serves is the one A and B serve
    const pushy = { basePath: `/a2a/${orgSlug}/pushy` } as PublishedAgent;
    expect((await cardOf(baseC, pushy)).text).toBe((await cardOf(baseA, pushy)).text);
    expect(JSON.parse((await cardOf(baseC, pushy)).text).capabilities.pushNotifications).toBe(true);

    // workers deliver push notifications: the one that cannot read push secrets is not ready;
    // signing is the API's business, so the signed card does not make a worker unready
    const w2 = await fetch(`${workerW2}/readyz`);
    expect(w2.status).toBe(503);
    expect(((await w2.json()) as { details: Record<string, unknown> }).details.pushClaims).toEqual({
      status: 'down',
      unserved: [{ capability: 'pushNotifications', needs: 'PUSH_ENCRYPTION_SECRET (or SIGNING_KEY_ENCRYPTION_SECRET)' }],
    });
    const w1 = await fetch(`${workerW1}/readyz`);
    expect(w1.status).toBe(200);
    expect(((await w1.json()) as { details: Record<string, unknown> }).details.pushClaims).toEqual({ status: 'up' });
  });
});
