import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '#libs/common';
import type { CanonicalMessage } from '#libs/contracts';
import type { DatabaseService } from '#libs/db';
import { ContinueRunHandler, CreateRunHandler, ExecutionReads, RecordReplyHandler, RunViews, RuntimeOperations, type RecordReplyCommand } from '#libs/runs';
import { bootRuns } from './support/runs.js';
import type { seedAgent } from './support/fixtures.js';

/**
 * RecordReplyCommand against real PostgreSQL: a direct reply is a run of kind `reply` written
 * complete by the creation statement (group-committed with CreateRunCommand's), terminal from its
 * commit, idempotent per caller on messageId, and part of its thread.
 */
let ctx: INestApplicationContext;
let db: DatabaseService;
let replies: RecordReplyHandler;
let create: CreateRunHandler;
let cont: ContinueRunHandler;
let ops: RuntimeOperations;
let views: RunViews;
let reads: ExecutionReads;
let seed: Awaited<ReturnType<typeof seedAgent>>;

const msg = (text: string, messageId = randomUUID()): CanonicalMessage => ({ messageId, role: 'user', parts: [{ text }] });
const codeOf = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof AppError) return e.code;
    throw e;
  }
  return 'ok';
};
const cmd = (message: CanonicalMessage, extra: Partial<RecordReplyCommand> = {}): RecordReplyCommand => ({
  orgId: seed.orgId,
  agentId: seed.agentId,
  revisionId: seed.revisionId,
  message,
  reply: { parts: [{ text: `re: ${message.parts[0]!.text}` }] },
  createdBy: 'key:caller',
  ...extra,
});

beforeAll(async () => {
  ({ ctx, db, seed } = await bootRuns({ DATABASE_POOL_MAX: '8', DATABASE_GROUP_COMMIT_IN_FLIGHT: '1' }));
  replies = ctx.get(RecordReplyHandler);
  create = ctx.get(CreateRunHandler);
  cont = ctx.get(ContinueRunHandler);
  ops = ctx.get(RuntimeOperations);
  views = ctx.get(RunViews);
  reads = ctx.get(ExecutionReads);
});
afterAll(async () => {
  await ctx?.close();
});

