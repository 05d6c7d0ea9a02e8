import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { WorkerMetricsServer } from '../apps/worker/src/metrics.server.js';

/** Prometheus `/metrics` on the API and the worker: the named series exist and move when a task runs. */
let stack: Stack;
let workerMetricsUrl: string;
let endpoint: string;

/** Sum of a series' samples whose labels include every given pair. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:]+)(\{[^}]*\})? ([0-9.eE+-]+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}

const scrape = async (url: string) => {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
};

beforeAll(async () => {
  // cards of other test files in this database may claim push notifications: the worker's
  // readiness also says whether it can deliver them (tested in card-claims), so it can here
  stack = await startStack({ env: { WORKER_METRICS_PORT: '0', PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret' } });
  workerMetricsUrl = `http://127.0.0.1:${stack.worker!.get(WorkerMetricsServer).port}/metrics`;
  const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
  endpoint = `${stack.baseUrl}${echo.basePath}`;
});
afterAll(async () => {
  await stack?.close();
});

describe('worker health', () => {
  it('the worker port also answers /healthz and /readyz', async () => {
    const base = workerMetricsUrl.replace(/\/metrics$/, '');
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ok', details: { postgresql: { status: 'up' }, migrations: { status: 'up' }, redis: { status: 'up' }, pushClaims: { status: 'up' } } });
  });
});

describe('metrics', () => {
  it('exposes the named series on the API and the worker, and they move when a task runs', async () => {
    const apiBefore = await scrape(`${stack.baseUrl}/metrics`);
    const workerBefore = await scrape(workerMetricsUrl);
    for (const name of ['aaas_http_requests_total', 'aaas_http_request_duration_seconds_bucket', 'aaas_open_streams', 'aaas_outbox_pending', 'aaas_queue_jobs', 'aaas_process_cpu_user_seconds_total', 'aaas_nodejs_eventloop_lag_seconds']) {
      expect(apiBefore, name).toContain(name);
    }
    for (const name of ['aaas_executions_total', 'aaas_execution_duration_seconds_bucket', 'aaas_job_wait_seconds_bucket']) expect(workerBefore, name).toContain(name);

    const res = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'count me' }] } } }),
    });
    const body = (await res.json()) as { result: { task: { status: { state: string } } } };
    expect(body.result.task.status.state).toBe('TASK_STATE_COMPLETED');

    const api = await scrape(`${stack.baseUrl}/metrics`);
    const worker = await scrape(workerMetricsUrl);
    expect(sample(api, 'aaas_http_requests_total', { surface: 'a2a', operation: 'SendMessage', status: '2xx' })).toBe(
      sample(apiBefore, 'aaas_http_requests_total', { surface: 'a2a', operation: 'SendMessage', status: '2xx' }) + 1,
    );
    expect(sample(api, 'aaas_run_status_changes_total', { status: 'submitted' })).toBeGreaterThan(sample(apiBefore, 'aaas_run_status_changes_total', { status: 'submitted' }));
    expect(sample(api, 'aaas_outbox_relayed_total')).toBeGreaterThan(sample(apiBefore, 'aaas_outbox_relayed_total'));
    expect(sample(worker, 'aaas_executions_total', { outcome: 'ok' })).toBeGreaterThan(sample(workerBefore, 'aaas_executions_total', { outcome: 'ok' }));
    expect(sample(worker, 'aaas_run_status_changes_total', { status: 'completed' })).toBeGreaterThan(sample(workerBefore, 'aaas_run_status_changes_total', { status: 'completed' }));
    expect(sample(worker, 'aaas_run_events_appended_total', { type: 'message.added' })).toBeGreaterThan(0);

    // an unknown JSON-RPC method or a random path never becomes a label value
    await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: `x-${randomUUID()}` }) });
    await fetch(`${stack.baseUrl}/nope/${randomUUID()}`);
    const after = await scrape(`${stack.baseUrl}/metrics`);
    expect(after).not.toMatch(/x-[0-9a-f]{8}-/);
    expect(after).not.toMatch(/nope\/[0-9a-f]{8}/);
  });
});
