import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { DatabaseService } from '#libs/db';
import { RunRetention } from '#libs/runs';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * Retention (docs/architecture.md "Retention"): a policy per organization overridable per agent;
 * a pass of the worker's job removes exactly the terminal runs older than their policy, with their
 * log, projections, interactions, links, dispatches, push configs and deliveries; it leaves runs
 * that are still active, children of a parent that is still active, runs of an agent kept forever,
 * runs not yet expired and other organizations' runs. One pass at a time across the cluster (a
 * held lock makes a pass skip). The log's guard still refuses any other DELETE or UPDATE.
 */
const HELPER = {
  kind: 'scripted',
  rules: [{ name: 'summarize', match: { text: '^summarize' }, steps: [{ type: 'artifact', artifactId: 'summary', name: 'summary.txt', content: { text: 'summary of: {{input}}' } }, { type: 'status', status: 'completed', message: 'done' }] }],
};
const CONCIERGE = {
  kind: 'scripted',
  rules: [
    { name: 'book', match: { text: '^book' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'Booked for {{input}}' }] },
    // the parent stays active (asking) after its child completed
    { name: 'research', match: { text: '^research' }, steps: [{ type: 'delegate', agent: 'helper', text: 'summarize {{input}}' }, { type: 'interaction', kind: 'input', text: 'More?' }, { type: 'message', text: 'ok' }] },
    { name: 'quick', match: { text: '^quick' }, steps: [{ type: 'delegate', agent: 'helper', text: 'summarize {{input}}' }, { type: 'message', text: 'Result: {{result}}' }] },
  ],
};
const RUN_TABLES = ['run_events', 'messages', 'message_keys', 'artifacts', 'interaction_requests', 'run_dispatches', 'push_configs', 'push_deliveries'] as const;

let a: Stack;
let other: Stack;
let db: DatabaseService;
let archiveDir: string;
const agents: Record<string, PublishedAgent> = {};

const state = (t: Task) => taskStateToJSON(t.status!.state);
async function run(cl: A2AClient, text: string, want: string): Promise<string> {
  const r = (await cl.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } }))) as Task;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const t = await cl.getTask({ tenant: '', id: r.id, historyLength: undefined });
    if (state(t) === want) return t.id;
    if (Date.now() > deadline) throw new Error(`task ${r.id} is ${state(t)}, wanted ${want}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
async function childOf(parentId: string): Promise<string> {
  const [row] = await db.query<{ id: string }>('SELECT child_run_id AS id FROM run_links WHERE parent_run_id = $1', [parentId]);
  return row!.id;
}
/** Move a run's end `days` into the past (the runs row is not the log: no guard on it). */
async function age(runId: string, days: number): Promise<void> {
  await db.query(`UPDATE runs SET status_at = now() - make_interval(days => $2), ended_at = now() - make_interval(days => $2) WHERE id = $1`, [runId, days]);
}
async function rowsOf(runIds: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  out.runs = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs WHERE id = ANY($1::uuid[])', [runIds]))[0]!.n;
  for (const t of RUN_TABLES) out[t] = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t} WHERE run_id = ANY($1::uuid[])`, [runIds]))[0]!.n;
  out.run_links = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM run_links WHERE parent_run_id = ANY($1::uuid[]) OR child_run_id = ANY($1::uuid[])', [runIds]))[0]!.n;
  return out;
}
/** A push config with one delivery on the run (as PushConfigRepository records them). */
async function pushConfig(runId: string): Promise<void> {
  const [r] = await db.query<{ org_id: string; agent_id: string }>('SELECT org_id, agent_id FROM runs WHERE id = $1', [runId]);
  const id = randomUUID();
  await db.query(
    `INSERT INTO push_configs (id, org_id, run_id, agent_id, config_id, protocol_version, url, webhook_secret) VALUES ($1, $2, $3, $4, 'c1', '1.0', 'https://example.com/hook', 'x')`,
    [id, r!.org_id, runId, r!.agent_id],
  );
  await db.query(`INSERT INTO push_deliveries (config_id, org_id, run_id, sequence, webhook_id, status_code, latency_ms) VALUES ($1, $2, $3, 1, 'msg_1', 200, 3)`, [id, r!.org_id, runId]);
}