describe('RecordReplyHandler', () => {
  it('records the exchange complete: created, the message, completed with the reply; no dispatch; terminal', async () => {
    const m = msg('hello');
    const { run, reply, created } = await replies.execute(cmd(m, { threadId: 'th-1' }));
    expect(created).toBe(true);
    expect([run.kind, run.status, run.lastSequence, run.threadId]).toEqual(['reply', 'completed', 3, 'th-1']);
    expect(reply).toMatchObject({ sequence: 3, message: { role: 'agent', parts: [{ text: 're: hello' }] } });
    const log = await views.events(seed.orgId, run.id, 0);
    expect(log.map((e) => [e.sequence, e.event.type])).toEqual([
      [1, 'run.created'],
      [2, 'message.added'],
      [3, 'run.status_changed'],
    ]);
    expect(log[0]!.event.payload).toMatchObject({ kind: 'reply', status: 'submitted' });
    expect(log[2]!.event.payload).toMatchObject({ status: 'completed', message: reply!.message });
    expect(await db.query('SELECT 1 FROM run_dispatches WHERE run_id = $1', [run.id])).toEqual([]);
    const [row] = await db.query<{ ended: boolean }>('SELECT ended_at IS NOT NULL AS ended FROM runs WHERE id = $1', [run.id]);
    expect(row!.ended).toBe(true);
    // nothing follows a reply: the append guard refuses a terminal run
    expect(await codeOf(cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: msg('more') }))).toBe('run.terminal');
    expect(await codeOf(ops.setStatus(seed.orgId, run.id, 'working'))).toBe('run.terminal');
    expect((await views.get(seed.orgId, run.id))!.lastSequence).toBe(3);
  });

  it('is idempotent per caller: the same message returns the first reply; other content, another thread → run.conflict', async () => {
    const m = msg('same');
    const first = await replies.execute(cmd(m));
    const again = await replies.execute({ ...cmd(m), reply: { parts: [{ text: 'a different answer now' }] } });
    expect(again.created).toBe(false);
    expect(again.run.id).toBe(first.run.id);
    expect(again.reply).toEqual(first.reply);
    expect((await replies.execute(cmd(m, { threadId: first.run.threadId }))).run.id).toBe(first.run.id);
    // same content, metadata keys in another order and an empty extensions list: the same message
    const withMeta = msg('meta');
    withMeta.metadata = { a: 1, b: { c: 2, d: 3 } };
    const w1 = await replies.execute(cmd(withMeta));
    const w2 = await replies.execute(cmd({ ...withMeta, metadata: { b: { d: 3, c: 2 }, a: 1 }, extensions: [] }));
    expect(w2.run.id).toBe(w1.run.id);

    expect(await codeOf(replies.execute(cmd({ ...m, parts: [{ text: 'changed' }] })))).toBe('run.conflict');
    expect(await codeOf(replies.execute(cmd({ ...m, metadata: { x: 1 } })))).toBe('run.conflict');
    expect(await codeOf(replies.execute(cmd(m, { threadId: 'another-thread' })))).toBe('run.conflict');
    // another caller's same messageId is its own exchange
    const theirs = await replies.execute(cmd(m, { createdBy: 'key:other' }));
    expect(theirs.created).toBe(true);
    expect(theirs.run.id).not.toBe(first.run.id);
    const [n] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs WHERE agent_id = $1 AND origin_message_id = $2', [seed.agentId, m.messageId]);
    expect(n!.n).toBe(2);
  });

  it('concurrent retries of one message record one exchange and all answer its reply', async () => {
    const m = msg('racing');
    const results = await Promise.all(Array.from({ length: 12 }, () => replies.execute(cmd(m))));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.run.id)).size).toBe(1);
    expect(new Set(results.map((r) => r.reply!.message.messageId)).size).toBe(1);
  });

  it('shares the creation statement with concurrent creations (group commit), each its own run', async () => {
    const thread = `th-${randomUUID()}`;
    const work = Array.from({ length: 10 }, (_, i) =>
      i % 2 === 0
        ? replies.execute(cmd(msg(`r${i}`), { threadId: thread })).then((r) => r.run)
        : create.execute({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, threadId: thread, message: msg(`c${i}`) }).then((r) => r.run),
    );
    const runs = await Promise.all(work);
    expect(runs.map((r) => [r.kind, r.status])).toEqual(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? ['reply', 'completed'] : ['execution', 'submitted'])),
    );
    // one in flight at a time: the items queued behind the first went out together
    const [{ n }] = (await db.query<{ n: number }>('SELECT count(DISTINCT created_at)::int AS n FROM runs WHERE thread_id = $1', [thread])) as [{ n: number }];
    expect(n).toBeLessThan(10);
    // the thread's history holds the exchanges beside the tasks' messages
    const history = await reads.threadHistory(seed.orgId, seed.agentId, thread, 100);
    expect(history.map((h) => h.parts[0]!.text).sort()).toEqual(['c1', 'c3', 'c5', 'c7', 'c9', 'r0', 'r2', 'r4', 'r6', 'r8', 're: r0', 're: r2', 're: r4', 're: r6', 're: r8'].sort());
  });

  it('a messageId that created an execution run answers that run (no reply); one used as a follow-up → run.conflict', async () => {
    const m = msg('task first');
    const { run } = await create.execute({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: m, createdBy: 'key:caller' });
    const r = await replies.execute(cmd(m));
    expect([r.created, r.reply, r.run.id, r.run.kind]).toEqual([false, null, run.id, 'execution']);

    const followUp = msg('follow-up');
    await cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: followUp, sentBy: 'key:caller' });
    expect(await codeOf(replies.execute(cmd(followUp)))).toBe('run.conflict');
  });
});
