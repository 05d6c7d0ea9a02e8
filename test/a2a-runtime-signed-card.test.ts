import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import express from 'express';
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCard, Role, SendMessageRequest, TaskState, generateAgentCardSignature, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * `requireSignedCard` of the `a2a` runtime against a real upstream: an `@a2a-js/sdk` server
 * (DefaultRequestHandler, JSON-RPC, its agentCardHandler) whose cards are signed with the SDK's
 * own `generateAgentCardSignature`. A card signed by a trusted key (inline, a JWKS URL, or its jku
 * on a trusted host) publishes and runs; an unsigned card, one signed by an untrusted key, a
 * tampered one, and one whose jku is outside the trust are refused at publish (the untrusted jku
 * is never fetched) and, when the upstream card changes after publish, at execution (the run
 * fails with `runtime.upstream_card_unverified` and nothing is sent upstream).
 */

interface Key {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function newKey(kid: string): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

/**
 * One @a2a-js/sdk agent serving several cards (`/cards/<name>`, mutable) for the same JSON-RPC
 * interface, and JWK Sets (`/jwks/<name>.json`) whose fetches are counted.
 */
interface Upstream {
  base: string;
  cardUrl(name: string): string;
  jwksUrl(name: string): string;
  setCard(name: string, card: Record<string, unknown>): void;
  setJwks(name: string, keys: JWK[]): void;
  jwksHits: Map<string, number>;
  executions: () => number;
  close(): Promise<void>;
}

async function startUpstream(): Promise<Upstream> {
  const app = express();
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const cards = new Map<string, Record<string, unknown>>();
  const jwks = new Map<string, JWK[]>();
  const jwksHits = new Map<string, number>();
  let executions = 0;
  const executor: AgentExecutor = {
    async execute(ctx: RequestContext, bus: ExecutionEventBus) {
      executions++;
      const { taskId, contextId } = ctx;
      const text = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
      const now = new Date().toISOString();
      bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now }, artifacts: [], history: [ctx.userMessage], metadata: undefined }));
      const message = { messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: [{ content: { $case: 'text' as const, value: `echo: ${text}` }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message, timestamp: now }, metadata: undefined }));
      bus.finished();
    },
    async cancelTask() {},
  };
  const handler = new DefaultRequestHandler(AgentCard.fromJSON(baseCard(base)), new InMemoryTaskStore(), executor);
  app.use('/cards/:name', (req, res, next) => {
    const card = cards.get(req.params.name!);
    if (!card) return res.status(404).end();
    return agentCardHandler({ agentCardProvider: async () => card as never, cache: { maxAge: 0 } })(req, res, next);
  });
  app.get('/jwks/:file', (req, res) => {
    const name = req.params.file.replace(/\.json$/, '');
    jwksHits.set(name, (jwksHits.get(name) ?? 0) + 1);
    res.json({ keys: jwks.get(name) ?? [] });
  });
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  return {
    base,
    cardUrl: (name) => `${base}/cards/${name}`,
    jwksUrl: (name) => `${base}/jwks/${name}.json`,
    setCard: (name, card) => void cards.set(name, card),
    setJwks: (name, keys) => void jwks.set(name, keys),
    jwksHits,
    executions: () => executions,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The upstream card (A2A v1.0 JSON), unsigned. */
function baseCard(base: string, name = 'Signed upstream'): Record<string, unknown> {
  return {
    name,
    description: 'An @a2a-js/sdk agent whose card is signed',
    version: '1.0.0',
    supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    provider: { organization: 'Example', url: 'https://example.com' },
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'Echo', description: 'Echoes the text', tags: ['echo'] }],
  };
}

/** The card signed with the official SDK's signer (protected header alg, typ, kid, and jku when given), as JSON. */
async function signed(card: Record<string, unknown>, key: Key, jku?: string): Promise<Record<string, unknown>> {
  const sign = generateAgentCardSignature(key.privateKey, { alg: 'ES256', typ: 'JOSE', kid: key.kid, ...(jku && { jku }) });
  return AgentCard.toJSON(await sign(AgentCard.fromJSON(card))) as Record<string, unknown>;
}

