import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { startStack, type Stack } from './support/stack.js';

/**
 * docs/runtimes.md "Your own agent in five minutes", run as written against a real stack, for the
 * Node and the Python scaffold: `aaas init agent` → `aaas secrets create … --generate` → the
 * backend as a child process → `aaas publish agent.yaml` → the official `@a2a-js/sdk` client
 * (a streamed artifact; a confirmation answered, completing the run). The backend refuses a forged
 * or stale signature (401). The compiled CLI is used (build first: tsc -b tsconfig.json).
 */
const execFileP = promisify(execFile);
const CLI = 'dist/apps/cli/src/main.js';
let stack: Stack;
let work: string;
const children: ChildProcess[] = [];

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function aaas(...args: string[]): Promise<Result> {
  try {
    const r = await execFileP(process.execPath, [CLI, '--url', stack.baseUrl, '--key', stack.adminKey, ...args], { timeout: 30_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Start the scaffolded backend (`cmd` in `cwd`) and wait until it says it listens. */
async function startBackend(cmd: string[], cwd: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(cmd[0]!, cmd.slice(1), { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const end = Date.now() + 15_000;
  while (!/listening on/.test(out)) {
    if (child.exitCode !== null) throw new Error(`${cmd.join(' ')} exited ${child.exitCode}: ${out}`);
    if (Date.now() > end) throw new Error(`${cmd.join(' ')} did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return child;
}

const send = (text: string, taskId?: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) } });
const text = (m: any) => (m?.parts ?? []).map((p: any) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

beforeAll(async () => {
  stack = await startStack({
    env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', A2A_BLOCKING_TIMEOUT_MS: '15000', RUNTIME_SECRET_ENCRYPTION_SECRET: 'quick-start-test-encryption-secret' },
  });
  work = await mkdtemp(path.join(tmpdir(), 'aaas-quick-start-'));
}, 60_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : null)));
  await stack?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the quick start in docs/runtimes.md', () => {
  it('documents the commands this test runs', async () => {
    const doc = await readFile('docs/runtimes.md', 'utf8');
    const section = doc.slice(doc.indexOf('## Your own agent in five minutes'));
    expect(section.length).toBeGreaterThan(100);
    for (const line of ['aaas init agent my-agent --lang node', 'aaas secrets create my-agent-webhook --generate', 'AAAS_WEBHOOK_SECRET=', 'node agent.mjs', 'python3 agent.py', 'aaas publish my-agent/agent.yaml']) {
      expect(section, line).toContain(line);
    }
  });

  for (const lang of ['node', 'python'] as const) {
    it(`works end to end with the ${lang} scaffold`, async () => {
      const slug = `my-${lang}-agent`;
      const dir = path.join(work, slug);
      const port = await freePort();
      // 1. scaffold
      const init = await aaas('init', 'agent', dir, '--lang', lang, '--port', String(port));
      expect(init.code, init.stderr).toBe(0);
      const file = lang === 'node' ? 'agent.mjs' : 'agent.py';
      expect(init.stdout).toContain(`aaas secrets create ${slug}-webhook --generate`);
      for (const f of [file, 'agent.yaml', 'README.md']) expect((await stat(path.join(dir, f))).isFile()).toBe(true);
      const readme = await readFile(path.join(dir, 'README.md'), 'utf8');
      expect(readme).toContain(lang === 'node' ? 'node agent.mjs' : 'python3 agent.py');
      expect(readme).not.toMatch(/\{\{\w+\}\}/);
      // a second init into the same directory overwrites nothing
      const again = await aaas('init', 'agent', dir, '--lang', lang);
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(/already exist/);

      // 2. the secret, generated and shown once
      const created = await aaas('secrets', 'create', `${slug}-webhook`, '--generate');
      expect(created.code, created.stderr).toBe(0);
      const secret = /whsec_[A-Za-z0-9+/=]+/.exec(created.stdout)![0];
      expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
      expect(created.stdout).toMatch(/shown only this once/);
      const listed = await aaas('secrets', 'list');
      expect(listed.stdout).toContain(`${slug}-webhook`);
      expect(listed.stdout).not.toContain(secret.slice(6));

      // 3. the backend
      await startBackend(lang === 'node' ? [process.execPath, file] : ['python3', file], dir, { AAAS_WEBHOOK_SECRET: secret, PORT: String(port) });

      // 4. publish
      const published = await aaas('--json', 'publish', path.join(dir, 'agent.yaml'));
      expect(published.code, published.stderr).toBe(0);
      const binding = (JSON.parse(published.stdout) as { binding: string }).binding;
      expect(binding).toBe(`/a2a/${stack.orgSlug}/${slug}`);

      // 5. talk to it with the SDK: a streamed artifact in two chunks, then completed
      const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(`${stack.baseUrl}${binding}/`);
      const task = (await client.sendMessage(send('hello there'))) as Task;
      expect(task.status!.state).toBe(3); // COMPLETED
      expect(text(task.status!.message)).toBe('Done.');
      expect(task.artifacts.map((a) => [a.artifactId, a.name, a.parts.map((p: any) => p.content.value).join('')])).toEqual([['answer', 'answer.txt', 'You said: hello there']]);
      // two chunks in the log, not one artifact
      const events = await fetch(`${stack.baseUrl}/v1/runs/${task.id}/events`, { headers: { authorization: `Bearer ${stack.adminKey}` } }).then((r) => r.json() as Promise<{ events: Array<{ event: { type: string } }> }>);
      expect(events.events.filter((e) => e.event.type === 'artifact.updated')).toHaveLength(2);

      // the confirmation round trip: asked, approved, completed after the answer
      const asked = (await client.sendMessage(send('please confirm the order'))) as Task;
      expect(asked.status!.state).toBe(6); // INPUT_REQUIRED
      expect(text(asked.status!.message)).toBe('Shall I go ahead with "please confirm the order"?');
      const done = (await client.sendMessage(send('approve', asked.id))) as Task;
      expect(done.status!.state).toBe(3);
      expect(text(done.status!.message)).toBe('Confirmed, done: please confirm the order');
      // and the reject branch
      const asked2 = (await client.sendMessage(send('confirm the refund'))) as Task;
      const rejected = (await client.sendMessage(send('reject', asked2.id))) as Task;
      expect(rejected.status!.state).toBe(7); // REJECTED
      expect(text(rejected.status!.message)).toBe('Called off: confirm the refund');

      // the backend refuses what the control plane did not sign: a forged signature, a stale one, none
      const body = JSON.stringify({ run: { runId: 'x' }, trigger: { kind: 'created' }, input: { parts: [{ text: 'hi' }] }, history: [], extensions: [] });
      const post = (headers: Record<string, string>) => fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      const now = new Date();
      const signed = (key: string, at: Date) => {
        const id = `msg_${randomUUID()}`;
        return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(key).sign(id, at, body) };
      };
      const forged = await post(signed(`whsec_${randomBytes(32).toString('base64')}`, now));
      expect(forged.status).toBe(401);
      expect((await post(signed(secret, new Date(now.getTime() - 6 * 60_000)))).status).toBe(401);
      expect((await post({})).status).toBe(401);
      const tampered = signed(secret, now);
      expect((await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json', ...tampered }, body: body.replace('hi', 'ho') })).status).toBe(401);
      // and answers what it did sign (the control plane's requests above prove the rest)
      const genuine = await post(signed(secret, now));
      expect(genuine.status).toBe(200);
      expect(genuine.headers.get('content-type')).toMatch(/application\/x-ndjson/);
      expect((await genuine.text()).trim().split('\n').map((l) => JSON.parse(l).op)).toEqual(['status', 'artifact', 'artifact', 'status']);
    }, 90_000);
  }

  it('refuses bad input: an unknown language, --generate with --from-env, a slug that is not one', async () => {
    const lang = await aaas('init', 'agent', path.join(work, 'x'), '--lang', 'ruby');
    expect(lang.code).toBe(2);
    expect(lang.stderr).toMatch(/ruby.*(node|choices)/s);
    const both = await aaas('secrets', 'create', 'both-ways', '--generate', '--from-env', 'HOME');
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--generate or --from-env/);
    const slug = await aaas('init', 'agent', path.join(work, 'y'), '--slug', 'Not A Slug');
    expect(slug.code).toBe(2);
    expect(slug.stderr).toMatch(/not an agent slug/);
    // a directory holding one of the files is left alone
    await mkdir(path.join(work, 'taken'));
    await writeFile(path.join(work, 'taken', 'agent.yaml'), 'mine');
    expect((await aaas('init', 'agent', path.join(work, 'taken'))).code).toBe(2);
    expect(await readFile(path.join(work, 'taken', 'agent.yaml'), 'utf8')).toBe('mine');
  });
});
