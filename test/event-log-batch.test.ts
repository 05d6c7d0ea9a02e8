import { randomUUID } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { DispatchRelay, RunsModule } from '#libs/runs';
import { observeQueries } from './support/db-spy.js';
import { runsOf, type TestRuns } from './support/runs.js';
import { testEnv } from './support/env.js';
import { seedAgent } from './support/fixtures.js';
import { startStack, type Stack } from './support/stack.js';

/** The append statements a DatabaseService sends: the run ids of each one's items, in order. */
function countAppends(db: DatabaseService): { statements: string[][] } {
  const seen = { statements: [] as string[][] };
  observeQueries(db, (name, values) => {
    if (name?.startsWith('runs.append')) seen.statements.push((JSON.parse(values![0] as string) as Array<{ runId: string }>).map((i) => i.runId));
  });
  return seen;
}

describe('appends are group-committed (real Postgres)', () => {
  let ctx: INestApplicationContext;
  let db: DatabaseService;
  let runs: TestRuns;
  let seed: Awaited<ReturnType<typeof seedAgent>>;
  let seen: { statements: string[][] };

  beforeAll(async () => {
    // one statement in flight: while it waits, every append submitted meanwhile forms the next batch
    const mod = await Test.createTestingModule({
      imports: [ConfigModule.forRoot({ ...testEnv(), DATABASE_GROUP_COMMIT_IN_FLIGHT: '1' }), DbModule, RunsModule],
    }).compile();
    ctx = await mod.init();
    db = ctx.get(DatabaseService);
    runs = runsOf(ctx);
    seed = await seedAgent(db);
    seen = countAppends(db);
    const relay = ctx.get(DispatchRelay);
    const hand = relay.relay.bind(relay);
    relay.relay = (d) => {
      relayed.push(d);
      return hand(d);
    };
  });
  afterAll(async () => {
    await ctx?.close();
  });
  const relayed: Array<Parameters<DispatchRelay['relay']>[0]> = [];

  const newRun = async () =>
    (await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hi' }] } })).run;

  /**
   * Start the appends `submit` makes while the one statement in flight waits on a row lock this
   * test holds, then let it go: the appends queued meanwhile go out together. Resolves to each
   * append's outcome and the statements sent from the release on.
   */
  async function batched<T>(submit: () => Array<Promise<T>>): Promise<{ outcomes: Array<PromiseSettledResult<T>>; statements: string[][] }> {
    const blocker = await newRun();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = db.transaction(async (q) => {
      await q('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [blocker.id]);
      locked();
      await released;
    });
    await isLocked;
    const first = seen.statements.length;
    const blocked = runs.emitMessage(seed.orgId, blocker.id, { parts: [{ text: 'blocks the slot' }] });
    // a turn's appends go out together: let the blocker's go out alone first and take the slot
    while (seen.statements.length === first) await new Promise((r) => setImmediate(r));
    const pending = submit();
    await new Promise((r) => setTimeout(r, 50));
    release();
    await holder;
    await blocked;
    const outcomes = await Promise.allSettled(pending);
    return { outcomes, statements: seen.statements.slice(first + 1) };
  }

  const sequences = async (runId: string) => (await runs.readEvents(seed.orgId, runId, 0)).map((e) => e.sequence);

  it('appends to distinct runs share one statement, each with its own sequences and result', async () => {
    const targets = await Promise.all(Array.from({ length: 10 }, () => newRun()));
    const { outcomes, statements } = await batched(() => targets.map((r, i) => runs.emitMessage(seed.orgId, r.id, { parts: [{ text: `m${i}` }] })));
    expect(statements).toEqual([targets.map((r) => r.id).sort()]);
    expect(outcomes.map((o) => o.status)).toEqual(targets.map(() => 'fulfilled'));
    for (const [i, r] of targets.entries()) {
      expect((outcomes[i] as PromiseFulfilledResult<{ id: string; lastSequence: number }>).value).toMatchObject({ id: r.id, lastSequence: 3 });
      expect(await sequences(r.id)).toEqual([1, 2, 3]);
      const [message] = (await runs.readEvents(seed.orgId, r.id, 2)).map((e) => e.event.payload as { message: { parts: Array<{ text: string }> } });
      expect(message!.message.parts).toEqual([{ text: `m${i}` }]);
    }
  });

  it('one bad item (an agent messageId its run recorded already) fails alone: the batch is retried item by item', async () => {
    const used = randomUUID();
    const targets = await Promise.all(Array.from({ length: 6 }, () => newRun()));
    // the agent's messageIds are unique within a run (docs/architecture.md "The log's partitions")
    await runs.emitMessage(seed.orgId, targets[3]!.id, { messageId: used, parts: [{ text: 'first' }] });
    const { outcomes, statements } = await batched(() =>
      targets.map((r, i) => runs.emitMessage(seed.orgId, r.id, { ...(i === 3 && { messageId: used }), parts: [{ text: `m${i}` }] })),
    );
    // the batch failed on the unique key, then each item alone: only the bad one refused
    expect(statements[0]).toHaveLength(6);
    expect(statements.slice(1).map((s) => s.length)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((outcomes[3] as PromiseRejectedResult).reason).toMatchObject({ code: 'run.conflict' });
    for (const r of targets) expect(await sequences(r.id)).toEqual([1, 2, 3]);
    const [{ n }] = await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE org_id = $1 AND message_id = $2`, [seed.orgId, used]);
    expect(Number(n)).toBe(1);
  });

  it('an item whose guard fails is refused alone (run.terminal) and the others commit in the same statement', async () => {
    const targets = await Promise.all(Array.from({ length: 4 }, () => newRun()));
    await runs.setStatus(seed.orgId, targets[1]!.id, 'completed');
    const { outcomes, statements } = await batched(() => targets.map((r) => runs.emitMessage(seed.orgId, r.id, { parts: [{ text: 'late?' }] })));
    expect(statements[0]).toHaveLength(4);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'run.terminal' });
    expect(await sequences(targets[1]!.id)).toEqual([1, 2, 3]);
    expect(await sequences(targets[2]!.id)).toEqual([1, 2, 3]);
  });

  it('a batch that deadlocks with another transaction is retried item by item: every append commits once', async () => {
    const [a, b] = (await Promise.all([newRun(), newRun()])).sort((x, y) => (x.id < y.id ? -1 : 1));
    let letGo!: () => void;
    const done = new Promise<void>((r) => (letGo = r));
    let tookB!: () => void;
    const hasB = new Promise<void>((r) => (tookB = r));
    // another transaction holds b, and (once the batch holds a and waits for b) asks for a: a cycle
    // PostgreSQL breaks by aborting the statement that waited first, the batch
    const other = db.transaction(async (q) => {
      await q('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [b!.id]);
      tookB();
      await done;
      await q('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [a!.id]);
    });
    await hasB;
    const { outcomes, statements } = await batched(() => {
      const appends = [a!, b!].map((r) => runs.emitMessage(seed.orgId, r.id, { parts: [{ text: 'once' }] }));
      setTimeout(letGo, 300);
      return appends;
    });
    await other;
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(statements[0]).toEqual([a!.id, b!.id]);
    expect(statements.slice(1).flat().sort()).toEqual([a!.id, b!.id]);
    expect(await sequences(a!.id)).toEqual([1, 2, 3]);
    expect(await sequences(b!.id)).toEqual([1, 2, 3]);
  });

  it('appends to one run never share a statement, and keep their order', async () => {
    const [x, y] = await Promise.all([newRun(), newRun()]);
    const { outcomes, statements } = await batched(() =>
      [1, 2, 3].flatMap((k) => [runs.emitMessage(seed.orgId, x!.id, { parts: [{ text: `x${k}` }] }), runs.emitMessage(seed.orgId, y!.id, { parts: [{ text: `y${k}` }] })]),
    );
    expect(outcomes.every((o) => o.status === 'fulfilled')).toBe(true);
    expect(statements).toHaveLength(3);
    for (const s of statements) expect(new Set(s).size).toBe(s.length);
    for (const [run, p] of [[x!, 'x'], [y!, 'y']] as const) {
      const events = await runs.readEvents(seed.orgId, run.id, 0);
      expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
      expect(events.slice(2).map((e) => (e.event.payload as { message: { parts: Array<{ text: string }> } }).message.parts[0]!.text)).toEqual([`${p}1`, `${p}2`, `${p}3`]);
    }
  });

  it('children settling together: their parent hears each in one statement, gapless, and its own append waits for the next one', async () => {
    const parent = await newRun();
    await runs.setStatus(seed.orgId, parent.id, 'working');
    const a = await runs.ops.delegate(seed.orgId, parent.id, { agent: 'agent', message: { parts: [{ text: 'a' }] }, key: 'a' });
    const b = await runs.ops.delegate(seed.orgId, parent.id, { agent: 'agent', message: { parts: [{ text: 'b' }] }, key: 'b' });
    const before = (await runs.getRun(seed.orgId, parent.id))!.lastSequence;
    const { outcomes, statements } = await batched(() => [
      runs.setStatus(seed.orgId, a.childRunId, 'completed'),
      runs.setStatus(seed.orgId, b.childRunId, 'completed'),
      runs.emitMessage(seed.orgId, parent.id, { parts: [{ text: 'still here' }] }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    // the parent was held out of the children's statement (two changes to its row in one
    // statement would lose one) and appended alone right after
    expect(statements).toEqual([[a.childRunId, b.childRunId, parent.id].sort(), [parent.id]]);
    const events = await runs.readEvents(seed.orgId, parent.id, 0);
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: before + 3 }, (_, i) => i + 1));
    const tail = events.slice(before).map((e) => e.event);
    expect(tail.filter((e) => e.type === 'run.link_updated').map((e) => (e.payload as { childRunId: string; status: string }))).toEqual(
      expect.arrayContaining([expect.objectContaining({ childRunId: a.childRunId, status: 'completed' }), expect.objectContaining({ childRunId: b.childRunId, status: 'completed' })]),
    );
    expect(tail.at(-1)).toMatchObject({ type: 'message.added' });
    expect((await runs.getRun(seed.orgId, parent.id))!.lastSequence).toBe(before + 3);
    // the awaiting parent is dispatched once per settled child, keyed by each link_updated's sequence
    const dispatches = relayed.filter((d) => d.job.runId === parent.id && d.job.trigger === 'link_settled').map((d) => ({ trigger_sequence: d.triggerSequence, child: d.job.childRunId! }));
    dispatches.sort((x, y) => x.trigger_sequence - y.trigger_sequence);
    const linkSeqs = events.filter((e) => e.event.type === 'run.link_updated' && (e.event.payload as { status: string }).status === 'completed').map((e) => e.sequence);
    expect(dispatches.map((d) => d.trigger_sequence)).toEqual(linkSeqs);
    expect(dispatches.map((d) => d.child).sort()).toEqual([a.childRunId, b.childRunId].sort());
  });
});

describe('an echo execution appends once (worker, BullMQ, real Postgres)', () => {
  let stack: Stack;
  let runs: TestRuns;
  let seed: Awaited<ReturnType<typeof seedAgent>>;
  let seen: { statements: string[][] };

  beforeAll(async () => {
    stack = await startStack();
    runs = runsOf(stack.api);
    seed = await seedAgent(stack.api.get(DatabaseService), { kind: 'scripted', rules: [] });
    seen = countAppends(stack.worker!.get(DatabaseService));
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('working + the answer + completed are one append: one item per run, shared statements under load', async () => {
    const N = 40;
    const created = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: `echo ${i}` }] } }),
      ),
    );
    for (const { run } of created) expect((await runs.waitUntilSettled(seed.orgId, run.id, 15_000)).status).toBe('completed');
    const ids = new Set(created.map((c) => c.run.id));
    const ours = seen.statements.map((s) => s.filter((id) => ids.has(id))).filter((s) => s.length > 0);
    const items = ours.flat();
    // each run's whole output in one item, so one append per run; statements at most one per run
    expect(items.sort()).toEqual([...ids].sort());
    expect(ours.length).toBeLessThanOrEqual(N);
    for (const { run } of created) {
      const events = await runs.readEvents(seed.orgId, run.id, 0);
      expect(events.map((e) => e.event.type)).toEqual(['run.created', 'message.added', 'run.status_changed', 'message.added', 'run.status_changed']);
    }
    console.log(`echo: ${N} runs, ${items.length} append items in ${ours.length} append statements (${(ours.length / N).toFixed(2)} per run)`);
  });
});
