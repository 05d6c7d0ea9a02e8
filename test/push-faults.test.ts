import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startPushReceiver } from './support/push-receiver.js';
import { TestRedis } from './support/redis-server.js';
import { startStack, type Stack } from './support/stack.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * Push delivery under process and Redis failures: a worker process killed (SIGKILL) while it
 * delivers, then restarted; the test's own Redis killed mid-run, then restarted. Either way the
 * receiver ends with every event of the task exactly once, in log order, after dedupe by
 * `webhook-id`.
 */
const RUNTIME = {
  kind: 'scripted',
  rules: [
    { name: 'burst', match: { text: '^burst' }, steps: [{ type: 'status', status: 'working' }, { type: 'artifact', artifactId: 'a', content: { text: 'x'.repeat(40) }, chunks: 40 }, { type: 'status', status: 'completed' }] },
    {
      name: 'paced',
      match: { text: '^paced' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'artifact', artifactId: 'a', content: { text: 'abcdefghij' }, chunks: 10 },
        { type: 'wait', ms: 700 },
        { type: 'artifact', artifactId: 'b', content: { text: 'klmnopqrst' }, chunks: 10 },
        { type: 'wait', ms: 700 },
        { type: 'status', status: 'completed', message: 'done' },
      ],
    },
  ],
};

let redis: TestRedis;
let stack: Stack;
let agent: PublishedAgent;
let worker: ChildProcess | undefined;
let receiver: Awaited<ReturnType<typeof startPushReceiver>>;
let delayMs = 0;

function startWorker(env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error', ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function send(text: string, path: string): Promise<string> {
  const { body } = await sendMessageRpc(`${stack.baseUrl}${agent.basePath}`, text, { returnImmediately: true, configuration: { taskPushNotificationConfig: { url: receiver.url(path) } } });
  return body.result.task.id;
}

async function projected(runId: string): Promise<number[]> {
  const r = await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${runId}/events?limit=1000`);
  return (r.body.events as Array<{ sequence: number; event: { type: string; payload: any } }>)
    .filter((e) => e.event.type !== 'run.created' && !(e.event.type === 'message.added' && e.event.payload.message.role === 'user'))
    .map((e) => e.sequence);
}

beforeAll(async () => {
  // a slow receiver (delayMs per answer) so a kill lands mid-delivery
  receiver = await startPushReceiver(() => ({ status: 200, delayMs }));
  redis = await TestRedis.start();
  stack = await startStack({
    worker: false,
    env: {
      REDIS_URL: redis.url,
      PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret',
      PUSH_ALLOWED_CIDRS: '127.0.0.0/8',
      PUSH_SWEEP_INTERVAL_MS: '100',
      PUSH_RETRY_BASE_MS: '50',
      PUSH_RETRY_MAX_DELAY_MS: '300',
      PUSH_TIMEOUT_MS: '1000',
      OUTBOX_RELAY_INTERVAL_MS: '100',
    },
  });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'pusher', runtime: RUNTIME, a2a: { capabilities: { streaming: false, pushNotifications: true, extendedAgentCard: false } } });
  worker = startWorker();
}, 60_000);

afterAll(async () => {
  if (worker && worker.exitCode === null) worker.kill('SIGKILL');
  await stack?.close();
  await redis?.stop();
  await receiver?.close();
});

describe('push delivery under failures', () => {
  it('a worker killed mid-delivery and restarted: every event exactly once, in order, after dedupe', async () => {
    // 50 ms per answer: the 42 deliveries take over 2 s, the run's execution far less, so the kill
    // lands in the deliveries, after the run completed (a killed execution is the sweeper's, not this test's)
    delayMs = 50;
    const runId = await send('burst please', '/kill');
    await expect.poll(async () => (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${runId}`)).body.run.status, { timeout: 20_000 }).toBe('completed');
    const want = await projected(runId);
    await receiver.waitFor(() => receiver.unique('/kill').length >= 8, 20_000);
    worker!.kill('SIGKILL');
    const atKill = receiver.unique('/kill').length;
    await new Promise((r) => setTimeout(r, 300));
    worker = startWorker();
    await receiver.waitFor(() => receiver.unique('/kill').length >= want.length, 30_000);
    const got = receiver.unique('/kill').map((r) => Number(r.headers['x-a2a-sequence']));
    expect(atKill).toBeLessThan(want.length);
    expect(got).toEqual(want);
  }, 60_000);

  it('Redis killed mid-run and restarted: deliveries go on from Postgres; every event exactly once, in order', async () => {
    delayMs = 0;
    const runId = await send('paced please', '/redis');
    await receiver.waitFor(() => receiver.unique('/redis').length >= 3, 20_000);
    await redis.stop();
    await new Promise((r) => setTimeout(r, 800));
    await redis.start();
    await expect.poll(async () => (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${runId}`)).body.run.status, { timeout: 30_000 }).toBe('completed');
    const want = await projected(runId);
    await receiver.waitFor(() => receiver.unique('/redis').length >= want.length, 30_000);
    expect(receiver.unique('/redis').map((r) => Number(r.headers['x-a2a-sequence']))).toEqual(want);
  }, 60_000);

  it('a worker that cannot read a config (another PUSH_ENCRYPTION_SECRET) records failed attempts and lives on; a worker that can delivers it all', async () => {
    delayMs = 0;
    worker!.kill('SIGKILL');
    await new Promise((r) => worker!.once('exit', r));
    worker = startWorker({ PUSH_ENCRYPTION_SECRET: 'another-deployments-push-encryption-secret' });
    const runId = await send('burst please', '/sealed');
    await expect.poll(async () => (await adminRequest(stack.baseUrl, stack.adminKey, 'GET', `/v1/runs/${runId}`)).body.run.status, { timeout: 20_000 }).toBe('completed');
    const db = stack.api.get(DatabaseService);
    await expect
      .poll(async () => (await db.query<{ e: string | null }>('SELECT last_error AS e FROM push_configs WHERE run_id = $1', [runId]))[0]?.e ?? '', { timeout: 20_000, interval: 100 })
      .toContain('cannot be read');
    expect(receiver.unique('/sealed')).toHaveLength(0);
    expect(worker.exitCode).toBeNull();
    worker.kill('SIGKILL');
    await new Promise((r) => worker!.once('exit', r));
    worker = startWorker();
    const want = await projected(runId);
    await receiver.waitFor(() => receiver.unique('/sealed').length >= want.length, 30_000);
    expect(receiver.unique('/sealed').map((r) => Number(r.headers['x-a2a-sequence']))).toEqual(want);
  }, 60_000);
});
