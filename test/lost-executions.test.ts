import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { LostExecutionPolicy } from '#libs/execution';
import { RuntimeOperations } from '#libs/runs';
import { publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * Execution leases: a worker process killed with SIGKILL mid-execution. With no worker alive and no
 * resumption allowed (EXECUTION_MAX_RESUMPTIONS=0), the API's sweeper fails the run whose lease
 * expired within 2 heartbeats; a run waiting on its caller is never failed for it.
 */
const HEARTBEAT_MS = 600;
const RULES = {
  kind: 'scripted',
  rules: [
    { match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { match: { text: '^ask' }, steps: [{ type: 'status', status: 'input-required', message: 'Which city?' }] },
  ],
};

let stack: Stack;
let agent: PublishedAgent;
let worker: ChildProcess;

beforeAll(async () => {
  // only leases detect losses here: the stale rule is pushed far away. No resumption budget: a
  // lost execution fails its run (scripted runs resume otherwise: test/scripted-resume.test.ts)
  stack = await startStack({ worker: false, env: { EXECUTION_HEARTBEAT_MS: String(HEARTBEAT_MS), RUN_SWEEP_INTERVAL_MS: String(HEARTBEAT_MS / 2), RUN_STALE_AFTER_MS: '600000', EXECUTION_MAX_RESUMPTIONS: '0' } });
  agent = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'holder', runtime: RULES });
  worker = spawn(process.execPath, ['dist/apps/worker/src/main.js'], { env: { ...process.env, ...stack.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
});
afterAll(async () => {
  if (worker && worker.exitCode === null) worker.kill('SIGKILL');
  await stack?.close();
});

async function send(text: string): Promise<string> {
  return (await sendMessageRpc(`${stack.baseUrl}${agent.basePath}`, text, { returnImmediately: true })).body.result.task.id;
}

const runRow = async (id: string) =>
  (await stack.api.get(DatabaseService).query<{ status: string; blocked_reason: string | null; lease_expires_at: Date | null }>('SELECT status, blocked_reason, lease_expires_at FROM runs WHERE id = $1', [id]))[0]!;

describe('lost executions', () => {
  it('a killed worker: the held run is failed within 2 heartbeats, the run waiting on its caller is left alone', async () => {
    const held = await send('hold on');
    const asking = await send('ask me');
    await expect.poll(async () => (await runRow(asking)).blocked_reason, { timeout: 20_000, interval: 100 }).toBe('input_required');
    await expect.poll(async () => (await runRow(held)).lease_expires_at !== null, { timeout: 20_000, interval: 100 }).toBe(true);
    expect((await runRow(held)).status).toBe('working');

    worker.kill('SIGKILL');
    const killedAt = Date.now();
    await expect.poll(async () => (await runRow(held)).status, { timeout: 10_000, interval: 50 }).toBe('failed');
    // the lease was renewed at most one heartbeat before the kill and lasts 1.5 heartbeats; one
    // sweep interval (half a heartbeat) later it is failed: within 2 heartbeats, plus slack
    expect(Date.now() - killedAt).toBeLessThan(2 * HEARTBEAT_MS + 1_000);
    const events = (await stack.api.get(DatabaseService).query<{ payload: { reason?: string } }>(
      `SELECT payload FROM run_events WHERE run_id = $1 ORDER BY sequence DESC LIMIT 1`,
      [held],
    ))[0]!;
    expect(events.payload.reason).toContain('lease expired');

    // the run that waits on its caller is not "lost": nothing runs for it, nothing is needed
    await new Promise((r) => setTimeout(r, 3 * HEARTBEAT_MS));
    expect(await runRow(asking)).toMatchObject({ status: 'working', blocked_reason: 'input_required' });
  });

  it("a live lease is not taken over by another execution's heartbeat; an expired one is", async () => {
    // (the worker is gone: the run stays submitted, which is all the lease needs)
    const id = await send('ask again');
    const ops = stack.api.get(RuntimeOperations);
    const orgId = (await stack.api.get(DatabaseService).query<{ org_id: string }>('SELECT org_id FROM runs WHERE id = $1', [id]))[0]!.org_id;
    const lease = async () => (await stack.api.get(DatabaseService).query<{ lease_owner: string; lease_trigger: number }>('SELECT lease_owner, lease_trigger FROM runs WHERE id = $1', [id]))[0]!;
    expect(await ops.heartbeat(orgId, id, 'follower', 1, 400)).toEqual({ status: 'submitted', epoch: 0 });
    // another execution (a forwarded message) beats while the follower's lease lives: unchanged,
    // and it still reads the run's status
    expect(await ops.heartbeat(orgId, id, 'forwarder', 2, 60_000)).toEqual({ status: 'submitted', epoch: 0 });
    expect(await lease()).toEqual({ lease_owner: 'follower', lease_trigger: 1 });
    // the follower renews its own
    await ops.heartbeat(orgId, id, 'follower', 1, 400);
    expect(await lease()).toEqual({ lease_owner: 'follower', lease_trigger: 1 });
    // once it has expired, the other takes it
    await new Promise((r) => setTimeout(r, 500));
    await ops.heartbeat(orgId, id, 'forwarder', 2, 60_000);
    expect(await lease()).toEqual({ lease_owner: 'forwarder', lease_trigger: 2 });
  });

  it('heartbeats of one turn share one statement and each gets its own run\'s answer: taken, left to a live lease, fenced, gone', async () => {
    const db = stack.api.get(DatabaseService);
    const ops = stack.api.get(RuntimeOperations);
    const ids = [await send('hold a'), await send('hold b'), await send('hold c')];
    const orgId = (await db.query<{ org_id: string }>('SELECT org_id FROM runs WHERE id = $1', [ids[0]]))[0]!.org_id;
    // b: another execution holds a live lease; c: a takeover bumped its epoch
    await ops.heartbeat(orgId, ids[1]!, 'holder', 1, 60_000);
    await db.query('UPDATE runs SET execution_epoch = execution_epoch + 1 WHERE id = $1', [ids[2]]);
    // count the lease statements the heartbeats send
    const names: string[] = [];
    const query = db.query.bind(db);
    db.query = ((text: string, values?: unknown[], name?: string) => {
      if (name?.startsWith('runs.lease_renew')) names.push(name);
      return query(text, values, name);
    }) as typeof db.query;
    const answers = await Promise.all([
      ops.heartbeat(orgId, ids[0]!, 'me', 1, 60_000, 0),
      ops.heartbeat(orgId, ids[1]!, 'me', 1, 60_000, 0),
      ops.heartbeat(orgId, ids[2]!, 'me', 1, 60_000, 0),
      ops.heartbeat(orgId, randomUUID(), 'me', 1, 60_000, 0),
    ]).finally(() => {
      db.query = query;
    });
    expect(names).toEqual(['runs.lease_renew']);
    expect(answers).toEqual([{ status: 'submitted', epoch: 0 }, { status: 'submitted', epoch: 0 }, { status: 'submitted', epoch: 1 }, null]);
    const leases = await db.query<{ id: string; lease_owner: string | null }>('SELECT id, lease_owner FROM runs WHERE id = ANY($1::uuid[])', [ids]);
    const owner = new Map(leases.map((l) => [l.id, l.lease_owner]));
    expect([owner.get(ids[0]!), owner.get(ids[1]!), owner.get(ids[2]!)]).toEqual(['me', 'holder', null]);
  });

  it('hand-offs by a stopping worker do not use up the resumption budget; lost executions do', async () => {
    const id = await send('hold this one');
    const orgId = (await stack.api.get(DatabaseService).query<{ org_id: string }>('SELECT org_id FROM runs WHERE id = $1', [id]))[0]!.org_id;
    const ops = stack.api.get(RuntimeOperations);
    for (let i = 1; i <= 4; i++) expect(await ops.resumeExecution(orgId, id, 'the worker executing it stopped', 3, { handedOn: true })).toEqual({ outcome: 'resumed', attempt: i });
    for (let i = 5; i <= 7; i++) expect(await ops.resumeExecution(orgId, id, 'the execution was lost', 3)).toEqual({ outcome: 'resumed', attempt: i });
    expect(await ops.resumeExecution(orgId, id, 'the execution was lost', 3)).toEqual({ outcome: 'exhausted' });
    // a hand-off is still taken after the budget of losses is spent
    expect(await ops.resumeExecution(orgId, id, 'the worker executing it stopped', 3, { handedOn: true })).toEqual({ outcome: 'resumed', attempt: 8 });
    const payloads = (await stack.api.get(DatabaseService).query<{ payload: { attempt: number; handedOn?: boolean } }>(
      `SELECT payload FROM run_events WHERE run_id = $1 AND type = 'run.execution_resumed' ORDER BY sequence`,
      [id],
    )).map((r) => r.payload.handedOn === true);
    expect(payloads).toEqual([true, true, true, true, false, false, false, true]);
  });

  it('an execution a resumption replaced (slow, not dead) writes nothing more: each write is refused in its statement (run.fenced)', async () => {
    const id = await send('hold the slow one');
    const db = stack.api.get(DatabaseService);
    const at = async () =>
      (await db.query<{ last_sequence: number; org_id: string; execution_epoch: number; lease_owner: string | null }>('SELECT last_sequence, org_id, execution_epoch, lease_owner FROM runs WHERE id = $1', [id]))[0]!;
    const { last_sequence: started, org_id: orgId, execution_epoch: epoch } = await at();
    const ops = stack.api.get(RuntimeOperations);
    const slow = await ops.apply(orgId, id, [{ op: 'status', status: 'working' }], { expectedSequence: started, epoch });
    expect(await ops.resumeExecution(orgId, id, 'the execution was lost (its lease expired)', 3)).toEqual({ outcome: 'resumed', attempt: 1 });
    const taken = await at();
    expect(taken.execution_epoch).toBe(epoch + 1);
    const late = [{ op: 'message' as const, message: { parts: [{ text: 'late' }] } }];
    // at the sequence it expects, and at the run's current one (as after an attempt whose answer was lost): refused either way
    await expect(ops.apply(orgId, id, late, { expectedSequence: slow.lastSequence, epoch })).rejects.toMatchObject({ code: 'run.fenced' });
    await expect(ops.apply(orgId, id, late, { expectedSequence: taken.last_sequence, epoch, retryForMs: 1_000 })).rejects.toMatchObject({ code: 'run.fenced' });
    await expect(ops.apply(orgId, id, late, { epoch })).rejects.toMatchObject({ code: 'run.fenced' });
    // its heartbeat learns the newer epoch and takes no lease; failing or handing on the run does nothing
    expect(await ops.heartbeat(orgId, id, 'the-slow-one', started, 10_000, epoch)).toEqual({ status: 'working', epoch: epoch + 1 });
    expect((await at()).lease_owner).toBeNull();
    expect(await ops.failRun(orgId, id, 'the agent runtime failed', { epoch })).toBeNull();
    expect(await ops.resumeExecution(orgId, id, 'the worker executing it stopped', 3, { handedOn: true, epoch })).toBeNull();
    await expect(ops.delegate(orgId, id, { agent: 'nobody-here', message: { parts: [{ text: 'x' }] }, key: 'k' }, { epoch })).rejects.toMatchObject({ code: expect.stringMatching(/^(run\.fenced|agent\.not_published)$/) });
    expect((await at()).last_sequence).toBe(taken.last_sequence);
    // the resumed execution (the new epoch) appends and takes the lease
    await ops.apply(orgId, id, [{ op: 'message', message: { parts: [{ text: 'resumed' }] } }], { expectedSequence: taken.last_sequence, epoch: epoch + 1 });
    expect((await at()).last_sequence).toBe(taken.last_sequence + 1);
    expect(await ops.heartbeat(orgId, id, 'the-new-one', taken.last_sequence, 10_000, epoch + 1)).toEqual({ status: 'working', epoch: epoch + 1 });
    expect((await at()).lease_owner).toBe('the-new-one');
  });

  it('an operation id is recorded once per run, enforced by PostgreSQL: a replayed operation is dropped, the rest of its batch appended', async () => {
    const id = await send('hold the ops');
    const db = stack.api.get(DatabaseService);
    const { org_id: orgId } = (await db.query<{ org_id: string }>('SELECT org_id FROM runs WHERE id = $1', [id]))[0]!;
    const ops = stack.api.get(RuntimeOperations);
    const msg = (text: string, opId: string) => ({ op: 'message' as const, message: { parts: [{ text }] }, opId });
    const logged = async () =>
      (await db.query<{ op: string }>(`SELECT payload->>'opId' AS op FROM run_events WHERE run_id = $1 AND payload ? 'opId' ORDER BY sequence`, [id])).map((r) => r.op);
    await ops.apply(orgId, id, [msg('one', 'op-1')]);
    // the same operation again (no resumed execution's check in front of it): nothing appended
    const before = (await db.query<{ last_sequence: number }>('SELECT last_sequence FROM runs WHERE id = $1', [id]))[0]!.last_sequence;
    const again = await ops.apply(orgId, id, [msg('one', 'op-1')]);
    expect(again.lastSequence).toBe(before);
    // a batch holding it and a new one: the new one only
    await ops.apply(orgId, id, [msg('one', 'op-1'), msg('two', 'op-2')]);
    // ten appends of one new operation at once: one is recorded
    await Promise.all(Array.from({ length: 10 }, () => ops.apply(orgId, id, [msg('three', 'op-3')]).catch(() => undefined)));
    expect(await logged()).toEqual(['op-1', 'op-2', 'op-3']);
    // and PostgreSQL itself refuses a second row, whoever writes it
    await expect(db.query(`INSERT INTO run_events (run_id, sequence, org_id, type, payload) VALUES ($1, 10000, $2, 'message.added', '{"opId":"op-1"}')`, [id, orgId])).rejects.toMatchObject({ code: '23505' });
  });

  it('a verdict on a run that moved since, or now waits on its caller, fails nothing (found by npm run faults)', async () => {
    // the sweeper reads its candidates, then the job's state from Redis (seconds during an outage),
    // then acts: a run that started working or asked its caller in between is not lost
    const id = await send('hold me too');
    const db = stack.api.get(DatabaseService);
    const seq = async () => (await db.query<{ last_sequence: number; org_id: string }>('SELECT last_sequence, org_id FROM runs WHERE id = $1', [id]))[0]!;
    const { last_sequence: judgedAt, org_id: orgId } = await seq();
    const ops = stack.api.get(RuntimeOperations);
    const policy = stack.api.get(LostExecutionPolicy);
    await ops.apply(orgId, id, [{ op: 'status', status: 'working' }]);
    expect(await policy.handle(orgId, id, 'the execution was lost (no live job: active)', { lastSequence: judgedAt })).toBeNull();
    expect(await ops.failRun(orgId, id, 'the execution was lost', { expectedSequence: judgedAt })).toBeNull();
    expect((await runRow(id)).status).toBe('working');

    await ops.apply(orgId, id, [{ op: 'interaction', kind: 'input', message: { parts: [{ text: 'Which city?' }] } }]);
    const blockedAt = (await seq()).last_sequence;
    expect(await ops.failRun(orgId, id, 'the execution was lost', { expectedSequence: blockedAt })).toBeNull();
    expect(await runRow(id)).toMatchObject({ status: 'working', blocked_reason: 'input_required' });
    const open = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM interaction_requests WHERE run_id = $1 AND status = 'open'`, [id]);
    expect(open[0]!.n).toBe(1);

    // judged on the run as it is, the verdict stands
    const other = await send('hold me as well');
    const at = (await db.query<{ last_sequence: number }>('SELECT last_sequence FROM runs WHERE id = $1', [other]))[0]!.last_sequence;
    expect(await policy.handle(orgId, other, 'the execution was lost (no live job: failed)', { lastSequence: at })).toBe('failed');
    expect((await runRow(other)).status).toBe('failed');
  });
});