let stack: Stack;
let upstream: Upstream;
let trusted: Key;
let stranger: Key;
const send = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const textOf = (m: { parts: Array<{ content?: { $case: string; value: unknown } }> } | undefined) =>
  (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? String(p.content.value) : '')).join('');
const clientOf = (basePath: string) => new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${basePath}/`);

/** Create an agent and a draft with this runtime, then publish it: the publish answer. */
async function tryPublish(slug: string, runtime: Record<string, unknown>) {
  const a = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug, name: slug, description: 'd' });
  expect(a.status).toBe(201);
  const rev = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'a2a', ...runtime } });
  expect(rev.status, JSON.stringify(rev.body)).toBe(201);
  return adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions/${rev.body.id}/publish`);
}

beforeAll(async () => {
  [trusted, stranger] = await Promise.all([newKey('trusted-1'), newKey('stranger-1')]);
  upstream = await startUpstream();
  stack = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', A2A_BLOCKING_TIMEOUT_MS: '15000' } });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await upstream?.close();
});

describe('requireSignedCard (a2a runtime)', () => {
  it('a card signed by a trusted key publishes and runs: inline key, JWKS URL, jku on a trusted host', async () => {
    upstream.setCard('good', await signed(baseCard(upstream.base), trusted));
    upstream.setJwks('trusted', [trusted.publicJwk]);
    upstream.setCard('good-jku', await signed(baseCard(upstream.base, 'Signed with jku'), trusted, upstream.jwksUrl('trusted')));
    const variants = [
      ['signed-inline', 'good', { keys: [trusted.publicJwk] }],
      ['signed-jwks-url', 'good', { jwksUrls: [upstream.jwksUrl('trusted')] }],
      ['signed-jku-host', 'good-jku', { jkuHosts: [upstream.base] }],
    ] as const;
    for (const [slug, card, requireSignedCard] of variants) {
      const before = upstream.executions();
      const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug, a2a: { skillsProjection: [] } as never, runtime: { kind: 'a2a', cardUrl: upstream.cardUrl(card), requireSignedCard } });
      // our card took the upstream's verified identity and skills
      const ours = (await (await fetch(agent.cardUrl)).json()) as { name: string; skills: Array<{ id: string }> };
      expect(ours.skills.map((s) => s.id)).toEqual(['echo']);
      const task = (await (await clientOf(agent.basePath)).sendMessage(send(`hi ${slug}`))) as Task;
      expect(taskStateToJSON(task.status!.state), slug).toBe('TASK_STATE_COMPLETED');
      expect(textOf(task.status!.message)).toBe(`echo: hi ${slug}`);
      expect(upstream.executions()).toBe(before + 1);
    }
    // the jku and the JWKS URL were fetched (under the outbound rules), their keys cached
    expect(upstream.jwksHits.get('trusted')).toBeGreaterThanOrEqual(1);
  });

  it('refused at publish: unsigned, signed by an untrusted key, tampered, jku outside the trust (never fetched)', async () => {
    const anchors = { keys: [trusted.publicJwk] };
    upstream.setJwks('attacker', [stranger.publicJwk]);
    const tampered = await signed(baseCard(upstream.base), trusted);
    tampered.description = 'Now does something else';
    const cases = [
      ['unsigned', baseCard(upstream.base), anchors, /the card has no signatures/],
      ['stranger', await signed(baseCard(upstream.base), stranger), anchors, /signature 0 \(kid stranger-1\): .*no trusted key has kid stranger-1/],
      ['tampered', tampered, anchors, /signature 0 \(kid trusted-1\): the signature does not match the canonical card/],
      // the jku names a host that is not trusted: its keys are never fetched
      ['foreign-jku', await signed(baseCard(upstream.base), stranger, upstream.jwksUrl('attacker')), { jkuHosts: ['keys.example.com'] }, /jku .*attacker\.json is outside jkuHosts: not fetched/],
    ] as const;
    for (const [name, card, requireSignedCard, why] of cases) {
      upstream.setCard(name, card);
      const pub = await tryPublish(`refused-${name}`, { cardUrl: upstream.cardUrl(name), requireSignedCard });
      expect(pub.status, name).toBe(422);
      expect(pub.body.error.code).toBe('runtime.upstream_card_unverified');
      expect(pub.body.error.message).toContain(upstream.cardUrl(name));
      expect(pub.body.error.message).toMatch(why);
      expect(pub.body.error.details.checks[0].valid).toBe(false);
    }
    expect(upstream.jwksHits.get('attacker') ?? 0).toBe(0);
    // the same cards publish when nothing is required (verification is opt-in)
    expect((await tryPublish('unsigned-ok', { cardUrl: upstream.cardUrl('unsigned') })).status).toBe(200);
  });

  it('refused at draft: a private key as anchor, no anchor, requireSignedCard without cardUrl', async () => {
    const a = await adminRequest<{ id: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'bad-anchors', name: 'x', description: 'd' });
    const draft = (runtime: Record<string, unknown>) => adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, { protocolProfiles: { a2a: {} }, runtime: { kind: 'a2a', ...runtime } });
    const priv = await exportJWK(stranger.privateKey);
    for (const runtime of [
      { cardUrl: upstream.cardUrl('good'), requireSignedCard: { keys: [{ ...priv, kid: 'k' }] } },
      { cardUrl: upstream.cardUrl('good'), requireSignedCard: {} },
      { url: `${upstream.base}/a2a/jsonrpc`, requireSignedCard: { keys: [trusted.publicJwk] } },
      { cardUrl: upstream.cardUrl('good'), requireSignedCard: { jwksUrls: ['http://10.1.2.3/jwks.json'] } },
    ]) {
      const res = await draft(runtime);
      expect(res.status, JSON.stringify(runtime)).toBe(422);
      expect(res.body.error.code).toBe('request.invalid');
      expect(res.body.error.details.issues.map((i: { path: string }) => i.path).join(' ')).toContain('runtime.requireSignedCard');
    }
  });

  it('refused at execution when the upstream card changed after publish: the run fails with the code, nothing is sent', async () => {
    const changes = [
      ['later-unsigned', baseCard(upstream.base), /the card has no signatures/],
      ['later-stranger', await signed(baseCard(upstream.base), stranger), /no trusted key has kid stranger-1/],
      ['later-tampered', { ...(await signed(baseCard(upstream.base), trusted)), name: 'Someone else' }, /does not match the canonical card/],
    ] as const;
    const agents = [];
    for (const [name] of changes) {
      upstream.setCard(name, await signed(baseCard(upstream.base), trusted));
      agents.push(await publishAgent(stack.baseUrl, stack.adminKey, { slug: name, a2a: { skillsProjection: [] } as never, runtime: { kind: 'a2a', cardUrl: upstream.cardUrl(name), requireSignedCard: { keys: [trusted.publicJwk] } } }));
    }
    const before = upstream.executions();
    for (const [i, [name, card, why]] of changes.entries()) {
      upstream.setCard(name, card);
      const task = (await (await clientOf(agents[i]!.basePath)).sendMessage(send('hello'))) as Task;
      expect(taskStateToJSON(task.status!.state), name).toBe('TASK_STATE_FAILED');
      const text = textOf(task.status!.message);
      expect(text).toContain('runtime.upstream_card_unverified');
      expect(text).toMatch(why);
      expect(text).toContain('Nothing was sent');
      expect(task.status!.message!.metadata).toMatchObject({ error: { code: 'runtime.upstream_card_unverified' } });
    }
    expect(upstream.executions()).toBe(before);
  });
});
