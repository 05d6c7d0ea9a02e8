import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { DatabaseService } from '#libs/db';
import { newRunId } from '#libs/runs';
import { adminRequest, publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Issue 43 rows 5, 6 and 7: a run archive import (POST /v1/run-archive) is hostile input.
 * - Row 5: the run row's bookkeeping columns (stored_bytes, counters, status times) are derived from
 *   the imported log, never taken from the archive; the import counts against the storage quota and
 *   one past it is refused whole; the database refuses a negative stored_bytes from any writer.
 * - Row 6: slow (trickling) imports hold no database connection: while ten of them trickle, another
 *   organization's admin API and /readyz answer at once, and a second import into an organization
 *   that is importing is refused with 409 `archive.import_in_progress`.
 * - Row 7: body, line and nesting limits answer 413/422 with their codes, nothing imported, and a
 *   long line costs memory bounded by the line limit (read in linear time, refused as it arrives).
 */
const MAX_LINE = 1024 * 1024;
const MAX_BODY = 8 * 1024 * 1024;
const RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'summarize',
      match: { text: '^summarize' },
      steps: [
        { type: 'artifact', artifactId: 'summary', name: 'summary.txt', content: { text: 'summary of: {{input}}' } },
        { type: 'status', status: 'completed', message: 'short and sweet' },
      ],
    },
  ],
};

let s: Stack;
let db: DatabaseService;
let sourceLines: string[] = [];

interface Org {
  id: string;
  key: string;
}

async function newOrg(): Promise<Org> {
  const org = await adminRequest<{ id: string; adminKey: { key: string } }>(s.baseUrl, s.adminKey, 'POST', '/v1/organizations', { slug: `imp-${randomUUID().slice(0, 8)}`, name: 'Importer' });
  expect(org.status, JSON.stringify(org.body)).toBe(201);
  await publishAgent(s.baseUrl, org.body.adminKey.key, { slug: 'echo', runtime: RUNTIME });
  return { id: org.body.id, key: org.body.adminKey.key };
}

/** The line with every id fresh (run ids time-ordered, as partitions want), so it imports into this same deployment. */
function fresh(line: string): string {
  const l = JSON.parse(line) as { run: { id: string } };
  const map = new Map<string, string>([[l.run.id, newRunId()]]);
  return line.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!map.has(id)) map.set(id, randomUUID());
    return map.get(id)!;
  });
}

