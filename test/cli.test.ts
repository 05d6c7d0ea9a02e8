import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from './support/stack.js';

/**
 * The `aaas` CLI (compiled, its own process) against a running service: publish an agent from a
 * manifest, answer an interaction, tail a run's events until it ends, list agents, create keys.
 */
const run = promisify(execFile);
let stack: Stack;
let dir: string;

async function aaas(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, ['dist/apps/cli/src/main.js', '--url', stack.baseUrl, '--key', stack.adminKey, ...args], { timeout: 30_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

beforeAll(async () => {
  stack = await startStack();
  dir = await mkdtemp(path.join(tmpdir(), 'aaas-cli-'));
});

afterAll(async () => {
  await stack?.close();
});

describe('aaas CLI', () => {
  it('publishes from a manifest, answers an interaction and tails the run to its end', async () => {
    const manifest = path.join(dir, 'agent.json');
    await writeFile(
      manifest,
      JSON.stringify({
        slug: 'cli-agent',
        name: 'CLI Agent',
        description: 'published by the CLI',
        protocolProfiles: { a2a: { skillsProjection: [{ id: 'ask', name: 'Ask', description: 'asks', tags: ['cli'] }] } },
        runtime: { kind: 'scripted', rules: [{ match: { text: '^ask' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which colour?' }, { type: 'message', text: 'Got {{input}}' }] }] },
        binding: { transports: ['JSONRPC'] },
      }),
    );
    const published = await aaas('publish', manifest);
    expect(published.code, published.stderr).toBe(0);
    expect(JSON.parse(published.stdout)).toMatchObject({ agent: 'cli-agent', revision: { number: 1 } });
    // publishing again makes revision 2 active
    expect(JSON.parse((await aaas('publish', manifest)).stdout).revision.number).toBe(2);
    expect(JSON.parse((await aaas('agents', 'list')).stdout).agents.map((a: { slug: string }) => a.slug)).toContain('cli-agent');

    const sent = await fetch(`${stack.baseUrl}/a2a/${stack.orgSlug}/cli-agent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'ask me' }] } } }),
    });
    const task = ((await sent.json()) as any).result.task;
    expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const interactionId: string = task.status.message.metadata.interaction.id;

    const answered = await aaas('interactions', 'answer', task.id, interactionId, '--text', 'blue');
    expect(answered.code, answered.stderr).toBe(0);
    expect(JSON.parse(answered.stdout).interactions[0]).toMatchObject({ id: interactionId, status: 'resolved' });

    const tailed = await aaas('runs', 'tail', task.id, '--interval', '100');
    expect(tailed.code, tailed.stderr).toBe(0);
    const lines = tailed.stdout.trim().split('\n').map((l) => JSON.parse(l) as { sequence: number; type: string; payload: any });
    expect(lines.map((l) => l.sequence)).toEqual(lines.map((_, i) => i + 1));
    expect(lines.map((l) => l.type)).toContain('interaction.responded');
    expect(lines.at(-1)).toMatchObject({ type: 'run.status_changed', payload: { status: 'completed' } });
    expect(lines.some((l) => l.payload.message?.parts?.[0]?.text === 'Got blue')).toBe(true);
  });

  it('creates and lists API keys; errors exit 2 with the API error', async () => {
    const created = await aaas('keys', 'create', 'from-cli', '--scope', 'a2a:invoke', 'a2a:all-tasks');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'from-cli', scopes: ['a2a:invoke', 'a2a:all-tasks'], key: expect.stringMatching(/^aaas_/) });
    expect(JSON.parse((await aaas('keys', 'list')).stdout).apiKeys.some((k: { name: string }) => k.name === 'from-cli')).toBe(true);
    const missing = await aaas('runs', 'tail', randomUUID());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/HTTP 404 run.not_found/);
  });
});
