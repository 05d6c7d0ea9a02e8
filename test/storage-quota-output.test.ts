import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue #43 row 8: the storage quota never limited what an agent writes (10 kB quota, one 2-byte
 * message: the backend wrote 50,000,808 bytes into the run). Now the append statement itself
 * refuses a runtime's write that would take the organization past its quota (the org's stored
 * bytes are the sum of `org_storage`, kept by triggers on `runs`), the run fails through failRun
 * with "the organization's storage quota is exhausted", the refused batch writes nothing, and what
 * is stored stays within the quota plus one batch — also with many runs writing at once.
 */
const QUOTA = 10_000;
/** What the backend streams: 50 MB of artifact chunks of 1,000 characters. */
const TOTAL = 50_000_000;
const CHUNK = 1_000;
/** One batch of the runtime: one chunk (it commits a chunk when the next one comes) and its JSON. */
const BATCH = CHUNK + 100;
/** The failure's own message ("Failed: …"), appended by failRun past the quota. */
const FAILURE_MESSAGE = 200;
const REASON = "the organization's storage quota is exhausted";

let stack: Stack;
let db: DatabaseService;
let backend: http.Server;
let base: string;
let agent: PublishedAgent;
let orgId: string;
/** Per request to the backend: what it managed to write, and whether the platform hung up on it. */
const streams: Array<{ written: number; closedEarly: boolean; done: boolean }> = [];

const admin = (method: string, path: string, body?: unknown) => adminRequest(stack.baseUrl, stack.adminKey, method, path, body);

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const stream = { written: 0, closedEarly: false, done: false };
      streams.push(stream);
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(`${JSON.stringify({ op: 'status', status: 'working' })}\n`);
      res.on('close', () => {
        if (!stream.done) stream.closedEarly = true;
      });
      const text = 'x'.repeat(CHUNK);
      let i = 0;
      const pump = () => {
        while (stream.written < TOTAL && !res.destroyed) {
          const line = `${JSON.stringify({ op: 'artifact', artifactId: 'flood', name: 'flood.txt', parts: [{ text }], append: i > 0, lastChunk: false })}\n`;
          i++;
          stream.written += Buffer.byteLength(line);
          if (!res.write(line)) return void res.once('drain', pump);
        }
        if (res.destroyed) return;
        stream.done = true;
        res.end(`${JSON.stringify({ op: 'status', status: 'completed' })}\n`);
      };
      pump();
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  stack = await startStack({ env: { HTTP_RUNTIME_ALLOWED_CIDRS: '127.0.0.0/8', ORG_STORAGE_QUOTA_BYTES: String(QUOTA) } });
  db = stack.api.get(DatabaseService);
  orgId = (await admin('GET', '/v1/organization')).body.id;
  // the organization's namespace by its id (docs/runtimes.md: a slug with a '-' is ambiguous)
  const secretEnv = `AAAS_RUNTIME_SECRET_${orgId.replace(/-/g, '').toUpperCase()}_FLOOD`;
  process.env[secretEnv] = 'whsec_dGVzdC1vbmx5LWZsb29kLWJhY2tlbmQtc2VjcmV0';
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'flood',
    runtime: { kind: 'http', url: `${base}/flood`, secretEnv, resumable: false },
    transports: ['JSONRPC'],
    a2a: { capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } },
  });
});

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => backend?.close(() => r()));
});

/** The org's stored bytes three ways: the runs' column, the quota's sum (org_storage), and the usage route. */
async function storage(): Promise<{ runs: number; orgStorage: number; usage: number }> {
  const [row] = await db.query<{ runs: string; org: string }>(
    `SELECT (SELECT COALESCE(sum(stored_bytes), 0) FROM runs WHERE org_id = $1) AS runs,
            (SELECT COALESCE(sum(bytes), 0) FROM org_storage WHERE org_id = $1) AS org`,
    [orgId],
  );
  const usage = (await admin('GET', '/v1/organization/usage')).body.storedBytes as number;
  return { runs: Number(row!.runs), orgStorage: Number(row!.org), usage };
}

