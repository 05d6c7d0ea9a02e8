import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * A `jwt` binding whose issuer is unreachable, slow or broken. The verifier (libs/a2a
 * jwt-verifier.ts) fetches the binding's `jwksUri` (or discovers it) with a 5 s timeout. Keys it
 * cannot read are not the caller's fault (its token may be fine; authenticating again would not
 * help): every such call is answered 503 with `Retry-After` (JSON-RPC -32603, HTTP+JSON
 * UNAVAILABLE) and a message that says the issuer's keys could not be read — never a 500, never a hang (a
 * silent issuer costs at most the 5 s timeout, shared by concurrent calls). A failure is
 * remembered for JWT_ISSUER_FAILURE_TTL_MS (1 s here, 5 s by default): calls meanwhile get the same
 * answer without a fetch, so bogus tokens cannot make the service hammer the issuer (issue #43);
 * the first call after it fetches again and succeeds once the issuer is back. Keys fetched once are
 * cached (10 min) and keep serving while the issuer is down (so does a well-formed set jose cannot
 * use, such as one of private keys: it stays refused until the cache expires).
 */

const AUDIENCE = 'a2a-issuer-down';
const KID = 'issuer-down-1';
const FETCH_TIMEOUT_MS = 5_000;
const FAILURE_TTL_MS = 1_000;
/** Past the remembered failure: the next call fetches again. */
const pastFailure = () => new Promise((r) => setTimeout(r, FAILURE_TTL_MS + 100));
const RUNTIME = { kind: 'scripted', rules: [] };

type Mode = 'ok' | 'hang' | 'headers-only' | 'html' | 'not-a-jwks' | 'private-key' | 'error-500' | 'redirect';

let stack: Stack;
let signingKey: CryptoKey;
let publicJwk: JWK;
let privateJwk: JWK;
/** One issuer over real HTTP: `/<name>/jwks` behaves as `modes[name]` says; discovery at `/<name>/.well-known/openid-configuration`. */
let issuerServer: http.Server;
let issuerBase: string;
const modes = new Map<string, Mode>();
const hits = new Map<string, number>();
const sockets = new Set<Socket>();

function jwksResponse(mode: Mode, res: http.ServerResponse): void {
  switch (mode) {
    case 'ok':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] }));
      return;
    case 'hang':
      return; // never answers
    case 'headers-only':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"keys":['); // and never the rest
      return;
    case 'html':
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>maintenance</body></html>');
      return;
    case 'not-a-jwks':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ hello: 'world' }));
      return;
    case 'private-key':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [privateJwk] }));
      return;
    case 'error-500':
      res.writeHead(500, { 'content-type': 'text/plain' }).end('upstream exploded');
      return;
    case 'redirect':
      res.writeHead(302, { location: 'http://127.0.0.1:1/jwks' }).end();
      return;
  }
}

const issuerOf = (name: string) => `${issuerBase}/${name}`;

async function token(iss: string, opts: { kid?: string } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ scope: 'a2a.invoke' })
    .setProtectedHeader({ alg: 'ES256', kid: opts.kid ?? KID })
    .setIssuer(iss)
    .setAudience(AUDIENCE)
    .setSubject('alice')
    .setIssuedAt(now)
    .setExpirationTime(now + 300)
    .sign(signingKey);
}

/** An agent guarded by `issuer` with keys at `jwksUri` (none: OIDC discovery). */
function guarded(slug: string, issuer: string, jwksUri?: string, on: Stack = stack): Promise<PublishedAgent> {
  return publishAgent(on.baseUrl, on.adminKey, {
    slug,
    runtime: RUNTIME,
    transports: ['JSONRPC', 'HTTP+JSON'],
    security: { scheme: 'jwt', issuer, audience: AUDIENCE, ...(jwksUri ? { jwksUri } : {}) } as never,
  });
}

interface Call {
  status: number;
  challenge: string | null;
  retryAfter: string | null;
  body: any;
  ms: number;
}

async function rpc(agent: PublishedAgent, bearer: string, on: Stack = stack): Promise<Call> {
  const t0 = Date.now();
  const res = await fetch(`${on.baseUrl}${agent.basePath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', authorization: `Bearer ${bearer}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello' }] } } }),
  });
  return { status: res.status, challenge: res.headers.get('www-authenticate'), retryAfter: res.headers.get('retry-after'), body: await res.json(), ms: Date.now() - t0 };
}