async function importBody(org: Org, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.baseUrl}/v1/run-archive`, { method: 'POST', headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/x-ndjson', ...headers }, body });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string; details?: Record<string, unknown> }; runs?: number } };
}

async function runsOf(orgId: string): Promise<{ runs: number; stored: number; ledger: number }> {
  const [row] = await db.query<{ runs: number; stored: string; ledger: string }>(
    `SELECT (SELECT count(*)::int FROM runs WHERE org_id = $1) AS runs, (SELECT COALESCE(sum(stored_bytes), 0)::text FROM runs WHERE org_id = $1) AS stored,
            (SELECT COALESCE(sum(bytes), 0)::text FROM org_storage WHERE org_id = $1) AS ledger`,
    [orgId],
  );
  return { runs: row!.runs, stored: Number(row!.stored), ledger: Number(row!.ledger) };
}

async function exportOf(org: Org): Promise<Array<{ run: Record<string, unknown> }>> {
  const res = await fetch(`${s.baseUrl}/v1/run-archive`, { headers: { authorization: `Bearer ${org.key}` } });
  return (await res.text())
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l));
}

beforeAll(async () => {
  s = await startStack({
    env: { ARCHIVE_IMPORT_MAX_LINE_BYTES: String(MAX_LINE), ARCHIVE_IMPORT_MAX_BODY_BYTES: String(MAX_BODY), DATABASE_POOL_MAX: '6', DATABASE_CONNECT_TIMEOUT_MS: '3000', REQUEST_TIMEOUT_MS: '60000' },
  });
  db = s.api.get(DatabaseService);
  const agent = await publishAgent(s.baseUrl, s.adminKey, { slug: 'echo', runtime: RUNTIME });
  const client = await new ClientFactory().createFromUrl(`${s.baseUrl}${agent.basePath}/`);
  for (let i = 0; i < 3; i++) {
    const r = (await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: `summarize part ${i} ${'x'.repeat(2000)}` }] } }))) as Task;
    for (let t = Date.now(); taskStateToJSON((await client.getTask({ tenant: '', id: r.id, historyLength: undefined })).status!.state) !== 'TASK_STATE_COMPLETED'; ) {
      if (Date.now() - t > 15_000) throw new Error('task did not complete');
      await new Promise((res) => setTimeout(res, 50));
    }
  }
  const res = await fetch(`${s.baseUrl}/v1/run-archive`, { headers: { authorization: `Bearer ${s.adminKey}` } });
  sourceLines = (await res.text()).split('\n').filter((l) => l.length > 0);
  expect(sourceLines).toHaveLength(3);
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe('row 5: derived columns and the storage quota', () => {
  it('recomputes forged stored_bytes, counters and status times from the log', async () => {
    const org = await newOrg();
    const honest = sourceLines.map(fresh);
    const forged = honest.map((text) => {
      const l = JSON.parse(text);
      Object.assign(l.run, { stored_bytes: -9e15, status_at: '1970-01-01T00:00:00+00:00', created_at: '1970-01-01T00:00:00+00:00', updated_at: '2999-01-01T00:00:00+00:00', ended_at: null, open_interactions: 99, interaction_version: -4, status: 'working', blocked_reason: 'input_required' });
      return JSON.stringify(l);
    });
    const r = await importBody(org, `${forged.join('\n')}\n`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const back = await exportOf(org);
    const want = honest.map((l) => JSON.parse(l).run);
    expect(back.map((l) => l.run)).toEqual(want);
    const bytes = want.reduce((n, run) => n + Number(run.stored_bytes), 0);
    expect(bytes).toBeGreaterThan(3 * 2000);
    expect(await runsOf(org.id)).toEqual({ runs: 3, stored: bytes, ledger: bytes });
    const usage = await adminRequest(s.baseUrl, org.key, 'GET', '/v1/organization/usage');
    expect(usage.body.storedBytes).toBe(bytes);
  });

  it('refuses a log stamped in the future or not starting with run.created, nothing imported', async () => {
    const org = await newOrg();
    const l = JSON.parse(fresh(sourceLines[0]!));
    l.events[l.events.length - 1].created_at = '2999-01-01T00:00:00+00:00';
    const future = await importBody(org, JSON.stringify(l));
    expect(future.status).toBe(422);
    expect(future.body.error).toMatchObject({ code: 'archive.invalid', details: { line: 1 } });
    expect(future.body.error!.message).toMatch(/future/);
    expect((await runsOf(org.id)).runs).toBe(0);
  });

  it('counts imported bytes against the quota: past it, 403 org.storage_quota_exceeded and nothing written', async () => {
    const org = await newOrg();
    const lines = sourceLines.map(fresh);
    const bytes = lines.reduce((n, l) => n + Number(JSON.parse(l).run.stored_bytes), 0);
    expect((await adminRequest(s.baseUrl, s.adminKey, 'PUT', `/v1/organizations/${org.id}/storage-quota`, { storageQuotaBytes: bytes - 1 })).status).toBe(200);
    // the forged negative stored_bytes no longer buys room
    const forged = lines.map((t) => JSON.stringify({ ...JSON.parse(t), run: { ...JSON.parse(t).run, stored_bytes: -9e15 } }));
    const over = await importBody(org, forged.join('\n'));
    expect(over.status).toBe(403);
    expect(over.body.error).toMatchObject({ code: 'org.storage_quota_exceeded', details: { quotaBytes: bytes - 1, importBytes: bytes } });
    expect(await runsOf(org.id)).toEqual({ runs: 0, stored: 0, ledger: 0 });
    // exactly at the quota: imported, and the quota is then used up for new input
    expect((await adminRequest(s.baseUrl, s.adminKey, 'PUT', `/v1/organizations/${org.id}/storage-quota`, { storageQuotaBytes: bytes })).status).toBe(200);
    const ok = await importBody(org, forged.join('\n'));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(await runsOf(org.id)).toEqual({ runs: 3, stored: bytes, ledger: bytes });
    const usage = await adminRequest(s.baseUrl, org.key, 'GET', '/v1/organization/usage');
    expect(usage.body).toMatchObject({ storedBytes: bytes, storageQuotaBytes: bytes });
  });

  it('refuses projections that outweigh their log (content the quota, counting the log, would not see), nothing imported', async () => {
    const org = await newOrg();
    const l = JSON.parse(fresh(sourceLines[0]!));
    expect(l.messages.length).toBeGreaterThan(0);
    l.messages[0].parts = [{ text: 'y'.repeat(200_000) }];
    const r = await importBody(org, JSON.stringify(l));
    expect(r.status).toBe(422);
    expect(r.body.error).toMatchObject({ code: 'archive.invalid', details: { line: 1 } });
    expect(r.body.error!.message).toMatch(/more than the log they project allows/);
    expect((await runsOf(org.id)).runs).toBe(0);
  });

  it('the database refuses a negative stored_bytes from any writer (runs_stored_bytes_check)', async () => {
    const [run] = await db.query<{ id: string }>(`SELECT id FROM runs LIMIT 1`);
    await expect(db.query(`UPDATE runs SET stored_bytes = -1 WHERE id = $1`, [run!.id])).rejects.toMatchObject({ code: '23514', constraint: 'runs_stored_bytes_check' });
  });
});

/** An import whose body arrives a few bytes at a time: `finish()` sends the rest and resolves with the answer. */
function trickle(org: Org, body: string): { finish(): Promise<{ status: number; body: string }> } {
  const url = new URL(`${s.baseUrl}/v1/run-archive`);
  const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/x-ndjson', 'transfer-encoding': 'chunked' } });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
  });
  let sent = 0;
  const timer = setInterval(() => {
    if (sent < 40) req.write(body.slice(sent, ++sent));
  }, 100);
  return {
    async finish() {
      clearInterval(timer);
      req.end(body.slice(sent));
      return answer;
    },
  };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

describe('row 6: trickling imports hold no database connection', () => {
  it('ten slow imports (pool of 6): another org admin request and /readyz answer at once, a second import into an importing org is 409', async () => {
    const orgs = await Promise.all(Array.from({ length: 10 }, () => newOrg()));
    const bodies = orgs.map(() => `${sourceLines.map(fresh).join('\n')}\n`);
    const slow = orgs.map((o, i) => trickle(o, bodies[i]!));
    await new Promise((r) => setTimeout(r, 1500));
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      // the database check of /readyz (its other checks look at every served card in this shared test database)
      const ready = await timed(async () => (await fetch(`${s.baseUrl}/readyz`)).json() as Promise<{ details: Record<string, { status: string }> }>);
      expect(ready.value.details.postgresql?.status).toBe('up');
      const list = await timed(() => adminRequest(s.baseUrl, s.adminKey, 'GET', '/v1/runs?limit=5'));
      expect(list.value.status).toBe(200);
      latencies.push(ready.ms, list.ms);
    }
    console.log(`[row 6] /readyz and GET /v1/runs during 10 trickling imports: max ${Math.max(...latencies).toFixed(1)} ms, median ${latencies.sort((a, b) => a - b)[latencies.length >> 1]!.toFixed(1)} ms`);
    expect(Math.max(...latencies)).toBeLessThan(1000);
    const second = await importBody(orgs[0]!, bodies[0]!);
    expect(second.status).toBe(409);
    expect(second.body.error!.code).toBe('archive.import_in_progress');
    const answers = await Promise.all(slow.map((t) => t.finish()));
    for (const a of answers) expect(a.status, a.body).toBe(200);
    for (const o of orgs) expect((await runsOf(o.id)).runs).toBe(3);
  }, 60_000);
});

/** POST the body chunked (no Content-Length): limits are enforced as the bytes arrive. */
function postChunked(org: Org, body: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${s.baseUrl}/v1/run-archive`);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/x-ndjson', 'transfer-encoding': 'chunked' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
    req.end();
  });
}

