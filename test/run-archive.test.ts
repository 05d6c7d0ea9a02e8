import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { TEST_DATABASE_URL } from './support/env.js';
// @ts-expect-error -- a plain .mjs script without type declarations (scripts/conversion-db.mjs)
import { dropDatabase as dropDatabaseJs } from '../scripts/conversion-db.mjs';
import { startStack, type Stack } from './support/stack.js';

/**
 * Run archives (docs/architecture.md "Archives"): export an organization's runs with their whole
 * log as JSON Lines, resume by cursor without duplicates or gaps, filter, and re-import into an
 * empty organization of another deployment (its own PostgreSQL database) so that everything reads
 * back identically — the admin run views, the event logs (same sequences) and GetTask through the
 * official `@a2a-js/sdk` client. Import refuses an organization that has runs, a run that exists,
 * and a bad archive, and writes nothing then. The CLI (`aaas runs export` / `import`) does the
 * same over the same endpoints.
 */
const execFileP = promisify(execFile);
const CLI = 'dist/apps/cli/src/main.js';

const CONCIERGE = {
  kind: 'scripted',
  rules: [
    { name: 'book', match: { text: '^book' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'Booked for {{input}}' }] },
    {
      name: 'research',
      match: { text: '^research' },
      steps: [
        { type: 'status', status: 'working', message: 'Asking the helper' },
        { type: 'delegate', agent: 'helper', text: 'summarize {{input}}' },
        { type: 'message', text: 'Result: {{result}}' },
      ],
    },
  ],
};
const HELPER = {
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
    { name: 'fail', match: { text: '^fail' }, steps: [{ type: 'status', status: 'failed', message: 'cannot' }] },
  ],
};

/** The deployment the archive is restored into: a database of its own, migrated like the test one. */
const IMPORT_DATABASE_URL = (() => {
  const u = new URL(TEST_DATABASE_URL);
  u.pathname = `${u.pathname}_import`;
  return u.toString();
})();

let a: Stack; // the source deployment
let b: Stack; // another deployment: its organization has the same agents and no runs
let c: Stack; // a second organization in the source's database
const agentsA: Record<string, PublishedAgent> = {};
const agentsB: Record<string, PublishedAgent> = {};
let dir: string;
const runIds: string[] = [];