beforeAll(async () => {
  archiveDir = await mkdtemp(path.join(tmpdir(), 'aaas-retention-'));
  a = await startStack({ env: { RETENTION_INTERVAL_MS: '0', RETENTION_ARCHIVE_DIR: archiveDir } });
  other = await startStack({ worker: false });
  db = a.api.get(DatabaseService);
  agents.helper = await publishAgent(a.baseUrl, a.adminKey, { slug: 'helper', runtime: HELPER });
  agents.keeper = await publishAgent(a.baseUrl, a.adminKey, { slug: 'keeper', runtime: HELPER });
  agents.concierge = await publishAgent(a.baseUrl, a.adminKey, { slug: 'concierge', runtime: CONCIERGE });
  await publishAgent(other.baseUrl, other.adminKey, { slug: 'helper', runtime: HELPER });
}, 60_000);

afterAll(async () => {
  await Promise.all([a?.close(), other?.close()]);
});

describe('retention policy (admin API)', () => {
  it('keeps forever by default; sets an organization default and agent overrides; refuses bad values', async () => {
    expect((await adminRequest(a.baseUrl, a.adminKey, 'GET', '/v1/retention-policy')).body).toEqual({ retentionDays: null, agents: [] });
    expect((await adminRequest(a.baseUrl, a.adminKey, 'PUT', '/v1/retention-policy', { retentionDays: 30 })).body).toEqual({ retentionDays: 30, agents: [] });
    const kept = await adminRequest(a.baseUrl, a.adminKey, 'PUT', '/v1/retention-policy/agents/keeper', { retentionDays: null });
    expect(kept.body).toEqual({ retentionDays: 30, agents: [{ agentId: agents.keeper!.agentId, retentionDays: null }] });
    const bad = await adminRequest(a.baseUrl, a.adminKey, 'PUT', '/v1/retention-policy', { retentionDays: 0 });
    expect(bad.status).toBe(422);
    expect((await adminRequest(a.baseUrl, a.adminKey, 'PUT', '/v1/retention-policy/agents/nobody', { retentionDays: 3 })).status).toBe(404);
    // another organization sees its own (empty) policy
    expect((await adminRequest(other.baseUrl, other.adminKey, 'GET', '/v1/retention-policy')).body).toEqual({ retentionDays: null, agents: [] });
  });
});

