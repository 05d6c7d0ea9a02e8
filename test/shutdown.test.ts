import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { publishAgent } from './support/admin-client.js';
import { readSse } from './support/sse.js';
import { startStack } from './support/stack.js';

describe('graceful shutdown', () => {
  it('ends open streams so the API closes promptly; the client can resume elsewhere from its last id', async () => {
    const stack = await startStack();
    const runtime = { kind: 'scripted', rules: [{ match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] }] };
    const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'held', runtime, a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } });
    const reading = readSse(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hold on' }] } } }),
    });
    await new Promise((r) => setTimeout(r, 500));
    const started = Date.now();
    await stack.close();
    expect(Date.now() - started).toBeLessThan(5_000);
    const r = await reading;
    expect(r.ended).toBe(true);
    expect(r.frames.length).toBeGreaterThanOrEqual(1);
    expect(Number(r.frames.at(-1)!.id)).toBeGreaterThanOrEqual(2);
  });
});
