import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * DATABASE_READ_URL against a real streaming replica: this file starts its own PostgreSQL 15
 * primary (initdb) and a hot standby of it (pg_basebackup -R), on free ports in a temp dir, and
 * points one API at both. Shows: a list is served by the replica (stale while its replay is
 * paused, counted in readStats, its connection on the replica), the caller that just wrote reads
 * its write meanwhile (the primary serves it), and a stopped replica falls back to the primary.
 */
const BIN = '/usr/lib/postgresql/15/bin';
const present = ['initdb', 'pg_basebackup', 'pg_ctl'].every((b) => existsSync(path.join(BIN, b)));
if (!present) console.warn(`read-replica.test: skipped, PostgreSQL 15 server binaries not found in ${BIN}`);

const asRoot = process.getuid?.() === 0;

function pgCmd(name: string, args: string[]): [string, string[]] {
  const bin = path.join(BIN, name);
  // initdb refuses root: as root, every server command runs as the postgres OS user
  return asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

function run(name: string, args: string[], timeoutMs = 120_000): Promise<string> {
  const [cmd, argv] = pgCmd(name, args);
  return new Promise((resolve, reject) => {
    execFile(cmd, argv, { encoding: 'utf8', timeout: timeoutMs }, (err, stdout, stderr) => (err ? reject(new Error(`${name}: ${err.message} ${stderr}`)) : resolve(stdout)));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function one<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows[0]!;
  } finally {
    await c.end();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe.skipIf(!present)('read replica (DATABASE_READ_URL) on a real streaming replica', () => {
  let root: string;
  let primaryDir: string;
  let replicaDir: string;
  let primaryUrl: string;
  let replicaUrl: string;
  let stack: Stack;
  let db: DatabaseService;
  let agent: PublishedAgent;
  let writerKey: string;
  let replicaRunning = false;

  const opts = (port: number) => `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${root} -c fsync=off -c max_connections=60 -c shared_buffers=16MB`;

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'aaas-replica-'));
    if (asRoot) {
      const ids = execFileSync('id', ['postgres'], { encoding: 'utf8' });
      chownSync(root, Number(/uid=(\d+)/.exec(ids)![1]), Number(/gid=(\d+)/.exec(ids)![1]));
    }
    primaryDir = path.join(root, 'primary');
    replicaDir = path.join(root, 'replica');
    const [pp, rp] = [await freePort(), await freePort()];
    await run('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    await run('pg_ctl', ['start', '-D', primaryDir, '-l', path.join(root, 'primary.log'), '-w', '-t', '60', '-o', opts(pp)]);
    // the standby: a base backup streaming from the primary, -R writes its primary_conninfo and standby.signal
    await run('pg_basebackup', ['-h', '127.0.0.1', '-p', String(pp), '-U', 'postgres', '-D', replicaDir, '-R', '-X', 'stream', '--no-sync']);
    await run('pg_ctl', ['start', '-D', replicaDir, '-l', path.join(root, 'replica.log'), '-w', '-t', '60', '-o', opts(rp)]);
    replicaRunning = true;
    primaryUrl = `postgresql://postgres@127.0.0.1:${pp}/aaas_replica`;
    replicaUrl = `postgresql://postgres@127.0.0.1:${rp}/aaas_replica`;
    execFileSync(process.execPath, ['scripts/migrate.mjs'], { stdio: 'inherit', env: { ...process.env, DATABASE_URL: primaryUrl } });
    await until('the replica to have the migrated database', async () => {
      try {
        return (await one<{ n: number }>(replicaUrl, `SELECT count(*)::int AS n FROM _prisma_migrations`)).n > 0;
      } catch {
        return false;
      }
    }, 30_000);
    stack = await startStack({ worker: false, env: { DATABASE_URL: primaryUrl, DATABASE_READ_URL: replicaUrl } });
    db = stack.api.get(DatabaseService, { strict: false });
    agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'replicated', security: { scheme: 'apiKey' } });
    writerKey = (await adminRequest<{ key: string }>(stack.baseUrl, stack.adminKey, 'POST', '/v1/api-keys', { name: 'writer', scopes: ['a2a:invoke'] })).body.key;
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
    if (replicaRunning) await run('pg_ctl', ['stop', '-D', replicaDir, '-m', 'immediate', '-w', '-t', '30']).catch(() => undefined);
    await run('pg_ctl', ['stop', '-D', primaryDir, '-m', 'immediate', '-w', '-t', '30']).catch(() => undefined);
    if (root) rmSync(root, { recursive: true, force: true });
  }, 60_000);

  const rpc = async (method: string, params: unknown, key: string) => {
    const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'x-api-key': key },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as { result?: any; error?: unknown };
  };
  const send = async (key: string) => {
    const body = await rpc('SendMessage', { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hello' }] }, configuration: { returnImmediately: true } }, key);
    if (!body.result?.task) throw new Error(`SendMessage failed: ${JSON.stringify(body)}`);
    return body.result.task.id as string;
  };
  /** The admin list of runs, as the bootstrap admin key (a caller that did not write the runs). */
  const adminList = async (): Promise<string[]> => {
    const res = await adminRequest<{ runs: Array<{ id: string }> }>(stack.baseUrl, stack.adminKey, 'GET', '/v1/runs?limit=100');
    expect(res.status).toBe(200);
    return res.body.runs.map((r) => r.id);
  };
  const caughtUp = async () => {
    const { lsn } = await one<{ lsn: string }>(primaryUrl, `SELECT pg_current_wal_lsn()::text AS lsn`);
    await until('the replica to replay the primary', async () => (await one<{ ok: boolean }>(replicaUrl, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS ok`)).ok);
  };

  it('serves lists from the replica: stale while its replay is paused, for a caller that did not write', async () => {
    const first = await send(writerKey);
    await caughtUp();
    const before = { ...db.readStats };
    expect(await adminList()).toContain(first);
    expect(db.readStats.replica).toBeGreaterThan(before.replica);
    // and in Prometheus
    const scrape = await (await fetch(`${stack.baseUrl}/metrics`)).text();
    expect(Number(/^aaas_db_lag_tolerant_reads_total\{target="replica"\} (\d+)/m.exec(scrape)?.[1] ?? 0)).toBeGreaterThan(0);
    // the reads ran on the replica's connections
    const conns = await one<{ n: number }>(replicaUrl, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'aaas-read'`);
    expect(conns.n).toBeGreaterThan(0);

    await one(replicaUrl, `SELECT pg_wal_replay_pause()`);
    try {
      const second = await send(writerKey);
      // another caller reads the replica as it is: the new run is not there yet
      expect(await adminList()).not.toContain(second);
      // read-your-writes: the writer's ListTasks right after its write sees it (the primary serves it)
      const primaryBefore = db.readStats.primary;
      const mine = await rpc('ListTasks', {}, writerKey);
      expect(mine.result.tasks.map((t: { id: string }) => t.id)).toEqual(expect.arrayContaining([first, second]));
      expect(db.readStats.primary).toBeGreaterThan(primaryBefore);
      // and the replica still has not replayed it (the writer was not served by it)
      expect(await adminList()).not.toContain(second);
    } finally {
      await one(replicaUrl, `SELECT pg_wal_replay_resume()`);
    }
    await caughtUp();
    const replicaBefore = db.readStats.replica;
    const all = await adminList();
    expect(all).toHaveLength(2);
    expect(db.readStats.replica).toBeGreaterThan(replicaBefore);
    // once the replica has replayed the write, the writer is served by the replica too
    const writerBefore = db.readStats.replica;
    const mine = await rpc('ListTasks', {}, writerKey);
    expect(mine.result.tasks).toHaveLength(2);
    expect(db.readStats.replica).toBeGreaterThan(writerBefore);
  });

  it('falls back to the primary when the replica is stopped: no read fails', async () => {
    await run('pg_ctl', ['stop', '-D', replicaDir, '-m', 'fast', '-w', '-t', '30']);
    replicaRunning = false;
    const third = await send(writerKey);
    const before = { ...db.readStats };
    const ids = await adminList();
    expect(ids).toContain(third);
    expect(ids).toHaveLength(3);
    expect(db.readStats.fallback + db.readStats.primary).toBeGreaterThan(before.fallback + before.primary);
    expect(db.readStats.replica).toBe(before.replica);
    const mine = await rpc('ListTasks', {}, writerKey);
    expect(mine.result.tasks).toHaveLength(3);
    // a GetTask never used the replica anyway
    expect((await rpc('GetTask', { id: third }, writerKey)).result.id).toBe(third);
  });
});