async function rest(agent: PublishedAgent, bearer: string): Promise<Call> {
  const t0 = Date.now();
  const res = await fetch(`${stack.baseUrl}${agent.basePath}/tasks`, { headers: { 'a2a-version': '1.0', authorization: `Bearer ${bearer}` } });
  return { status: res.status, challenge: res.headers.get('www-authenticate'), retryAfter: res.headers.get('retry-after'), body: await res.json(), ms: Date.now() - t0 };
}

/** The answer to a call whose issuer keys could not be read: 503, Retry-After, no challenge, a readable reason. */
function expectKeysUnavailable(call: Call, reason: RegExp, what: string): void {
  expect(call.status, what).toBe(503);
  expect(call.retryAfter, what).toBe('2');
  expect(call.challenge, what).toBeNull();
  const message: string = call.body.error.message;
  expect(message, what).toMatch(/^the token issuer's key set could not be read \(/);
  expect(message, what).toMatch(reason);
}

function expectAccepted(call: Call, what: string): void {
  expect(call.status, what).toBe(200);
  expect(call.body.error, what).toBeUndefined();
  expect(call.body.result.task ?? call.body.result.message, what).toBeDefined();
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

beforeAll(async () => {
  const pair = await generateKeyPair('ES256', { extractable: true });
  signingKey = pair.privateKey;
  publicJwk = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: 'ES256', use: 'sig' };
  privateJwk = { ...(await exportJWK(pair.privateKey)), kid: KID, alg: 'ES256', use: 'sig' };
  issuerServer = http.createServer((req, res) => {
    const [, name, ...rest] = (req.url ?? '').split('/');
    const path = `/${rest.join('/')}`;
    const mode = modes.get(name!);
    if (!mode) return void res.writeHead(404).end();
    hits.set(name!, (hits.get(name!) ?? 0) + 1);
    if (path === '/.well-known/openid-configuration') {
      if (mode !== 'ok') return jwksResponse(mode, res);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: issuerOf(name!), jwks_uri: `${issuerOf(name!)}/jwks` }));
    }
    if (path === '/jwks') return jwksResponse(mode, res);
    res.writeHead(404).end();
  });
  issuerServer.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => issuerServer.listen(0, '127.0.0.1', r));
  issuerBase = `http://127.0.0.1:${(issuerServer.address() as AddressInfo).port}`;
  stack = await startStack({ env: { JWT_ISSUER_ALLOWED_CIDRS: '127.0.0.0/8', JWT_ISSUER_FAILURE_TTL_MS: String(FAILURE_TTL_MS) } });
});

afterAll(async () => {
  await stack?.close();
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => issuerServer?.close(() => r()));
});

