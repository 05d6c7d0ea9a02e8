import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, taskStateToJSON, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { WordCountRuntime } from '../examples/custom-runtime/word-count.runtime.js';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The custom runtime example (examples/custom-runtime): registered in the API and the worker, its
 * config validated at draft time, its direct reply, its streamed artifact and its completion,
 * through the official SDK client; a deployment without it refuses the kind.
 */
let stack: Stack;
let client: Client;

beforeAll(async () => {
  stack = await startStack({ runtimes: [new WordCountRuntime()] });
  const a = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'counter', a2a: { capabilities: { streaming: true } } as never, runtime: { kind: 'word-count', chunkSize: 2 } });
  client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${a.basePath}/`);
});
afterAll(async () => stack?.close());

const send = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
const text = (parts: Array<{ content?: { $case: string; value: unknown } }>) => parts.map((p) => (p.content?.$case === 'text' ? String(p.content.value) : '')).join('');

describe('a custom runtime (examples/custom-runtime)', () => {
  it('executes in the worker: status, streamed artifact chunks, completion', async () => {
    const chunks: string[] = [];
    let final = '';
    for await (const ev of client.sendMessageStream(send('one two three four five'))) {
      const p = ev.payload!;
      if (p.$case === 'artifactUpdate') chunks.push(text(p.value.artifact!.parts));
      if (p.$case === 'statusUpdate') final = `${taskStateToJSON(p.value.status!.state)} ${text(p.value.status!.message?.parts ?? [])}`;
    }
    expect(chunks).toEqual(['1. one\n2. two\n', '3. three\n4. four\n', '5. five\n']);
    expect(final).toBe('TASK_STATE_COMPLETED 5 words; the longest is "three".');
  });

  it('answers directly without a task, and rejects what its config forbids', async () => {
    const reply = (await client.sendMessage(send('hello'))) as Message;
    expect(text(reply.parts)).toContain('count its words');
    const stack2Agent = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', '/v1/agents', { slug: 'bad-counter', name: 'B', description: 'd' });
    const bad = await adminRequest<any>(stack.baseUrl, stack.adminKey, 'POST', `/v1/agents/${stack2Agent.body.id}/revisions`, {
      protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }] } },
      runtime: { kind: 'word-count', chunkSize: 0 },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.issues.map((i: { path: string }) => i.path)).toContain('runtime.chunkSize');
    const task = (await client.sendMessage(send('x '.repeat(1001)))) as Task;
    expect(taskStateToJSON(task.status!.state)).toBe('TASK_STATE_REJECTED');
  });

  it('a deployment without the runtime refuses its kind', async () => {
    const plain = await startStack({ worker: false });
    try {
      const a = await adminRequest<any>(plain.baseUrl, plain.adminKey, 'POST', '/v1/agents', { slug: 'counter', name: 'C', description: 'd' });
      const r = await adminRequest<any>(plain.baseUrl, plain.adminKey, 'POST', `/v1/agents/${a.body.id}/revisions`, {
        protocolProfiles: { a2a: { skillsProjection: [{ id: 's', name: 'S', description: 'd', tags: ['t'] }] } },
        runtime: { kind: 'word-count' },
      });
      expect(r.status).toBe(422);
      expect(r.body.error.code).toBe('runtime.unknown_kind');
    } finally {
      await plain.close();
    }
  });
});