const state = (t: Task) => taskStateToJSON(t.status!.state);
function send(text: string, taskId?: string) {
  return SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...(taskId ? { taskId } : {}) } });
}
async function sendTask(cl: A2AClient, text: string, taskId?: string): Promise<Task> {
  const r = await cl.sendMessage(send(text, taskId));
  expect('messageId' in r, 'expected a Task').toBe(false);
  return r as Task;
}
async function waitFor(cl: A2AClient, id: string, want: string[]): Promise<Task> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const t = await cl.getTask({ tenant: '', id, historyLength: undefined });
    if (want.includes(state(t))) return t;
    if (Date.now() > deadline) throw new Error(`task ${id} is ${state(t)}, wanted ${want.join('|')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The raw archive text of GET /v1/run-archive?<query> (status asserted 200). */
async function exportText(stack: Stack, query = ''): Promise<string> {
  const res = await fetch(`${stack.baseUrl}/v1/run-archive${query ? `?${query}` : ''}`, { headers: { authorization: `Bearer ${stack.adminKey}` } });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
  return text;
}
const linesOf = (text: string) => text.split('\n').filter((l) => l.length > 0);
const parsed = (text: string) => linesOf(text).map((l) => JSON.parse(l) as { cursor: string; agent: { slug: string }; run: { id: string; status: string; created_at: string; last_sequence: number }; events: Array<{ sequence: number }>; links: unknown[]; messages: unknown[]; artifacts: unknown[]; interactions: unknown[] });

async function importText(stack: Stack, body: string) {
  return adminRequest(stack.baseUrl, stack.adminKey, 'POST', '/v1/run-archive', body, { 'content-type': 'application/x-ndjson' });
}

async function aaas(stack: Stack, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await execFileP(process.execPath, [CLI, '--url', stack.baseUrl, '--key', stack.adminKey, ...args], { timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

/** Replace every id of a source-org agent or revision in `value` by the target org's (the only ids an import remaps). */
function remapped(value: unknown): unknown {
  let text = JSON.stringify(value);
  for (const slug of Object.keys(agentsA)) {
    text = text.replaceAll(agentsA[slug]!.agentId, agentsB[slug]!.agentId).replaceAll(agentsA[slug]!.revisionId, agentsB[slug]!.revisionId);
  }
  return JSON.parse(text);
}

beforeAll(async () => {
  execFileSync(process.execPath, ['scripts/migrate.mjs', '--reset'], { stdio: 'ignore', env: { ...process.env, DATABASE_URL: IMPORT_DATABASE_URL } });
  dir = await mkdtemp(path.join(tmpdir(), 'aaas-archive-'));
  a = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  b = await startStack({ worker: false, env: { DATABASE_URL: IMPORT_DATABASE_URL } });
  c = await startStack({ worker: false });
  for (const [slug, runtime] of [['helper', HELPER], ['concierge', CONCIERGE]] as const) {
    agentsA[slug] = await publishAgent(a.baseUrl, a.adminKey, { slug, runtime });
    agentsB[slug] = await publishAgent(b.baseUrl, b.adminKey, { slug, runtime });
    await publishAgent(c.baseUrl, c.adminKey, { slug, runtime });
  }
  const concierge = await new ClientFactory().createFromUrl(`${a.baseUrl}${agentsA.concierge!.basePath}/`);
  const helper = await new ClientFactory().createFromUrl(`${a.baseUrl}${agentsA.helper!.basePath}/`);
  // delegations (parent + child with artifacts), an answered interaction, an open one, a failure
  for (const text of ['research tides', 'research moons']) runIds.push((await waitFor(concierge, (await sendTask(concierge, text)).id, ['TASK_STATE_COMPLETED'])).id);
  const booked = await waitFor(concierge, (await sendTask(concierge, 'book a table')).id, ['TASK_STATE_INPUT_REQUIRED']);
  await sendTask(concierge, 'Monday', booked.id);
  runIds.push((await waitFor(concierge, booked.id, ['TASK_STATE_COMPLETED'])).id);
  runIds.push((await waitFor(concierge, (await sendTask(concierge, 'book a room')).id, ['TASK_STATE_INPUT_REQUIRED'])).id);
  runIds.push((await waitFor(helper, (await sendTask(helper, 'fail now')).id, ['TASK_STATE_FAILED'])).id);
  for (let i = 0; i < 4; i++) runIds.push((await waitFor(helper, (await sendTask(helper, `summarize part ${i}`)).id, ['TASK_STATE_COMPLETED'])).id);
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.close(), b?.close(), c?.close()]);
  // the deployment the archive was restored into goes with the file (it was left behind on every run)
  await (dropDatabaseJs as (url: string) => Promise<void>)(IMPORT_DATABASE_URL);
});

describe('export', () => {
  it("streams every run of the organization once, oldest first, each with its whole log and its projections", async () => {
    const lines = parsed(await exportText(a));
    const list = await adminRequest<{ runs: Array<{ id: string }> }>(a.baseUrl, a.adminKey, 'GET', '/v1/runs?limit=100');
    // the 9 runs sent + the 2 children the research runs delegated to
    expect(lines).toHaveLength(11);
    expect(new Set(lines.map((l) => l.run.id))).toEqual(new Set(list.body.runs.map((r) => r.id)));
    for (const id of runIds) expect(lines.some((l) => l.run.id === id)).toBe(true);
    const keys = lines.map((l) => `${new Date(l.run.created_at).toISOString()} ${l.run.id}`);
    expect(keys).toEqual([...keys].sort());
    for (const l of lines) expect(l.events.map((e) => e.sequence)).toEqual(Array.from({ length: l.run.last_sequence }, (_, i) => i + 1));
    expect(lines.filter((l) => l.links.length > 0)).toHaveLength(2);
    expect(lines.some((l) => l.artifacts.length > 0 && l.interactions.length === 0)).toBe(true);
    expect(lines.filter((l) => l.interactions.length > 0)).toHaveLength(2);
    expect(JSON.stringify(lines)).not.toContain(a.orgSlug);
  });

  it('resumes after any line by its cursor: the pieces put together are the whole archive, no duplicate, no gap', async () => {
    const full = linesOf(await exportText(a));
    for (const cut of [1, 4, 10]) {
      const head = linesOf(await exportText(a, `limit=${cut}`));
      expect(head).toEqual(full.slice(0, cut));
      const tail = linesOf(await exportText(a, `cursor=${encodeURIComponent(JSON.parse(head.at(-1)!).cursor)}`));
      expect([...head, ...tail]).toEqual(full);
    }
    const last = JSON.parse(full.at(-1)!).cursor;
    expect(await exportText(a, `cursor=${encodeURIComponent(last)}`)).toBe('');
  });

  it('filters by agent, status and creation time', async () => {
    const all = parsed(await exportText(a));
    const helperOnly = parsed(await exportText(a, `agentId=${agentsA.helper!.agentId}`));
    expect(helperOnly.map((l) => l.run.id)).toEqual(all.filter((l) => l.agent.slug === 'helper').map((l) => l.run.id));
    const ended = parsed(await exportText(a, 'status=failed,completed'));
    expect(ended.map((l) => l.run.id)).toEqual(all.filter((l) => ['failed', 'completed'].includes(l.run.status)).map((l) => l.run.id));
    expect(ended.length).toBeLessThan(all.length);
    const from = all[3]!.run.created_at;
    const to = all[7]!.run.created_at;
    const window = parsed(await exportText(a, `createdFrom=${encodeURIComponent(new Date(from).toISOString())}&createdTo=${encodeURIComponent(new Date(to).toISOString())}`));
    expect(window.map((l) => l.run.id)).toEqual(all.filter((l) => Date.parse(l.run.created_at) >= Date.parse(from) && Date.parse(l.run.created_at) < Date.parse(to)).map((l) => l.run.id));
  });

  it('is scoped to the caller organization and refuses a forged cursor', async () => {
    expect(await exportText(c)).toBe('');
    const bad = await adminRequest(a.baseUrl, a.adminKey, 'GET', '/v1/run-archive?cursor=bm90LWEtY3Vyc29y');
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('request.invalid');
    expect((await adminRequest(a.baseUrl, null, 'GET', '/v1/run-archive')).status).toBe(401);
  });
});

describe('import', () => {
  it('refuses an organization that has runs, and writes nothing', async () => {
    const archive = await exportText(a);
    const r = await importText(a, archive);
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('archive.org_not_empty');
    expect(await exportText(a)).toBe(archive);
  });

  it('refuses runs that exist in the deployment, a bad line, an unknown agent: 4xx with the line, and the organization stays empty', async () => {
    const archive = await exportText(a);
    const taken = await importText(c, archive);
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe('archive.conflict');
    const garbage = await importText(c, `${linesOf(archive)[0]}\nnot json\n`);
    expect(garbage.status).toBe(422);
    expect(garbage.body.error).toMatchObject({ code: 'archive.invalid', details: { line: 2 } });
    const first = JSON.parse(linesOf(archive)[0]!);
    const unknown = await importText(c, JSON.stringify({ ...first, agent: { slug: 'nobody', revision: 1 } }));
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.message).toMatch(/no agent 'nobody'/);
    const torn = await importText(c, JSON.stringify({ ...first, events: first.events.slice(1) }));
    expect(torn.status).toBe(422);
    expect(torn.body.error.message).toMatch(/sequences 1\.\./);
    // refused at its first line, a large body still gets its answer (the rest is drained, not reset)
    const big = await importText(c, `not json\n${'{"v":1}\n'.repeat(1_000_000)}`);
    expect(big.status).toBe(422);
    expect(big.body.error).toMatchObject({ code: 'archive.invalid', details: { line: 1 } });
    const json = await adminRequest(c.baseUrl, c.adminKey, 'POST', '/v1/run-archive', { not: 'an archive' });
    expect(json.status).toBe(415);
    expect(await exportText(c)).toBe('');
  });

  it('aaas runs export → aaas runs import into an empty organization elsewhere reads back identically', async () => {
    const file = path.join(dir, 'runs.jsonl');
    const exported = await aaas(a, 'runs', 'export', '--output', file);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stderr).toContain('exported 11 runs');
    const archive = await readFile(file, 'utf8');
    expect(archive).toBe(await exportText(a));

    const imported = await aaas(b, '--json', 'runs', 'import', file);
    expect(imported.code, imported.stderr).toBe(0);
    const totalEvents = parsed(archive).reduce((n, l) => n + l.events.length, 0);
    expect(JSON.parse(imported.stdout)).toEqual({ runs: 11, events: totalEvents, linksSkipped: 0 });

    // the target's own archive is the same text: rows, logs (same sequences), projections, cursors
    expect(await exportText(b)).toBe(archive);
    // the keys of the user messages are derived, not archived: the import writes them as the append
    // path did (same senders, messageIds, runs and message rows; the agent's messages have none)
    const ids = parsed(archive).map((l) => l.run.id);
    const keysOf = (s: Stack) =>
      s.api.get(DatabaseService).query<{ sentBy: string; messageId: string; runId: string; messageRowId: string }>(
        `SELECT sent_by AS "sentBy", message_id AS "messageId", run_id AS "runId", message_row_id AS "messageRowId" FROM message_keys WHERE run_id = ANY($1::uuid[]) ORDER BY 3, 2, 1`,
        [ids],
      );
    const userMessages = parsed(archive).flatMap((l) => (l.messages as Array<{ sent_by: string }>).filter((m) => m.sent_by !== 'agent'));
    const [keysA, keysB] = await Promise.all([keysOf(a), keysOf(b)]);
    expect(keysA).toHaveLength(userMessages.length);
    expect(keysA.length).toBeGreaterThan(0);
    expect(keysB).toEqual(keysA);
    // the admin views (run, interactions, links) and the logs, agent and revision ids mapped
    for (const l of parsed(archive)) {
      const [va, vb] = await Promise.all([adminRequest(a.baseUrl, a.adminKey, 'GET', `/v1/runs/${l.run.id}`), adminRequest(b.baseUrl, b.adminKey, 'GET', `/v1/runs/${l.run.id}`)]);
      expect(vb.status).toBe(200);
      expect(vb.body).toEqual(remapped(va.body));
      const [ea, eb] = await Promise.all([adminRequest(a.baseUrl, a.adminKey, 'GET', `/v1/runs/${l.run.id}/events?limit=1000`), adminRequest(b.baseUrl, b.adminKey, 'GET', `/v1/runs/${l.run.id}/events?limit=1000`)]);
      expect(eb.body).toEqual(ea.body);
      expect(eb.body.events.map((e: { sequence: number }) => e.sequence)).toEqual(Array.from({ length: l.run.last_sequence }, (_, i) => i + 1));
    }
    // GetTask through the official SDK client, on both deployments
    for (const slug of ['concierge', 'helper']) {
      const [ca, cb] = await Promise.all([
        new ClientFactory().createFromUrl(`${a.baseUrl}${agentsA[slug]!.basePath}/`),
        new ClientFactory().createFromUrl(`${b.baseUrl}${agentsB[slug]!.basePath}/`),
      ]);
      for (const l of parsed(archive).filter((x) => x.agent.slug === slug)) {
        const [ta, tb] = await Promise.all([ca.getTask({ tenant: '', id: l.run.id, historyLength: undefined }), cb.getTask({ tenant: '', id: l.run.id, historyLength: undefined })]);
        expect(Task.toJSON(tb)).toEqual(remapped(Task.toJSON(ta)));
      }
    }
    // and now it has runs: a second import is refused
    const again = await aaas(b, 'runs', 'import', file);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('archive.org_not_empty');
  });

  it('aaas runs export --resume continues a torn file after its last complete line', async () => {
    const full = await exportText(a);
    const file = path.join(dir, 'torn.jsonl');
    const lines = linesOf(full);
    await writeFile(file, `${lines.slice(0, 5).join('\n')}\n${lines[5]!.slice(0, 40)}`);
    const r = await aaas(a, 'runs', 'export', '--output', file, '--resume');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('exported 6 runs');
    expect(await readFile(file, 'utf8')).toBe(full);
  });
});
