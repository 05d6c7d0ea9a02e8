import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './support/env.js';
import { freePort } from './support/redis-server.js';

/**
 * `npm run dev`'s API host (scripts/dev-host.mjs): each change message starts the app again, in the
 * same process, from fresh copies of the changed modules under dist/ and their importers; other
 * modules, and node_modules, stay loaded; a start that throws leaves the host waiting for the next
 * change (which reloads every module); an app that does not close makes it ask for a fresh process
 * (exit 75). Then the real API (dist/, build first) reloaded the
 * same way answers from the database.
 */
const fixture = path.join('dist', `.dev-host-test-${randomUUID().slice(0, 8)}`);
const hosts: ChildProcess[] = [];

interface Host {
  child: ChildProcess;
  output: () => string;
  /** The next `{ started }` / `{ failed }` message (or the exit code when the host exits first). */
  next: () => Promise<{ started?: number; failed?: number; exit?: number | null }>;
}

function host(entry: string, exported: string, env: NodeJS.ProcessEnv = {}): Host {
  const child = spawn(process.execPath, ['scripts/dev-host.mjs', entry, exported], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  hosts.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const messages: unknown[] = [];
  const waiting: Array<(m: unknown) => void> = [];
  const push = (m: unknown) => (waiting.length > 0 ? waiting.shift()!(m) : messages.push(m));
  child.on('message', push);
  child.on('exit', (code) => push({ exit: code }));
  return { child, output: () => output, next: () => (messages.length > 0 ? Promise.resolve(messages.shift() as never) : new Promise((resolve) => waiting.push(resolve as never))) };
}

async function text(url: string): Promise<string> {
  return (await fetch(url)).text();
}

afterEach(async () => {
  for (const c of hosts.splice(0)) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    c.kill('SIGKILL');
    await once(c, 'exit');
  }
});
afterAll(async () => {
  await rm(fixture, { recursive: true, force: true });
});

describe('dev host with a small app', () => {
  // entry.js serves value.js's export, whether `zod` (node_modules) is the instance the first
  // generation saw, and how often other.js (which the edits do not touch) was evaluated; close()
  // hangs when value.js says so
  const entry = `
import { createServer } from 'node:http';
import * as z from 'zod';
import { value, hang } from './value.js';
import { evaluations } from './other.js';
export async function start() {
  globalThis.firstZod ??= z;
  const server = createServer((_req, res) => res.end(JSON.stringify({ value, sameZod: globalThis.firstZod === z, other: evaluations() })));
  await new Promise((resolve) => server.listen(Number(process.env.FIXTURE_PORT), '127.0.0.1', resolve));
  return { close: () => (hang ? new Promise(() => {}) : new Promise((resolve) => server.close(resolve))) };
}`;
  const value = (v: string, extra = '') => writeFile(path.join(fixture, 'value.js'), `${extra}export const value = ${JSON.stringify(v)};\nexport const hang = ${v === 'hang'};\n`);

  it('serves each edit from fresh modules, keeps node_modules loaded, waits out a failing start and asks for a fresh process when close hangs', async () => {
    await mkdir(fixture, { recursive: true });
    await writeFile(path.join(fixture, 'entry.js'), entry);
    await writeFile(path.join(fixture, 'other.js'), 'globalThis.otherEvaluations = (globalThis.otherEvaluations ?? 0) + 1;\nexport const evaluations = () => globalThis.otherEvaluations;\n');
    await value('one');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/`;
    const h = host(path.join(fixture, 'entry.js'), 'start', { FIXTURE_PORT: String(port) });
    expect(await h.next()).toEqual({ started: 1 });
    expect(JSON.parse(await text(url))).toEqual({ value: 'one', sameZod: true, other: 1 });

    await value('two');
    h.child.send({ changed: [path.join(fixture, 'value.js')] });
    expect(await h.next()).toEqual({ started: 2 });
    // value.js and its importer entry.js are fresh; other.js is the same instance
    expect(JSON.parse(await text(url))).toEqual({ value: 'two', sameZod: true, other: 1 });

    // an edit that throws at import: reported, the process stays, the next edit starts it again
    // (from fresh copies of every module under dist/: other.js is evaluated again)
    await value('three', 'throw new Error("broken on purpose");\n');
    h.child.send({ changed: [path.join(fixture, 'value.js')] });
    expect(await h.next()).toEqual({ failed: 3 });
    expect(h.output()).toContain('broken on purpose');
    await expect(fetch(url)).rejects.toThrow();
    await value('hang');
    h.child.send({ changed: [path.join(fixture, 'value.js')] });
    expect(await h.next()).toEqual({ started: 4 });
    expect(JSON.parse(await text(url))).toEqual({ value: 'hang', sameZod: true, other: 2 });

    // this generation's close() never ends: after 5 s the host exits 75 (setup.mjs starts a new one)
    h.child.send({ changed: [path.join(fixture, 'value.js')] });
    expect(await h.next()).toEqual({ exit: 75 });
    expect(h.output()).toContain('restarting the process');
  }, 30_000);
});

describe.skipIf(!existsSync('dist/apps/api/src/api.process.js'))('dev host with the API', () => {
  it('reloads the API in the same process; the new generation answers from the database', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const h = host('dist/apps/api/src/api.process.js', 'startApiProcess', {
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: `aaas-test-devhost-${randomUUID().slice(0, 8)}`,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
    });
    expect(await h.next()).toEqual({ started: 1 });
    const pid = h.child.pid;
    for (const generation of [2, 3]) {
      h.child.send({ changed: ['dist/libs/registry/src/agent-directory.js'] });
      expect(await h.next()).toEqual({ started: generation });
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      // the agent lookup reaches PostgreSQL through this generation's Prisma client
      const card = await fetch(`${base}/a2a/nobody/nothing/.well-known/agent-card.json`);
      expect(card.status).toBe(404);
      expect(((await card.json()) as { error: { code: string } }).error.code).toBe('agent.not_found');
      // and the served OpenAPI document is built by this generation
      const doc = (await (await fetch(`${base}/docs/openapi.json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths)).toContain('/v1/agents');
    }
    expect(h.child.pid).toBe(pid);
    expect(h.child.exitCode).toBeNull();
  }, 60_000);
});