describe('a jwt binding whose issuer is down', () => {
  it('JWKS on a closed port: 503 at once with a readable reason on both bindings; the first call after the issuer comes back succeeds', async () => {
    const port = await closedPort();
    const iss = 'https://issuer.closed.example';
    const agent = await guarded('closed-port', iss, `http://127.0.0.1:${port}/jwks`);
    const bearer = await token(iss);
    for (let i = 0; i < 2; i++) {
      const viaRpc = await rpc(agent, bearer);
      expectKeysUnavailable(viaRpc, /\(fetch failed: ECONNREFUSED\)$/, `JSON-RPC #${i}`);
      expect(viaRpc.body.error.code).toBe(-32603);
      expect(viaRpc.ms).toBeLessThan(2_000);
      const viaRest = await rest(agent, bearer);
      expectKeysUnavailable(viaRest, /\(fetch failed: ECONNREFUSED\)$/, `REST #${i}`);
      expect(viaRest.body.error).toMatchObject({ code: 503, status: 'UNAVAILABLE' });
    }
    // the issuer comes back on that port: once the failure is forgotten, the next call fetches and passes
    await pastFailure();
    const back = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] })));
    await new Promise<void>((r) => back.listen(port, '127.0.0.1', r));
    try {
      expectAccepted(await rpc(agent, bearer), 'after the issuer is back');
      expect((await rest(agent, bearer)).status).toBe(200);
    } finally {
      back.closeAllConnections();
      await new Promise<void>((r) => back.close(() => r()));
    }
  });

  it(`a JWKS endpoint that never answers costs at most the ${FETCH_TIMEOUT_MS / 1000} s fetch timeout, shared by concurrent calls; then 503, and a call after it recovers succeeds at once`, async () => {
    modes.set('silent', 'hang');
    const iss = issuerOf('silent');
    const agent = await guarded('silent-issuer', iss, `${iss}/jwks`);
    const bearer = await token(iss);
    const t0 = Date.now();
    const calls = await Promise.all([rpc(agent, bearer), rpc(agent, bearer), rest(agent, bearer)]);
    const elapsed = Date.now() - t0;
    for (const [i, c] of calls.entries()) expectKeysUnavailable(c, /\(no answer within 5 s\)$/, `concurrent call ${i}`);
    expect(elapsed).toBeGreaterThanOrEqual(FETCH_TIMEOUT_MS - 250);
    expect(elapsed).toBeLessThan(FETCH_TIMEOUT_MS + 2_000);
    expect(hits.get('silent'), 'concurrent calls share one fetch').toBe(1);
    modes.set('silent', 'ok');
    await pastFailure();
    const after = await rpc(agent, bearer);
    expectAccepted(after, 'after recovery');
    expect(after.ms).toBeLessThan(2_000);
  });

  it('a JWKS endpoint that sends headers and then stalls the body is cut by the same timeout', async () => {
    modes.set('stall', 'headers-only');
    const iss = issuerOf('stall');
    const agent = await guarded('stalled-issuer', iss, `${iss}/jwks`);
    const call = await rpc(agent, await token(iss));
    expectKeysUnavailable(call, /\(no answer within 5 s\)$/, 'stalled body');
    expect(call.ms).toBeLessThan(FETCH_TIMEOUT_MS + 2_000);
  });

  it('a JWKS endpoint that answers garbage (HTML, JSON that is no key set, 500, a redirect) gets 503 naming the problem; fixed, the next call passes', async () => {
    const cases: Array<[Mode, RegExp]> = [
      ['html', /\(Failed to parse the JSON Web Key Set HTTP response as JSON\)$/],
      ['not-a-jwks', /\(JSON Web Key Set malformed\)$/],
      ['error-500', /\(Expected 200 OK from the JSON Web Key Set HTTP response\)$/],
      ['redirect', /\(Expected 200 OK from the JSON Web Key Set HTTP response\)$/],
    ];
    for (const [mode, reason] of cases) {
      modes.set(mode, mode);
      const iss = issuerOf(mode);
      const agent = await guarded(`garbage-${mode}`, iss, `${iss}/jwks`);
      const bearer = await token(iss);
      const call = await rpc(agent, bearer);
      expectKeysUnavailable(call, reason, mode);
      expect(call.ms, mode).toBeLessThan(2_000);
      modes.set(mode, 'ok');
      await pastFailure();
      expectAccepted(await rpc(agent, bearer), `${mode} fixed`);
    }
  });

  it('a key set that publishes private keys is refused as unusable; being a well-formed set it stays cached (10 min) after the issuer fixes it', async () => {
    modes.set('leaky', 'private-key');
    const iss = issuerOf('leaky');
    const agent = await guarded('leaky-issuer', iss, `${iss}/jwks`);
    const bearer = await token(iss);
    expectKeysUnavailable(await rpc(agent, bearer), /\(JSON Web Key Set members must be public keys\)$/, 'private keys');
    const fetched = hits.get('leaky');
    modes.set('leaky', 'ok');
    expectKeysUnavailable(await rpc(agent, bearer), /must be public keys/, 'still cached');
    expect(hits.get('leaky')).toBe(fetched);
  });

  it('OIDC discovery on an issuer that is down, hangs or answers garbage: the same 503 (discovery document unreadable); it is retried, not cached', async () => {
    const downIss = `http://127.0.0.1:${await closedPort()}`;
    const down = await guarded('discovery-down', downIss);
    const d = await rpc(down, await token(downIss));
    expect(d.status).toBe(503);
    expect(d.retryAfter).toBe('2');
    expect(d.body.error.message).toMatch(/^the token issuer's discovery document could not be read \(/);
    expect(d.ms).toBeLessThan(2_000);

    modes.set('disco', 'html');
    const iss = issuerOf('disco');
    const agent = await guarded('discovery-garbage', iss);
    const bearer = await token(iss);
    const g = await rpc(agent, bearer);
    expect(g.status).toBe(503);
    expect(g.body.error.message).toMatch(/discovery document could not be read/);
    modes.set('disco', 'hang');
    await pastFailure();
    const h = await rpc(agent, bearer);
    expect(h.status).toBe(503);
    expect(h.body.error.message).toMatch(/discovery document could not be read/);
    expect(h.ms).toBeLessThan(FETCH_TIMEOUT_MS + 2_000);
    modes.set('disco', 'ok');
    await pastFailure();
    expectAccepted(await rpc(agent, bearer), 'discovery back');
  });

  it('bogus tokens against a failing issuer: one fetch per JWT_ISSUER_FAILURE_TTL_MS, not one per call (key set and discovery)', async () => {
    modes.set('hammered', 'error-500');
    const iss = issuerOf('hammered');
    const agent = await guarded('hammered-jwks', iss, `${iss}/jwks`);
    const discovered = await guarded('hammered-discovery', iss);
    const bogus = await token(iss, { kid: 'bogus' });
    for (const [a, what] of [[agent, 'jwks'], [discovered, 'discovery']] as const) {
      const before = hits.get('hammered') ?? 0;
      const calls = await Promise.all(Array.from({ length: 40 }, () => rpc(a, bogus)));
      for (const c of calls) expect(c.status, what).toBe(503);
      expect((hits.get('hammered') ?? 0) - before, `${what}: 40 bogus calls, one fetch`).toBe(1);
      for (let i = 0; i < 20; i++) expect((await rpc(a, bogus)).status).toBe(503);
      expect((hits.get('hammered') ?? 0) - before, `${what}: 20 more within the TTL, no fetch`).toBe(1);
      await pastFailure();
      await rpc(a, bogus);
      expect((hits.get('hammered') ?? 0) - before, `${what}: after the TTL, one more`).toBe(2);
    }
  });

  it('keys fetched once keep serving while the issuer is down; a token with an unknown key is refused at once, not after a refetch', async () => {
    modes.set('cached', 'ok');
    const iss = issuerOf('cached');
    const agent = await guarded('cached-keys', iss, `${iss}/jwks`);
    const bearer = await token(iss);
    expectAccepted(await rpc(agent, bearer), 'issuer up');
    const fetched = hits.get('cached');
    modes.set('cached', 'hang');
    const during = await rpc(agent, bearer);
    expectAccepted(during, 'issuer down, keys cached');
    expect(during.ms).toBeLessThan(2_000);
    const unknown = await rpc(agent, await token(iss, { kid: 'rotated-away' }));
    expect(unknown.status).toBe(401);
    expect(unknown.challenge).toMatch(/error="invalid_token".*no key of the issuer's key set matches/);
    expect(unknown.ms).toBeLessThan(2_000);
    expect(hits.get('cached')).toBe(fetched);
  });
});

describe('a jwt binding cannot make the service probe its own network', () => {
  it('without JWT_ISSUER_ALLOWED_CIDRS, JWKS and discovery on a loopback address are refused before any connection', async () => {
    const guardedStack = await startStack();
    try {
      modes.set('probe', 'ok');
      const iss = issuerOf('probe');
      const before = hits.get('probe') ?? 0;
      const viaJwks = await rpc(await guarded('probe-jwks', iss, `${iss}/jwks`, guardedStack), await token(iss), guardedStack);
      expectKeysUnavailable(viaJwks, /refused: .*loopback/, 'jwks');
      const viaDiscovery = await rpc(await guarded('probe-discovery', iss, undefined, guardedStack), await token(iss), guardedStack);
      expect(viaDiscovery.status).toBe(503);
      expect(viaDiscovery.body.error.message).toMatch(/discovery document could not be read \(refused: .*loopback/);
      // nothing reached the issuer
      expect(hits.get('probe') ?? 0).toBe(before);
    } finally {
      await guardedStack.close();
    }
  });
});
