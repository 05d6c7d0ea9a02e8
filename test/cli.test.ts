import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { startStack, type Stack } from './support/stack.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * The `aaas` CLI (compiled, its own process) against a running service: publish an agent from a
 * YAML or JSON manifest (idempotently), answer an interaction, tail a run's events until it ends
 * (across a dropped connection, and across a killed tail with a cursor file), list agents, runs and
 * keys, create and revoke keys; errors exit 2 with `aaas: <message>` on stderr.
 */
const execFileP = promisify(execFile);
const CLI = 'dist/apps/cli/src/main.js';
/** A recent time as the readable output shows it (Intl.RelativeTimeFormat). */
const AGO = '(?:now|\\d+ seconds? ago|\\d+ minutes? ago)';
let stack: Stack;
let dir: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function aaas(...args: string[]): Promise<Result> {
  return aaasAt(stack.baseUrl, ...args);
}

async function aaasAt(url: string, ...args: string[]): Promise<Result> {
  try {
    const r = await execFileP(process.execPath, [CLI, '--url', url, '--key', stack.adminKey, ...args], { timeout: 30_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

/** The CLI with `input` on its stdin (and `env` added to its environment). */
async function aaasWithInput(input: string, env: Record<string, string>, ...args: string[]): Promise<Result> {
  const child = spawn(process.execPath, [CLI, '--url', stack.baseUrl, '--key', stack.adminKey, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  child.stdin!.end(input);
  const [code] = await once(child, 'exit');
  return { code: code as number, ...out };
}

/** A CLI process we can watch and kill: its output so far, and a promise of its exit. */
function spawnAaas(url: string, ...args: string[]): { child: ChildProcess; out: { stdout: string; stderr: string }; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, '--url', url, '--key', stack.adminKey, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, out, exited };
}

async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** SendMessage over JSON-RPC; with returnImmediately the task comes back while it still runs. */
async function send(agent: string, text: string, returnImmediately = false): Promise<any> {
  const { body } = await sendMessageRpc(`${stack.baseUrl}/a2a/${stack.orgSlug}/${agent}`, text, { returnImmediately });
  if (!body.result?.task) throw new Error(`SendMessage failed: ${JSON.stringify(body)}`);
  return body.result.task;
}

async function adminGet(p: string): Promise<any> {
  const res = await fetch(`${stack.baseUrl}${p}`, { headers: { authorization: `Bearer ${stack.adminKey}` } });
  expect(res.status, p).toBe(200);
  return res.json();
}

/** A plain HTTP proxy to the stack that can drop every connection and refuse new ones for a while, then listen again on the same port. */
async function startProxy(target: string): Promise<{ url: string; drop(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'].includes(k)) headers[k] = v;
      const r = await fetch(`${target}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      const body = Buffer.from(await r.arrayBuffer());
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
      res.end(body);
    } catch {
      res.destroy();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    async drop() {
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    },
    async restore() {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    async close() {
      if (!server.listening) return;
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    },
  };
}

/** The sequences of a tail's output: JSON lines (`--json`) or `#<seq> …` lines. */
function sequences(stdout: string): number[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => (l.startsWith('{') ? (JSON.parse(l) as { sequence: number }).sequence : Number(/^#(\d+) /.exec(l)?.[1])));
}

/** A scripted agent answering `drip` with `n` messages `pause` ms apart, and `ask` with a question. */
function dripManifest(slug: string, n: number, pause: number) {
  const steps: unknown[] = [];
  for (let i = 1; i <= n; i++) steps.push({ type: 'message', text: `drop ${i}` }, ...(i < n ? [{ type: 'wait', ms: pause }] : []));
  return {
    slug,
    name: `Drip ${slug}`,
    description: 'messages, slowly',
    protocolProfiles: { a2a: { skillsProjection: [{ id: 'drip', name: 'Drip', description: 'drips', tags: ['cli'] }] } },
    runtime: { kind: 'scripted', rules: [{ match: { text: '^drip' }, steps }] },
  };
}

beforeAll(async () => {
  stack = await startStack({ env: { RUNTIME_SECRET_ENCRYPTION_SECRET: 'cli-test-runtime-secret-encryption' } });
  dir = await mkdtemp(path.join(tmpdir(), 'aaas-cli-'));
});

afterAll(async () => {
  await stack?.close();
});

describe('aaas CLI', () => {
  it('publishes from a JSON manifest, answers an interaction and tails the run to its end (--json)', async () => {
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
    const published = await aaas('--json', 'publish', manifest);
    expect(published.code, published.stderr).toBe(0);
    expect(JSON.parse(published.stdout)).toMatchObject({ agent: 'cli-agent', revision: { number: 1 }, binding: `/a2a/${stack.orgSlug}/cli-agent`, unchanged: false });
    // the same manifest again changes nothing
    const again = await aaas('publish', manifest, '--json');
    expect(JSON.parse(again.stdout)).toMatchObject({ revision: { number: 1 }, unchanged: true, changes: [] });
    expect(JSON.parse((await aaas('--json', 'agents', 'list')).stdout).agents.map((a: { slug: string }) => a.slug)).toContain('cli-agent');

    const task = await send('cli-agent', 'ask me');
    expect(task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const interactionId: string = task.status.message.metadata.interaction.id;

    const answered = await aaas('--json', 'interactions', 'answer', task.id, interactionId, '--text', 'blue');
    expect(answered.code, answered.stderr).toBe(0);
    expect(JSON.parse(answered.stdout).interactions[0]).toMatchObject({ id: interactionId, status: 'resolved' });

    const tailed = await aaas('--json', 'runs', 'tail', task.id, '--interval', '100');
    expect(tailed.code, tailed.stderr).toBe(0);
    const lines = tailed.stdout.trim().split('\n').map((l) => JSON.parse(l) as { sequence: number; type: string; payload: any });
    expect(lines.map((l) => l.sequence)).toEqual(lines.map((_, i) => i + 1));
    expect(lines.map((l) => l.type)).toContain('interaction.responded');
    expect(lines.at(-1)).toMatchObject({ type: 'run.status_changed', payload: { status: 'completed' } });
    expect(lines.some((l) => l.payload.message?.parts?.[0]?.text === 'Got blue')).toBe(true);

    // readable: one line per event, `#<seq> <type> <summary>`
    const readable = await aaas('runs', 'tail', task.id);
    expect(readable.code, readable.stderr).toBe(0);
    const rl = readable.stdout.trim().split('\n');
    expect(rl).toHaveLength(lines.length);
    expect(rl[0]).toMatch(/^#1 run\.created submitted$/);
    expect(rl.some((l) => /^#\d+ interaction\.requested input .*"Which colour\?"/.test(l))).toBe(true);
    expect(rl.some((l) => /^#\d+ interaction\.responded answered "blue"$/.test(l))).toBe(true);
    expect(rl.some((l) => /"Got blue"/.test(l))).toBe(true);
    expect(rl.at(-1)).toMatch(/^#\d+ run\.status_changed completed/);

    // readable answer
    const q2 = await send('cli-agent', 'ask again');
    const a2 = await aaas('interactions', 'answer', q2.id, q2.status.message.metadata.interaction.id, '--text', 'red');
    expect(a2.code, a2.stderr).toBe(0);
    expect(a2.stdout.trim()).toMatch(new RegExp(`^interaction ${q2.status.message.metadata.interaction.id}: resolved; run ${q2.id} is \\w+`));
  });

  it('publishes a YAML manifest idempotently: unchanged, then a changed runtime makes revision 2, a changed name or binding no new revision', async () => {
    const file = path.join(dir, 'yaml-agent.yaml');
    const manifest = {
      slug: 'yaml-agent',
      name: 'YAML Agent',
      description: 'from YAML',
      protocolProfiles: { a2a: { skillsProjection: [{ id: 'echo', name: 'Echo', description: 'echoes', tags: ['cli'] }] } },
      runtime: { kind: 'scripted', rules: [{ match: { text: '^hi' }, steps: [{ type: 'message', text: 'hello' }] }] },
    };
    await writeFile(file, toYaml(manifest));
    const revisions = async () => (await adminGet('/v1/agents/yaml-agent/revisions')).revisions as Array<{ number: number; status: string }>;

    const first = await aaas('publish', file);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.trim()).toBe(`agent yaml-agent: revision 1 published and active; A2A at /a2a/${stack.orgSlug}/yaml-agent\n  also: agent created, binding`);
    expect((await send('yaml-agent', 'hi')).status.state).toBe('TASK_STATE_COMPLETED');

    // again, and as .yml with defaults spelled out (what the service would fill in): unchanged
    const second = await aaas('publish', file);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.trim()).toBe('agent yaml-agent: unchanged (revision 1 is active)');
    const spelled = path.join(dir, 'yaml-agent.yml');
    await writeFile(
      spelled,
      toYaml({
        ...manifest,
        protocolProfiles: { a2a: { ...manifest.protocolProfiles.a2a, protocolVersion: '1.0', defaultInputModes: ['text/plain'] } },
        runtime: { ...manifest.runtime, defaultRule: 'echo' },
        binding: { transports: ['JSONRPC'], security: { scheme: 'none' } },
      }),
    );
    expect((await aaas('publish', spelled)).stdout.trim()).toBe('agent yaml-agent: unchanged (revision 1 is active)');
    expect((await revisions()).map((r) => r.number)).toEqual([1]);

    // a changed runtime: revision 2
    await writeFile(file, toYaml({ ...manifest, runtime: { kind: 'scripted', rules: [{ match: { text: '^hi' }, steps: [{ type: 'message', text: 'hello again' }] }] } }));
    const third = await aaas('publish', file);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout.trim()).toBe(`agent yaml-agent: revision 2 published and active; A2A at /a2a/${stack.orgSlug}/yaml-agent`);
    expect((await revisions()).map((r) => r.number)).toEqual([2, 1]);
    expect((await adminGet('/v1/agents/yaml-agent')).activeRevisionId).toBe((await adminGet('/v1/agents/yaml-agent/revisions')).revisions[0].id);

    // a changed name and binding: the agent and binding change, no new revision
    await writeFile(file, toYaml({ ...manifest, name: 'YAML Agent v2', runtime: { kind: 'scripted', rules: [{ match: { text: '^hi' }, steps: [{ type: 'message', text: 'hello again' }] }] }, binding: { transports: ['JSONRPC', 'HTTP+JSON'] } }));
    const fourth = await aaas('--json', 'publish', file);
    expect(JSON.parse(fourth.stdout)).toMatchObject({ revision: { number: 2 }, unchanged: false, changes: ['name', 'binding'] });
    const agent = await adminGet('/v1/agents/yaml-agent');
    expect(agent).toMatchObject({ name: 'YAML Agent v2', binding: { transports: ['JSONRPC', 'HTTP+JSON'] } });
    expect((await aaas('publish', file)).stdout.trim()).toBe('agent yaml-agent: unchanged (revision 2 is active)');

    // --force: a new revision anyway
    const forced = await aaas('publish', file, '--force');
    expect(forced.stdout).toMatch(/^agent yaml-agent: revision 3 published and active/);
    expect((await revisions()).map((r) => r.number)).toEqual([3, 2, 1]);

    // a manifest the service refuses: exit 2 with the API's error, nothing published
    await writeFile(file, toYaml({ ...manifest, runtime: { kind: 'scripted', rules: [{ match: {}, steps: [] }] } }));
    const bad = await aaas('publish', file);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^aaas: POST \/v1\/agents\/yaml-agent\/revisions: HTTP 422 /);
    expect((await revisions()).filter((r) => r.status === 'published').map((r) => r.number)).toEqual([3, 2, 1]);
  });

  it('lists agents, runs and keys as readable tables', async () => {
    const agents = await aaas('agents', 'list');
    expect(agents.code, agents.stderr).toBe(0);
    const [header, ...rows] = agents.stdout.trim().split('\n');
    expect(header).toMatch(/^SLUG\s+NAME\s+ACTIVE REVISION\s+DEFAULT$/);
    expect(rows.find((r) => r.startsWith('cli-agent '))).toMatch(/^cli-agent\s+CLI Agent\s+#1\s+—$/);
    expect(rows.some((r) => /^yaml-agent\s+YAML Agent v2\s+#3\s/.test(r))).toBe(true);

    const runs = await aaas('runs', 'list', '--agent', 'cli-agent', '--limit', '5');
    expect(runs.code, runs.stderr).toBe(0);
    const runLines = runs.stdout.trim().split('\n');
    expect(runLines[0]).toMatch(/^ID\s+AGENT\s+STATUS\s+UPDATED$/);
    expect(runLines.slice(1).every((l) => /^[0-9a-f-]{36}\s+cli-agent\s+\w+/.test(l))).toBe(true);
    expect(runLines.length).toBeGreaterThanOrEqual(3);
    // the kind filter reaches the admin API: these are tasks, none is a direct reply
    const tasks = await aaas('--json', 'runs', 'list', '--agent', 'cli-agent', '--kind', 'execution', '--limit', '5');
    expect(tasks.code, tasks.stderr).toBe(0);
    expect((JSON.parse(tasks.stdout) as { runs: Array<{ kind: string }> }).runs.map((r) => r.kind)).toEqual(runLines.slice(1).map(() => 'execution'));
    const replies = await aaas('runs', 'list', '--agent', 'cli-agent', '--kind', 'reply');
    expect(replies.code, replies.stderr).toBe(0);
    expect(replies.stdout.trim()).toBe('no runs');

    const keys = await aaas('keys', 'list');
    expect(keys.code, keys.stderr).toBe(0);
    expect(keys.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+SCOPES\s+LAST USED\s+CREATED\s+REVOKED$/);
  });

  it('tails a run across a dropped connection: every event once, in order, and says it is retrying', { timeout: 60_000 }, async () => {
    await writeFile(path.join(dir, 'drip.json'), JSON.stringify(dripManifest('drip-agent', 10, 300)));
    expect((await aaas('publish', path.join(dir, 'drip.json'))).code).toBe(0);
    const proxy = await startProxy(stack.baseUrl);
    try {
      const task = await send('drip-agent', 'drip', true);
      const tail = spawnAaas(proxy.url, '--json', 'runs', 'tail', task.id, '--interval', '50');
      await until(() => tail.out.stdout.includes('"drop 1"'), 'the first message');
      await proxy.drop();
      await new Promise((r) => setTimeout(r, 1_000));
      // events were appended while the tail could not reach the service
      const during = (await adminGet(`/v1/runs/${task.id}`)).run.lastSequence as number;
      const printed = sequences(tail.out.stdout);
      expect(during).toBeGreaterThan(printed.at(-1)!);
      await proxy.restore();
      expect(await tail.exited, tail.out.stderr).toBe(0);
      const seqs = sequences(tail.out.stdout);
      const last = (await adminGet(`/v1/runs/${task.id}`)).run;
      expect(last.status).toBe('completed');
      expect(seqs).toEqual(Array.from({ length: last.lastSequence }, (_, i) => i + 1));
      expect(tail.out.stdout.match(/"drop \d+"/g)).toEqual(Array.from({ length: 10 }, (_, i) => `"drop ${i + 1}"`));
      expect(tail.out.stderr).toMatch(/^aaas: connection lost \((ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|other side closed)\); retrying from sequence \d+$/m);
    } finally {
      await proxy.close();
    }
  });

  it('resumes a killed tail from its cursor file: the two outputs hold every event exactly once', { timeout: 60_000 }, async () => {
    await writeFile(path.join(dir, 'slow.json'), JSON.stringify(dripManifest('slow-agent', 3, 1_500)));
    expect((await aaas('publish', path.join(dir, 'slow.json'))).code).toBe(0);
    const task = await send('slow-agent', 'drip', true);
    const cursor = path.join(dir, `cursor-${task.id}`);
    const first = spawnAaas(stack.baseUrl, 'runs', 'tail', task.id, '--cursor-file', cursor, '--interval', '50');
    await until(() => first.out.stdout.includes('"drop 2"'), 'the second message');
    // between two events (the next one is 1.5 s away): the cursor file holds the last printed sequence
    await new Promise((r) => setTimeout(r, 300));
    first.child.kill('SIGKILL');
    await first.exited;
    const firstSeqs = sequences(first.out.stdout);
    expect(Number((await readFile(cursor, 'utf8')).trim())).toBe(firstSeqs.at(-1));

    const second = await aaas('runs', 'tail', task.id, '--cursor-file', cursor, '--interval', '50');
    expect(second.code, second.stderr).toBe(0);
    const secondSeqs = sequences(second.stdout);
    expect(secondSeqs[0]).toBe(firstSeqs.at(-1)! + 1);
    const run = (await adminGet(`/v1/runs/${task.id}`)).run;
    expect([...firstSeqs, ...secondSeqs]).toEqual(Array.from({ length: run.lastSequence }, (_, i) => i + 1));
    expect(second.stdout).toMatch(/"drop 3"/);
    expect(Number((await readFile(cursor, 'utf8')).trim())).toBe(run.lastSequence);

    // a finished run with the cursor at its end: prints nothing and exits
    const third = await aaas('runs', 'tail', task.id, '--cursor-file', cursor);
    expect(third).toMatchObject({ code: 0, stdout: '' });
  });

  it('creates, lists and revokes API keys', async () => {
    const created = await aaas('--json', 'keys', 'create', 'from-cli', '--scope', 'a2a:invoke', 'a2a:all-tasks');
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key).toMatchObject({ name: 'from-cli', scopes: ['a2a:invoke', 'a2a:all-tasks'], key: expect.stringMatching(/^aaas_/) });
    expect(key.lastUsedAt).toBeNull();
    const fromCli = JSON.parse((await aaas('--json', 'keys', 'list')).stdout).apiKeys.find((k: { name: string }) => k.name === 'from-cli');
    expect(fromCli).toMatchObject({ id: key.id, lastUsedAt: null });
    // readable times are relative ("now", "3 seconds ago")
    expect((await aaas('keys', 'list')).stdout.split('\n').find((l) => l.startsWith(key.id))).toMatch(new RegExp(`from-cli\\s+a2a:invoke,a2a:all-tasks\\s+never\\s+${AGO}\\s+—$`));

    const readable = await aaas('keys', 'create', 'admin-from-cli', '--scope', 'admin');
    expect(readable.code, readable.stderr).toBe(0);
    const secret = /^\s+(aaas_\S+)$/m.exec(readable.stdout)?.[1];
    expect(readable.stdout).toMatch(/^API key "admin-from-cli" created \(id [0-9a-f-]{36}, scopes admin\)\.\nIts secret, shown only this once/);
    expect(secret).toBeDefined();
    const id = /\(id ([0-9a-f-]{36})/.exec(readable.stdout)![1]!;
    // the new key works …
    const withNew = await execFileP(process.execPath, [CLI, '--url', stack.baseUrl, '--key', secret!, 'agents', 'list']);
    expect(withNew.stdout).toMatch(/cli-agent/);
    // … and that use is recorded (off the request path, so it may land a little later)
    const deadline = Date.now() + 2_000;
    while ((await adminGet('/v1/api-keys')).apiKeys.find((k: { id: string }) => k.id === id).lastUsedAt === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));

    const revoked = await aaas('keys', 'revoke', id);
    expect(revoked).toMatchObject({ code: 0, stdout: `API key ${id} revoked.\n` });
    const listed = JSON.parse((await aaas('--json', 'keys', 'list')).stdout).apiKeys.find((k: { id: string }) => k.id === id);
    expect(listed.revokedAt).not.toBeNull();
    expect(listed.lastUsedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect((await aaas('keys', 'list')).stdout.split('\n').find((l) => l.startsWith(id))).toMatch(new RegExp(`admin-from-cli\\s+admin\\s+${AGO}\\s+${AGO}\\s+${AGO}$`));
    // … and, revoked, no longer does
    const withRevoked = await aaasAt(stack.baseUrl, '--key', secret!, 'agents', 'list');
    expect(withRevoked.code).toBe(2);
    expect(withRevoked.stderr).toMatch(/^aaas: GET \/v1\/agents: HTTP 401 /);
    const again = await aaas('keys', 'revoke', randomUUID());
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/^aaas: DELETE \/v1\/api-keys\/[0-9a-f-]+: HTTP 404 /);
  });

  it('manages runtime secrets: create from stdin or --from-env, list (never values), rotate, delete', { timeout: 60_000 }, async () => {
    const fromStdin = await aaasWithInput('whsec_c2VjcmV0LWZyb20tc3RkaW4=\n', {}, 'secrets', 'create', 'cli-hook');
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(fromStdin.stdout).toBe('runtime secret "cli-hook" created (version 1). Reference it from a revision\'s runtime as "secret": "cli-hook" (a2a: "credentials": { "secret": "cli-hook" }).\n');
    const fromEnv = await aaasWithInput('', { CLI_TEST_TOKEN: 'token-from-env' }, '--json', 'secrets', 'create', 'cli-token', '--from-env', 'CLI_TEST_TOKEN');
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(JSON.parse(fromEnv.stdout)).toMatchObject({ name: 'cli-token', version: 1 });

    const listed = await aaas('secrets', 'list');
    expect(listed.stdout.split('\n')[0]).toMatch(/^NAME\s+VERSION\s+CREATED\s+UPDATED$/);
    expect(listed.stdout).toMatch(new RegExp(`^cli-hook\\s+1\\s+${AGO}\\s+${AGO}$`, 'm'));
    const asJson = await aaas('--json', 'secrets', 'list');
    expect(JSON.parse(asJson.stdout).runtimeSecrets.map((x: { name: string }) => x.name)).toEqual(['cli-hook', 'cli-token']);
    for (const text of [listed.stdout, asJson.stdout, fromStdin.stdout, fromEnv.stdout]) {
      expect(text).not.toContain('c2VjcmV0LWZyb20tc3RkaW4');
      expect(text).not.toContain('token-from-env');
    }

    const rotated = await aaasWithInput('rotated-value', {}, 'secrets', 'rotate', 'cli-token');
    expect(rotated).toMatchObject({ code: 0, stdout: 'runtime secret "cli-token" rotated (version 2).\n' });
    expect((await aaas('secrets', 'delete', 'cli-token')).stdout).toBe('runtime secret "cli-token" deleted.\n');
    expect(JSON.parse((await aaas('--json', 'secrets', 'list')).stdout).runtimeSecrets.map((x: { name: string }) => x.name)).toEqual(['cli-hook']);

    // errors: the name exists, no value, an unset variable, an unknown secret
    const dup = await aaasWithInput('v', {}, 'secrets', 'create', 'cli-hook');
    expect(dup.code).toBe(2);
    expect(dup.stderr).toMatch(/^aaas: POST \/v1\/runtime-secrets: HTTP 409 runtime_secret\.conflict/);
    const empty = await aaasWithInput('', {}, 'secrets', 'create', 'cli-empty');
    expect(empty).toMatchObject({ code: 2, stderr: 'aaas: no value on stdin (pipe it in, or use --from-env <VAR>)\n' });
    const unset = await aaasWithInput('', {}, 'secrets', 'create', 'cli-empty', '--from-env', 'CLI_TEST_NOT_SET_ANYWHERE');
    expect(unset).toMatchObject({ code: 2, stderr: 'aaas: the variable CLI_TEST_NOT_SET_ANYWHERE is not set (or empty) in this shell\n' });
    const gone = await aaas('secrets', 'delete', 'cli-token');
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/^aaas: DELETE \/v1\/runtime-secrets\/cli-token: HTTP 404 runtime_secret\.not_found/);
  });

  it('exits 2 with a clear message on usage, input, API and network errors', async () => {
    const usage = await aaas('runs', 'list', '--limit', 'many');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^aaas: option '--limit <n>' argument 'many' is invalid/);
    const unknown = await aaas('agents', 'remove');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^aaas: /);
    const noAnswer = await aaas('interactions', 'answer', randomUUID(), randomUUID());
    expect(noAnswer).toMatchObject({ code: 2, stderr: 'aaas: give --text or --option\n' });

    const notYaml = path.join(dir, 'broken.yaml');
    await writeFile(notYaml, 'slug: [unclosed');
    const broken = await aaas('publish', notYaml);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/^aaas: .*broken\.yaml is not valid YAML/);
    const partial = path.join(dir, 'partial.json');
    await writeFile(partial, JSON.stringify({ slug: 'x' }));
    expect((await aaas('publish', partial)).stderr).toMatch(/^aaas: .*a manifest needs slug, protocolProfiles and runtime \(missing: protocolProfiles, runtime\)/);

    const missing = await aaas('runs', 'tail', randomUUID());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^aaas: GET \/v1\/runs\/[0-9a-f-]+\/events\?after=0&limit=100: HTTP 404 run\.not_found /);
    const badKey = await aaasAt(stack.baseUrl, '--key', 'aaas_nope_nope', 'agents', 'list');
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toMatch(/HTTP 401/);

    // nothing listens there: no retrying outside tail, a clear message
    const proxy = await startProxy(stack.baseUrl);
    await proxy.close();
    const down = await aaasAt(proxy.url, 'agents', 'list');
    expect(down.code).toBe(2);
    expect(down.stderr).toBe(`aaas: GET ${proxy.url}/v1/agents: no answer (ECONNREFUSED)\n`);
    // tail gives up after --retry-for
    const gaveUp = await aaasAt(proxy.url, 'runs', 'tail', randomUUID(), '--retry-for', '1');
    expect(gaveUp.code).toBe(2);
    expect(gaveUp.stderr).toMatch(/^aaas: connection lost \(ECONNREFUSED\); retrying from sequence 1$/m);
    expect(gaveUp.stderr).toMatch(/^aaas: gave up after \d+ s without an answer/m);
  });
});
