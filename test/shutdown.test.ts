import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AgentRuntime, RuntimeContext } from '#libs/runtimes';
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

  it('a worker whose execution ignores its abort signal still stops within WORKER_SHUTDOWN_TIMEOUT_MS', async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const stuck = new Promise<void>((r) => (release = r));
    // a runtime that never looks at ctx.signal (a bug in someone's runtime)
    const deaf: AgentRuntime<{ kind: 'deaf' }> = {
      kind: 'deaf',
      parseConfig: (raw) => raw as { kind: 'deaf' },
      directReply: () => null,
      async execute(_config, ctx: RuntimeContext) {
        await ctx.setStatus('working');
        started();
        await stuck;
      },
    };
    const stack = await startStack({ runtimes: [deaf], env: { WORKER_SHUTDOWN_TIMEOUT_MS: '500' } });
    try {
      const agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'deaf', runtime: { kind: 'deaf' } });
      const sent = await fetch(`${stack.baseUrl}${agent.basePath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] }, configuration: { returnImmediately: true } } }),
      });
      const body = (await sent.json()) as any;
      expect(body.result?.task?.id, JSON.stringify(body)).toEqual(expect.any(String));
      await running;
      const t0 = Date.now();
      await stack.worker!.close();
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(450);
      expect(took).toBeLessThan(3_000);
    } finally {
      release();
      await stack.api.close();
    }
  });
});
