import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from './support/env.js';
import { TestRedis, freePort } from './support/redis-server.js';
import { startStack, type Stack } from './support/stack.js';

const run = promisify(execFile);

/** Liveness, readiness (PostgreSQL, migrations, a Redis the test starts and stops) and fail-fast boot. */
describe('health', () => {
  let redis: TestRedis;
  let stack: Stack;

  beforeAll(async () => {
    redis = await TestRedis.start();
    // configured for every card claim (signed cards, push) that other test files' agents make in
    // this database: readiness also says whether this process can serve them (tested in card-claims)
    stack = await startStack({ worker: false, env: { REDIS_URL: redis.url, SIGNING_KEY_ENCRYPTION_SECRET: 'test-signing-secret-health-0123456789' } });
  });
  afterAll(async () => {
    await redis?.start().catch(() => undefined);
    await stack?.close();
    await redis?.stop();
  });

  it('liveness is 200; readiness stays 200 while Redis is down (reported), the dependencies route flips to 503 and back', async () => {
    expect((await fetch(`${stack.baseUrl}/healthz`)).status).toBe(200);
    const up = await fetch(`${stack.baseUrl}/readyz`);
    expect(up.status).toBe(200);
    expect(await up.json()).toMatchObject({ status: 'ok', info: { postgresql: { status: 'up' }, migrations: { status: 'up' }, cardClaims: { status: 'up' }, redis: { status: 'up', reachable: true } } });
    expect((await fetch(`${stack.baseUrl}/healthz/dependencies`)).status).toBe(200);

    await redis.stop();
    const t0 = Date.now();
    const ready = await fetch(`${stack.baseUrl}/readyz`);
    expect(Date.now() - t0).toBeLessThan(3_000);
    // still routable: requests are served, dispatches wait in the outbox
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { info: Record<string, { reachable?: boolean }> }).info.redis!.reachable).toBe(false);
    const deps = await fetch(`${stack.baseUrl}/healthz/dependencies`);
    expect(deps.status).toBe(503);
    const body = (await deps.json()) as { error: Record<string, { status: string }> };
    expect(body.error.redis!.status).toBe('down');
    expect((await fetch(`${stack.baseUrl}/healthz`)).status).toBe(200);

    await redis.start();
    await expect.poll(async () => (await fetch(`${stack.baseUrl}/healthz/dependencies`)).status, { timeout: 10_000, interval: 200 }).toBe(200);
  });
});

describe('fail-fast boot', () => {
  const env = (databaseUrl: string) => ({ ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', PORT: '0' });

  async function boot(script: string, databaseUrl: string): Promise<{ code: number; stderr: string }> {
    try {
      await run(process.execPath, [script], { env: env(databaseUrl), timeout: 20_000 });
      return { code: 0, stderr: '' };
    } catch (e) {
      const err = e as { code?: number; stderr?: string };
      return { code: err.code ?? -1, stderr: err.stderr ?? '' };
    }
  }

  it('the API and the worker refuse to start when PostgreSQL is unreachable, with one clear line', async () => {
    const port = await freePort();
    for (const script of ['dist/apps/api/src/main.js', 'dist/apps/worker/src/main.js']) {
      const r = await boot(script, `postgresql://postgres@127.0.0.1:${port}/nowhere`);
      expect(r.code, script).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/cannot reach PostgreSQL at 127\.0\.0\.1:\d+/);
    }
  });

  it('a port already in use is one line naming the port and the setting that chooses another', async () => {
    const { createServer } = await import('node:net');
    const taken = createServer();
    const port = await new Promise<number>((r) => taken.listen(0, '127.0.0.1', () => r((taken.address() as { port: number }).port)));
    try {
      const api = await run(process.execPath, ['dist/apps/api/src/main.js'], { env: { ...env(TEST_DATABASE_URL), PORT: String(port), HOST: '127.0.0.1' }, timeout: 20_000 }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code?: number; stderr?: string }) => ({ code: e.code ?? -1, stderr: e.stderr ?? '' }),
      );
      expect(api.code).toBe(1);
      expect(api.stderr.trim().split('\n')).toHaveLength(1);
      expect(api.stderr).toContain(`aaas api: port ${port} on 127.0.0.1 is already in use by another process: stop it, or choose another port with PORT=<port>`);
      const worker = await run(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...env(TEST_DATABASE_URL), WORKER_METRICS_PORT: String(port), WORKER_METRICS_HOST: '127.0.0.1' }, timeout: 20_000 }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code?: number; stderr?: string }) => ({ code: e.code ?? -1, stderr: e.stderr ?? '' }),
      );
      expect(worker.code).toBe(1);
      expect(worker.stderr).toContain(`port ${port} on 127.0.0.1 is already in use by another process: stop it, or choose another port with WORKER_METRICS_PORT=<port>`);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });

  it('they refuse to start when the schema is behind this build', async () => {
    const name = `aaas_test_empty_${randomUUID().slice(0, 8)}`;
    const adminUrl = new URL(TEST_DATABASE_URL);
    adminUrl.pathname = '/postgres';
    const admin = new pg.Client({ connectionString: adminUrl.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    try {
      const url = new URL(TEST_DATABASE_URL);
      url.pathname = `/${name}`;
      for (const script of ['dist/apps/api/src/main.js', 'dist/apps/worker/src/main.js']) {
        const r = await boot(script, url.toString());
        expect(r.code, script).toBe(1);
        expect(r.stderr).toMatch(/schema is behind this build \(\d+ migration\(s\) not applied: 20261122001211_init/);
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
    }
  });
});

describe('one log format', () => {
  it("the API's lines — Nest's bootstrap and Fastify's requests — are all pino JSON, and the request id is echoed", async () => {
    const { spawn } = await import('node:child_process');
    const port = await freePort();
    const child = spawn(process.execPath, ['dist/apps/api/src/main.js'], { env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, REDIS_PREFIX: `aaas-test-log-${randomUUID().slice(0, 8)}`, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (c) => (out += c));
    try {
      await expect.poll(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status, { timeout: 20_000, interval: 200 }).toBe(200);
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { 'x-request-id': 'trace-me-42' } });
      expect(res.headers.get('x-request-id')).toBe('trace-me-42');
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    const lines = out.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(2);
    const parsed = lines.map((l) => JSON.parse(l) as { name?: string; context?: string; reqId?: string; msg?: string });
    expect(parsed.every((l) => l.name === 'aaas-api')).toBe(true);
    expect(parsed.some((l) => l.context !== undefined)).toBe(true);
    expect(parsed.some((l) => l.reqId === 'trace-me-42')).toBe(true);
  });
});