describe('row 7: body, line and depth limits', () => {
  it('a line past ARCHIVE_IMPORT_MAX_LINE_BYTES is 413 archive.line_too_long as it arrives, with bounded memory', async () => {
    const org = await newOrg();
    const line = Buffer.alloc(16 * 1024 * 1024, 0x61);
    const rss0 = process.memoryUsage().rss;
    const r = await timed(() => postChunked(org, Buffer.concat([Buffer.from(`${fresh(sourceLines[0]!)}\n`), line, Buffer.from('\n')])));
    const grown = (process.memoryUsage().rss - rss0) / 1024 / 1024;
    console.log(`[row 7] 16 MiB line (chunked): ${r.ms.toFixed(0)} ms, RSS +${grown.toFixed(1)} MiB`);
    expect(r.value.status).toBe(413);
    expect(JSON.parse(r.value.body).error).toMatchObject({ code: 'archive.line_too_long', details: { line: 2, maxLineBytes: MAX_LINE } });
    expect(grown).toBeLessThan(200);
    expect((await runsOf(org.id)).runs).toBe(0);
  });

  it('a body past ARCHIVE_IMPORT_MAX_BODY_BYTES is 413 archive.too_large, by Content-Length or as it arrives', async () => {
    const org = await newOrg();
    const big = Buffer.alloc(MAX_BODY + 1024, 0x0a);
    const declared = await importBody(org, big);
    expect(declared.status).toBe(413);
    expect(declared.body.error).toMatchObject({ code: 'archive.too_large', details: { maxBodyBytes: MAX_BODY } });
    const chunked = await postChunked(org, big);
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body).error.code).toBe('archive.too_large');
    expect((await runsOf(org.id)).runs).toBe(0);
  });

  it('JSON nested 10^4 and 10^5 deep is 422 archive.too_deep (no 500), nothing imported', async () => {
    const org = await newOrg();
    for (const depth of [10_000, 100_000]) {
      for (const text of ['['.repeat(depth) + ']'.repeat(depth), `{"v":1,"run":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`]) {
        const r = await importBody(org, `${fresh(sourceLines[0]!)}\n${text}\n`);
        expect(r.status).toBe(422);
        expect(r.body.error).toMatchObject({ code: 'archive.too_deep', details: { line: 2, maxDepth: 64 } });
      }
    }
    // nesting inside strings does not count
    const l = JSON.parse(fresh(sourceLines[0]!));
    l.run.metadata = { note: '['.repeat(1000) };
    expect((await importBody(org, JSON.stringify(l))).status).toBe(200);
  });
});