/** The run's bytes as its log holds them (each message and artifact chunk's parts as UTF-8 JSON, as the append path counts them). */
async function loggedBytes(runId: string): Promise<number> {
  const events = await db.query<{ type: string; payload: { message?: unknown; parts?: unknown } }>(`SELECT type, payload FROM run_events WHERE org_id = $1 AND run_id = $2`, [orgId, runId]);
  let n = 0;
  for (const e of events) {
    if (e.payload.message !== undefined) n += Buffer.byteLength(JSON.stringify(e.payload.message));
    if (e.type === 'artifact.updated' && e.payload.parts !== undefined) n += Buffer.byteLength(JSON.stringify(e.payload.parts));
  }
  return n;
}

describe('the storage quota limits what an agent writes (issue #43 row 8)', () => {
  it('a backend streaming 50 MB into a run under a 10 kB quota: the run fails with the reason, stored bytes stay within quota + one batch, nothing half-written', async () => {
    const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] }, configuration: { returnImmediately: true } } }),
    });
    const taskId = ((await res.json()) as { result: { task: { id: string } } }).result.task.id;

    await expect.poll(async () => (await db.query<{ status: string }>(`SELECT status FROM runs WHERE id = $1`, [taskId]))[0]!.status, { timeout: 60_000, interval: 100 }).toBe('failed');

    // the client sees why
    const task = await fetch(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } }),
    }).then((r) => r.json() as Promise<{ result: { status: { state: string; message: { parts: Array<{ text: string }> } } } }>);
    expect(task.result.status.state).toBe('TASK_STATE_FAILED');
    expect(task.result.status.message.parts[0]!.text).toBe(`Failed: ${REASON}`);
    const [last] = await db.query<{ type: string; payload: { status: string; reason: string } }>(
      `SELECT type, payload FROM run_events WHERE org_id = $1 AND run_id = $2 ORDER BY sequence DESC LIMIT 1`,
      [orgId, taskId],
    );
    expect(last).toMatchObject({ type: 'run.status_changed', payload: { status: 'failed', reason: REASON } });

    // within the quota plus one batch
    const stored = await storage();
    expect(stored.runs).toBeLessThanOrEqual(QUOTA + BATCH + FAILURE_MESSAGE);
    expect(stored.orgStorage).toBe(stored.runs);
    expect(stored.usage).toBe(stored.runs);

    // nothing half-written: the run's counted bytes are exactly what its log holds, the artifact
    // projection is exactly the chunks the log holds, and no event follows the failure
    const [run] = await db.query<{ storedBytes: string; lastSequence: number }>(`SELECT stored_bytes AS "storedBytes", last_sequence AS "lastSequence" FROM runs WHERE id = $1`, [taskId]);
    expect(Number(run!.storedBytes)).toBe(await loggedBytes(taskId));
    const [events] = await db.query<{ n: number; max: number }>(`SELECT count(*)::int AS n, max(sequence) AS max FROM run_events WHERE org_id = $1 AND run_id = $2`, [orgId, taskId]);
    expect(events).toEqual({ n: run!.lastSequence, max: run!.lastSequence });
    const chunks = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM run_events WHERE org_id = $1 AND run_id = $2 AND type = 'artifact.updated'`, [orgId, taskId]);
    const [artifact] = await db.query<{ parts: number; complete: boolean }>(`SELECT jsonb_array_length(parts) AS parts, complete FROM artifacts WHERE org_id = $1 AND run_id = $2`, [orgId, taskId]);
    if (chunks[0]!.n > 0) expect(artifact).toEqual({ parts: chunks[0]!.n, complete: false });
    else expect(artifact).toBeUndefined();

    // the platform stopped reading: the backend could not write its 50 MB
    expect(streams).toHaveLength(1);
    await expect.poll(() => streams[0]!.closedEarly, { timeout: 10_000 }).toBe(true);
    expect(streams[0]!.written).toBeLessThan(TOTAL);
    console.log(`row 8: the backend wrote ${streams[0]!.written} B before the platform hung up; stored ${stored.runs} B under a ${QUOTA} B quota (${chunks[0]!.n} chunks)`);

    // the org is at its quota: a new task is refused at the door
    const refused = await fetch(`${stack.baseUrl}${agent.basePath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'x'.repeat(QUOTA) }] } } }),
    }).then((r) => r.json() as Promise<{ error?: { code: number; message: string } }>);
    expect(refused.error?.code).toBe(-32600);
  }, 120_000);

  it('many runs writing at once: each refused write writes nothing, and the total stays within the quota plus one batch per append in flight', async () => {
    const quota = (await storage()).runs + 20_000;
    expect((await admin('PUT', `/v1/organizations/${orgId}/storage-quota`, { storageQuotaBytes: quota })).status).toBe(200);
    // a fresh reading of the quota in the worker's process
    await new Promise((r) => setTimeout(r, 2_100));
    const runIds: string[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await fetch(`${stack.baseUrl}${agent.basePath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] }, configuration: { returnImmediately: true } } }),
      });
      runIds.push(((await res.json()) as { result: { task: { id: string } } }).result.task.id);
    }
    await expect
      .poll(async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE id = ANY($1::uuid[]) AND status = 'failed'`, [runIds]))[0]!.n, { timeout: 60_000, interval: 200 })
      .toBe(runIds.length);
    const stored = await storage();
    // each run's last admitted batch may have been checked against the same total as the others'
    expect(stored.runs).toBeLessThanOrEqual(quota + runIds.length * (BATCH + FAILURE_MESSAGE));
    expect(stored.orgStorage).toBe(stored.runs);
    await expect.poll(() => streams.filter((x) => x.closedEarly).length, { timeout: 10_000 }).toBe(streams.length);
    for (const id of runIds) {
      const [run] = await db.query<{ storedBytes: string }>(`SELECT stored_bytes AS "storedBytes" FROM runs WHERE id = $1`, [id]);
      expect(Number(run!.storedBytes)).toBe(await loggedBytes(id));
    }
    // the worker folds the deltas (ORG_STORAGE_FOLD_MS): the sums stay what they were
    await expect.poll(async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM org_storage WHERE org_id = $1 AND NOT folded`, [orgId]))[0]!.n, { timeout: 5_000 }).toBe(0);
    expect((await storage()).orgStorage).toBe(stored.runs);
    console.log(`row 8, ${runIds.length} runs at once: stored ${stored.runs - (quota - 20_000)} B more with ${20_000} B of room`);
  }, 120_000);

  it('org_storage is the sum of every organization\'s runs: after the migration on a database that has runs, after removals', async () => {
    const totals = () =>
      db.query<{ orgId: string; runs: string; org: string }>(
        `SELECT o.id AS "orgId", (SELECT COALESCE(sum(stored_bytes), 0) FROM runs WHERE org_id = o.id) AS runs,
                (SELECT COALESCE(sum(bytes), 0) FROM org_storage WHERE org_id = o.id) AS org
           FROM organizations o ORDER BY o.id`,
      );
    const expectExact = async () => {
      for (const t of await totals()) expect(Number(t.org), t.orgId).toBe(Number(t.runs));
    };
    await expectExact();
    const before = await totals();
    await db.query(`DROP TABLE org_storage; DROP TRIGGER org_storage_inserted ON runs; DROP TRIGGER org_storage_deleted ON runs;
      DROP TRIGGER org_storage_grew ON runs; DROP FUNCTION org_storage_runs_inserted(); DROP FUNCTION org_storage_runs_deleted(); DROP FUNCTION org_storage_run_grew()`);
    await db.query(await readFile(new URL('../prisma/migrations/20261128130000_org_storage/migration.sql', import.meta.url), 'utf8'));
    expect(await totals()).toEqual(before);
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM org_storage WHERE NOT folded`))[0]!.n).toBe(0);
    // runs removed (the retention path) take their bytes with them
    const [victim] = await db.query<{ id: string; storedBytes: string }>(`SELECT id, stored_bytes AS "storedBytes" FROM runs WHERE org_id = $1 AND stored_bytes > 0 LIMIT 1`, [orgId]);
    const was = (await storage()).orgStorage;
    await db.transaction(async (q) => {
      await q(`SELECT set_config('aaas.retention', 'on', true)`);
      await q('DELETE FROM runs WHERE org_id = $1 AND id = $2', [orgId, victim!.id]);
    });
    expect((await storage()).orgStorage).toBe(was - Number(victim!.storedBytes));
    await expectExact();
  });
});