describe('a retention pass', () => {
  it('removes exactly the expired terminal runs and everything of theirs, and nothing else', async () => {
    const helper = await new ClientFactory().createFromUrl(`${a.baseUrl}${agents.helper!.basePath}/`);
    const keeper = await new ClientFactory().createFromUrl(`${a.baseUrl}${agents.keeper!.basePath}/`);
    const concierge = await new ClientFactory().createFromUrl(`${a.baseUrl}${agents.concierge!.basePath}/`);
    const otherHelper = await new ClientFactory().createFromUrl(`${other.baseUrl}/a2a/${other.orgSlug}/helper/`);

    const expired = [await run(helper, 'summarize one', 'TASK_STATE_COMPLETED'), await run(helper, 'summarize two', 'TASK_STATE_COMPLETED')];
    const quickParent = await run(concierge, 'quick look', 'TASK_STATE_COMPLETED');
    const quickChild = await childOf(quickParent);
    expired.push(quickParent, quickChild); // a terminal parent and its terminal child: both go, with their link
    const recent = await run(helper, 'summarize three', 'TASK_STATE_COMPLETED');
    const active = await run(concierge, 'book a table', 'TASK_STATE_INPUT_REQUIRED');
    const liveParent = await run(concierge, 'research tides', 'TASK_STATE_INPUT_REQUIRED');
    const waitingChild = await childOf(liveParent);
    const keptForever = await run(keeper, 'summarize four', 'TASK_STATE_COMPLETED');
    const otherOrg = await run(otherHelper, 'summarize five', 'TASK_STATE_COMPLETED');
    for (const id of [...expired, active, liveParent, waitingChild, keptForever, otherOrg]) await age(id, 45);
    await age(recent, 10);
    await pushConfig(expired[0]!);
    await pushConfig(active);

    const staying = [recent, active, liveParent, waitingChild, keptForever, otherOrg];
    const before = await rowsOf(staying);
    const expiredBefore = await rowsOf(expired);
    expect(expiredBefore.runs).toBe(4);
    expect(expiredBefore.run_events).toBeGreaterThan(0);
    // each run's user messages have their keys (the agent's have none): removed with them, row by row
    expect(expiredBefore.messages).toBeGreaterThan(expiredBefore.message_keys!);
    expect(expiredBefore.message_keys).toBeGreaterThanOrEqual(3);
    expect(expiredBefore.artifacts).toBeGreaterThan(0);
    expect(expiredBefore.push_deliveries).toBe(1);
    expect(expiredBefore.run_links).toBe(1);

    const retention = a.worker!.get(RunRetention, { strict: false });
    const pass = await retention.pass();
    expect(pass).toEqual({ removed: 4, partitionsDropped: 0, outcome: 'done' });
    expect(await rowsOf(expired)).toEqual(Object.fromEntries(Object.keys(expiredBefore).map((k) => [k, 0])));
    expect(await rowsOf(staying)).toEqual(before);
    // the live parent still reads whole, its child with it
    const view = await adminRequest(a.baseUrl, a.adminKey, 'GET', `/v1/runs/${liveParent}`);
    expect(view.status).toBe(200);
    expect((await adminRequest(a.baseUrl, a.adminKey, 'GET', `/v1/runs/${expired[0]}`)).status).toBe(404);

    // archived before removal (RETENTION_ARCHIVE_DIR): the export's format, exactly the removed runs,
    // and the archive restores into an empty organization
    const orgId = (await adminRequest(a.baseUrl, a.adminKey, 'GET', '/v1/organization')).body.id as string;
    const files = await readdir(path.join(archiveDir, orgId));
    expect(files).toHaveLength(1);
    const archive = await readFile(path.join(archiveDir, orgId, files[0]!), 'utf8');
    const lines = archive.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
    expect(new Set(lines.map((l) => l.run.id))).toEqual(new Set(expired));
    for (const l of lines) expect(l.events).toHaveLength(l.run.last_sequence);
    const fresh = await startStack({ worker: false });
    try {
      await publishAgent(fresh.baseUrl, fresh.adminKey, { slug: 'helper', runtime: HELPER });
      await publishAgent(fresh.baseUrl, fresh.adminKey, { slug: 'concierge', runtime: CONCIERGE });
      const restored = await adminRequest(fresh.baseUrl, fresh.adminKey, 'POST', '/v1/run-archive', archive, { 'content-type': 'application/x-ndjson' });
      expect(restored.body).toEqual({ runs: 4, events: expiredBefore.run_events, linksSkipped: 0 });
    } finally {
      await fresh.close();
    }

    // nothing more to do
    expect(await retention.pass()).toEqual({ removed: 0, partitionsDropped: 0, outcome: 'done' });

    // once the parent ends, its expired child goes at the next pass (and the parent when it expires)
    await adminRequest(a.baseUrl, a.adminKey, 'POST', `/v1/runs/${liveParent}/cancel`, {});
    expect((await retention.pass()).removed).toBe(1);
    expect((await rowsOf([waitingChild])).runs).toBe(0);
    expect((await rowsOf([liveParent])).runs).toBe(1);
  });

  it('runs one at a time across the cluster: a pass skips while another holds the lock', async () => {
    const retention = a.worker!.get(RunRetention, { strict: false });
    const outcome = await db.transaction(async (q) => {
      await q(`SELECT pg_advisory_xact_lock(hashtextextended('aaas.run-retention', 0))`);
      return retention.pass();
    });
    expect(outcome).toEqual({ removed: 0, partitionsDropped: 0, outcome: 'skipped' });
  });

  it('the log stays append-only for everything else: DELETE and UPDATE are refused', async () => {
    const [row] = await db.query<{ run_id: string }>('SELECT run_id FROM run_events LIMIT 1');
    await expect(db.query('DELETE FROM run_events WHERE run_id = $1', [row!.run_id])).rejects.toThrow(/append-only/);
    await expect(db.query(`UPDATE run_events SET type = type WHERE run_id = $1`, [row!.run_id])).rejects.toThrow(/append-only/);
    // nor through a run: the cascade from runs hits the same guard
    await expect(db.query('DELETE FROM runs WHERE id = $1', [row!.run_id])).rejects.toThrow(/append-only/);
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs WHERE id = $1', [row!.run_id]))[0]!.n).toBe(1);
    // a setting that is not 'on' opens nothing
    await expect(db.transaction(async (q) => {
      await q(`SELECT set_config('aaas.retention', 'off', true)`);
      await q('DELETE FROM run_events WHERE run_id = $1', [row!.run_id]);
    })).rejects.toThrow(/append-only/);
  });
});
