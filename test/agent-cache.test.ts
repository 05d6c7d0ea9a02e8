import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The agent resolution cache on the message path: an admin write through an instance is seen by
 * that instance at once; another instance sees it within AGENT_CACHE_TTL_MS. Cards are never cached.
 */
const reply = (text: string) => ({ kind: 'scripted', rules: [{ match: { text: '^hi' }, steps: [{ type: 'reply', text }] }] });

let stack: Stack;
let other: NestFastifyApplication;
let otherBase: string;

beforeAll(async () => {
  stack = await startStack({ worker: false, env: { AGENT_CACHE_TTL_MS: '400' } });
  other = await createApiApp(stack.env);
  await other.listen(0, '127.0.0.1');
  const addr = other.getHttpServer().address();
  otherBase = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});
afterAll(async () => {
  await other?.close();
  await stack?.close();
});

async function say(base: string, path: string): Promise<string> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } } }),
  });
  const body = (await res.json()) as { result: { message: { parts: Array<{ text: string }> } } };
  return body.result.message.parts[0]!.text;
}

describe('agent resolution cache', () => {
  it('the writing instance switches at once; another within the TTL; the card at once everywhere', async () => {
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'cached', runtime: reply('v1') });
    expect(await say(stack.baseUrl, agent.basePath)).toBe('v1');
    expect(await say(otherBase, agent.basePath)).toBe('v1'); // now cached on the other instance

    const rev = await adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents/cached/revisions', {
      protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'S', tags: ['t'] }], identityProjection: { name: 'Cached v2', version: '2.0.0' } } },
      runtime: reply('v2'),
    });
    expect(rev.status).toBe(201);
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/cached/revisions/${rev.body.id}/publish`)).status).toBe(200);
    expect((await adminRequest(stack.baseUrl, stack.adminKey, 'PUT', '/v1/agents/cached/active-revision', { revisionId: rev.body.id })).status).toBe(200);

    expect(await say(stack.baseUrl, agent.basePath)).toBe('v2');
    const card = (await (await fetch(`${otherBase}${agent.basePath}/.well-known/agent-card.json`)).json()) as { name: string };
    expect(card.name).toBe('Cached v2');
    await expect.poll(() => say(otherBase, agent.basePath), { timeout: 2000, interval: 100 }).toBe('v2');
  });
});
