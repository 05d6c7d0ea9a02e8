import { randomUUID } from 'node:crypto';
import { Role, TaskState, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { RunExecutionQueue } from '#libs/runs';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { publishAgent } from './support/admin-client.js';
import { TestRedis } from './support/redis-server.js';
import { startStack, type Stack } from './support/stack.js';
import { runsOf } from './support/runs.js';

/**
 * The transactional outbox: a run's dispatch is recorded with the run and relayed to BullMQ later,
 * so nothing on the request path waits on Redis, and nothing is lost or doubled.
 */
const state = (t: Task) => taskStateToJSON(t.status!.state);

function send(client: Client, text: string, returnImmediately: boolean) {
  return client.sendMessage({
    tenant: '',
    message: { messageId: randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }] } as never,
    configuration: returnImmediately ? ({ returnImmediately: true } as never) : undefined,
  } as never) as Promise<Task>;
}

describe('outbox: SendMessage while Redis is down', () => {
  let redis: TestRedis;
  let stack: Stack;
  let client: Client;

  beforeAll(async () => {
    redis = await TestRedis.start();
    stack = await startStack({ env: { REDIS_URL: redis.url, OUTBOX_RELAY_INTERVAL_MS: '100', A2A_BLOCKING_TIMEOUT_MS: '1500' } });
    const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
    client = await new ClientFactory().createFromUrl(`${stack.baseUrl}${echo.basePath}/`);
  });
  afterAll(async () => {
    // the stack closes its Redis connections cleanly only while its Redis is up
    await redis?.start().catch(() => undefined);
    await stack?.close();
    await redis?.stop();
  });

  it('answers in both modes with Redis stopped, and every accepted run completes once Redis is back', async () => {
    expect(state(await send(client, 'warm up', false))).toBe('TASK_STATE_COMPLETED');
    await redis.stop();

    const t0 = Date.now();
    const accepted = await send(client, 'accepted while down', true);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(state(accepted)).toBe('TASK_STATE_SUBMITTED');

    const t1 = Date.now();
    const blocking = await send(client, 'blocking while down', false);
    const waited = Date.now() - t1;
    // the blocking call waits its timeout (1.5 s), then returns the task as it is
    expect(waited).toBeGreaterThanOrEqual(1_400);
    expect(waited).toBeLessThan(6_000);
    expect(state(blocking)).toBe('TASK_STATE_SUBMITTED');

    const pending = await stack.api.get(DatabaseService).query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches WHERE run_id = ANY($1::uuid[])', [[accepted.id, blocking.id]]);
    expect(Number(pending[0]!.n)).toBe(2);

    await redis.start();
    for (const id of [accepted.id, blocking.id]) {
      await expect
        .poll(async () => state(await client.getTask({ tenant: '', id, historyLength: undefined } as never)), { timeout: 20_000, interval: 200 })
        .toBe(taskStateToJSON(TaskState.TASK_STATE_COMPLETED));
      const task = await client.getTask({ tenant: '', id, historyLength: undefined } as never);
      expect(task.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);
    }
  });
});

describe('outbox: two API instances relaying one outbox', () => {
  let redis: TestRedis;
  let stack: Stack;
  const extra: Array<{ close(): Promise<void> }> = [];

  afterEach(async () => {
    for (const x of extra.splice(0)) await x.close();
    await stack?.close();
    await redis?.stop();
  });

  it('dispatches each run exactly once', async () => {
    redis = await TestRedis.start();
    const env = { REDIS_URL: redis.url, OUTBOX_RELAY_INTERVAL_MS: '50', OUTBOX_RELAY_BATCH: '3' };
    stack = await startStack({ env });
    const second = await createApiApp(stack.env);
    await second.init();
    extra.push(second);
    const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
    const db = stack.api.get(DatabaseService);
    const org = await db.query<{ id: string }>('SELECT org_id AS id FROM agents WHERE id = $1', [echo.agentId]);
    const orgId = org[0]!.id;

    // Redis down: both instances accept runs, whose dispatches wait in the outbox
    await redis.stop();
    const a = runsOf(stack.api);
    const b = runsOf(second);
    const N = 40;
    const created = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        (i % 2 ? a : b).createRun({ orgId, agentId: echo.agentId, revisionId: echo.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: `n${i}` }] } }),
      ),
    );
    const ids = created.map((c) => c.run.id);
    expect(Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches WHERE run_id = ANY($1::uuid[])', [ids]))[0]!.n)).toBe(N);

    // Redis back: both relays race over the same rows
    await redis.start();
    for (const id of ids) {
      await expect.poll(async () => (await a.getRun(orgId, id))!.status, { timeout: 20_000, interval: 100 }).toBe('completed');
    }
    for (const id of ids) {
      const events = await a.readEvents(orgId, id, 0);
      // one execution: exactly one working → echo → completed
      expect(events.map((e) => e.event.type)).toEqual(['run.created', 'message.added', 'run.status_changed', 'message.added', 'run.status_changed']);
    }
    expect(Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches WHERE run_id = ANY($1::uuid[])', [ids]))[0]!.n)).toBe(0);
    // jobs carry batches (and deferred parts of batches), so their number is not the runs': what
    // counts is above (each run executed once, its dispatch claimed) and that no job failed
    const counts = await stack.api.get(RunExecutionQueue).queue.getJobCounts('completed', 'failed');
    expect(counts.completed).toBeGreaterThan(0);
    expect(counts.failed).toBe(0);
  });
});

describe('outbox: the fast path coalesces its enqueues', () => {
  let stack: Stack;

  beforeAll(async () => {
    // no worker: the jobs stay in the queue to be looked at
    stack = await startStack({ worker: false, env: { DISPATCH_COALESCE_MS: '1000' } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('sends the first dispatch after a quiet spell at once, and those committed within DISPATCH_COALESCE_MS of it as one job', async () => {
    const db = stack.api.get(DatabaseService);
    const echo = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'echo' });
    const orgId = (await db.query<{ id: string }>('SELECT org_id AS id FROM agents WHERE id = $1', [echo.agentId]))[0]!.id;
    const runs = runsOf(stack.api);
    const create = (text: string) =>
      runs.createRun({ orgId, agentId: echo.agentId, revisionId: echo.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
    const queue = stack.api.get(RunExecutionQueue).queue;
    // the test database is shared: this stack's relay also re-sends dispatches earlier files left
    // behind, so only jobs carrying this test's runs are counted
    const ours = new Set<string>();
    const sizes = async () =>
      (await queue.getJobs(['waiting']))
        .map((j) => j.data.dispatches.filter((d) => ours.has((d.job as { runId: string }).runId)).length)
        .filter((n) => n > 0)
        .sort((x, y) => x - y);
    const track = async (text: string) => {
      const created = await create(text);
      ours.add(created.run.id);
      return created;
    };

    const first = await track('first');
    await expect.poll(sizes, { timeout: 5_000, interval: 20 }).toEqual([1]);
    // one after the other (separate commits, separate event-loop turns), within the window
    const later = [];
    for (let i = 0; i < 5; i++) later.push(await track(`later ${i}`));
    await expect.poll(sizes, { timeout: 5_000, interval: 20 }).toEqual([1, 5]);
    const carried = (await queue.getJobs(['waiting'])).flatMap((j) => j.data.dispatches.map((d) => (d.job as { runId: string }).runId)).filter((id) => ours.has(id));
    expect(carried.sort()).toEqual([first, ...later].map((c) => c.run.id).sort());
  });
});
