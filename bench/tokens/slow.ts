/**
 * The `slow` scenario: E executions at once against a slow backend (the NDJSON backend, 1 chunk
 * every `intervalMs`, `chunks` of them): E fire-and-forget `SendMessage`s (returnImmediately,
 * JSON-RPC v1.0) to ours' `http` agent, then, `settleS` after the last was accepted:
 * - progressing: runs with an `artifact.updated` event in the last 5 s (from the log), of E;
 * - executing: the backend's open answers (= executions of the worker waiting on it), and the most at once;
 * - worker RSS before the load and then, and (after − before) ÷ E: KB per waiting execution;
 * - errors: refused or failed SendMessages, and runs failed / rejected / canceled.
 * The runs are not drained (at the default caps that would take E ÷ slots × chunks × interval):
 * ours is stopped after the sample.
 */
import http from 'node:http';
import pg from 'pg';
import { inBatches } from '../lib/sse-client.js';
import { SAMPLER_ROLE, SAMPLER_TAG, withUser } from '../lib/own-services.js';
import { round, vmRssKb } from '../lib/stats.js';
import { startHttpTarget, type World } from './targets.js';

export interface SlowOptions {
  executions: number;
  chunks: number;
  intervalMs: number;
  /** Seconds after the last SendMessage was accepted before the sample. */
  settleS: number;
}

export interface SlowResult {
  executions: number;
  /** Seconds the E SendMessages took. */
  submitS: number;
  accepted: number;
  /** SendMessages refused (non-200, JSON-RPC error, connection error). */
  refused: number;
  /** Runs with an artifact chunk in the 5 s before the sample. */
  progressing: number;
  /** The backend's open answers at the sample, and the most at once. */
  executing: number;
  maxExecuting: number;
  /** Runs per status at the sample. */
  statuses: Record<string, number>;
  /** Runs failed, rejected or canceled at the sample. */
  failedRuns: number;
  workerRssKb: { before: number | null; after: number | null };
  apiRssKb: { before: number | null; after: number | null };
  /** (worker RSS after − before) ÷ E, KB. */
  rssKbPerExecution: number | null;
  /** (worker RSS after − before) ÷ executing, KB. */
  rssKbPerExecuting: number | null;
  errorSamples: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function post(agent: http.Agent, url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function backendStats(backendUrl: string): Promise<{ inFlight: number; maxInFlight: number }> {
  return (await (await fetch(backendUrl.replace(/\/run$/, '/stats'))).json()) as { inFlight: number; maxInFlight: number };
}

export async function runSlow(world: World, o: SlowOptions, log: (line: string) => void): Promise<SlowResult> {
  const target = await startHttpTarget(world);
  const ours = target.ours!;
  const db = new pg.Client({ connectionString: withUser(world.pg.url('aaas_bench'), SAMPLER_ROLE) });
  await db.connect();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 50 });
  const errors: string[] = [];
  try {
    await sleep(2_000);
    const workerBefore = vmRssKb(ours.worker?.pid);
    const apiBefore = vmRssKb(ours.api.pid);
    let accepted = 0;
    let refused = 0;
    const t0 = Date.now();
    await inBatches(o.executions, 50, async (i) => {
      const body = JSON.stringify({
        jsonrpc: '2.0', id: i, method: 'SendMessage',
        params: { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text: `slow ${i} n=${o.chunks} d=${o.intervalMs}` }] }, configuration: { returnImmediately: true } },
      });
      try {
        const res = await post(agent, target.url, body);
        if (res.status === 200 && !res.text.includes('"error"')) accepted++;
        else {
          refused++;
          if (errors.length < 5) errors.push(`HTTP ${res.status} ${res.text.slice(0, 200)}`);
        }
      } catch (e) {
        refused++;
        if (errors.length < 5) errors.push(String(e));
      }
    });
    const submitS = (Date.now() - t0) / 1000;
    log(`slow: ${accepted} of ${o.executions} accepted in ${round(submitS, 1)} s; sampling in ${o.settleS} s`);
    let maxExecuting = 0;
    for (let s = 0; s < o.settleS; s++) {
      await sleep(1_000);
      maxExecuting = Math.max(maxExecuting, (await backendStats(target.backendUrl!)).inFlight);
    }
    const stats = await backendStats(target.backendUrl!);
    const workerAfter = vmRssKb(ours.worker?.pid);
    const apiAfter = vmRssKb(ours.api.pid);
    const { rows: progress } = await db.query<{ n: number }>(
      `/* ${SAMPLER_TAG} */ SELECT count(DISTINCT run_id)::int AS n FROM run_events WHERE type = 'artifact.updated' AND created_at > now() - interval '5 seconds'`,
    );
    const { rows: statusRows } = await db.query<{ status: string; n: number }>(`/* ${SAMPLER_TAG} */ SELECT status::text AS status, count(*)::int AS n FROM runs GROUP BY status`);
    const statuses = Object.fromEntries(statusRows.map((r) => [r.status, r.n]));
    const grew = workerBefore !== null && workerAfter !== null ? workerAfter - workerBefore : null;
    return {
      executions: o.executions,
      submitS: round(submitS, 1),
      accepted,
      refused,
      progressing: progress[0]!.n,
      executing: stats.inFlight,
      maxExecuting: Math.max(maxExecuting, stats.maxInFlight),
      statuses,
      failedRuns: (statuses.failed ?? 0) + (statuses.rejected ?? 0) + (statuses.canceled ?? 0),
      workerRssKb: { before: workerBefore, after: workerAfter },
      apiRssKb: { before: apiBefore, after: apiAfter },
      rssKbPerExecution: grew === null ? null : round(grew / o.executions, 1),
      rssKbPerExecuting: grew === null || stats.inFlight === 0 ? null : round(grew / stats.inFlight, 1),
      errorSamples: errors,
    };
  } finally {
    agent.destroy();
    await db.end();
    await target.close();
  }
}
