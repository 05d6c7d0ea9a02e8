import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushDeliveryService } from '#libs/a2a';
import { DatabaseService } from '#libs/db';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { sendMessageRpc } from './support/a2a-rpc.js';
import { observeQueries } from './support/db-spy.js';
import { startPushReceiver } from './support/push-receiver.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The push delivery loop's claims (PushDeliveryService): the configs woken in one event-loop turn
 * — here every config one sweep finds due — share ONE claim statement, started at the end of that
 * turn. A claim started at the first wake-up would go out with that config alone, and so would the
 * next ones while claim slots are free. Real PostgreSQL, Redis and HTTP; the worker's own sweep
 * timer is out of the way (an hour), so the test's sweep is the only one.
 */
const N = 8;
let stack: Stack;
let agent: PublishedAgent;
let failing = true;
let receiver: Awaited<ReturnType<typeof startPushReceiver>>;

beforeAll(async () => {
  receiver = await startPushReceiver(() => ({ status: failing ? 500 : 200 }));
  stack = await startStack({
    env: {
      PUSH_ENCRYPTION_SECRET: 'test-only-push-encryption-secret',
      PUSH_ALLOWED_CIDRS: '127.0.0.0/8',
      PUSH_SWEEP_INTERVAL_MS: '3600000',
      // a failed config waits far longer than the test: due again only when the test says so
      PUSH_RETRY_BASE_MS: '600000',
      PUSH_RETRY_MAX_DELAY_MS: '600000',
      PUSH_TIMEOUT_MS: '2000',
    },
  });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, {
    slug: 'claims',
    runtime: { kind: 'scripted', rules: [{ name: 'done', match: { text: '.*' }, steps: [{ type: 'status', status: 'completed', message: 'Done' }] }] },
    transports: ['JSONRPC'],
    a2a: { capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false } },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await receiver?.close();
});

describe('push claims', () => {
  it('the configs one sweep finds due are claimed by one statement', async () => {
    const db = stack.worker!.get(DatabaseService);
    const runIds: string[] = [];
    for (let i = 0; i < N; i++) {
      const { body } = await sendMessageRpc(`${stack.baseUrl}${agent.basePath}`, 'go', { configuration: { taskPushNotificationConfig: { url: receiver.url(`/c${i}`) } } });
      expect(body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
      runIds.push(body.result.task.id);
    }
    // every config tried once, failed, and now waits out its backoff
    const backedOff = async () =>
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM push_configs WHERE run_id = ANY($1::uuid[]) AND attempts >= 1 AND next_attempt_at > now() + interval '1 minute'`, [runIds]))[0]!.n;
    const deadline = Date.now() + 15_000;
    while ((await backedOff()) < N) {
      if (Date.now() > deadline) throw new Error('the configs did not all fail once');
      await new Promise((r) => setTimeout(r, 50));
    }
    const ids = (await db.query<{ id: string }>(`SELECT id FROM push_configs WHERE run_id = ANY($1::uuid[]) ORDER BY id`, [runIds])).map((r) => r.id);
    expect(ids).toHaveLength(N);

    failing = false;
    const since = Date.now();
    await db.query(`UPDATE push_configs SET next_attempt_at = now() - interval '1 second' WHERE id = ANY($1::uuid[])`, [ids]);
    const claims: string[][] = [];
    const stop = observeQueries(db, (name, values) => {
      if (name === 'push.claim_batch') claims.push([...(values![0] as string[])]);
      else if (name === 'push.claim_one') claims.push([values![0] as string]);
    });
    try {
      await stack.worker!.get(PushDeliveryService).sweep();
      await receiver.waitFor(() => runIds.every((_, i) => receiver.received.some((r) => r.path === `/c${i}` && r.at >= since && r.json.statusUpdate?.status?.state === 'TASK_STATE_COMPLETED')), 10_000);
    } finally {
      stop();
    }
    expect(claims.length).toBeGreaterThanOrEqual(1);
    // the test database is shared: a config an earlier file left due may be claimed beside this
    // test's, which must all be in the first claim statement
    expect([...claims[0]!].filter((id) => ids.includes(id)).sort()).toEqual(ids);
  }, 60_000);
});
