import { randomUUID } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { AppError } from '#libs/common';
import { RunsModule } from '#libs/runs';
import { runsOf, type TestRuns } from './support/runs.js';
import { testEnv } from './support/env.js';
import { seedAgent } from './support/fixtures.js';

describe('event log (real Postgres)', () => {
  let ctx: INestApplicationContext;
  let db: DatabaseService;
  let runs: TestRuns;
  let seed: Awaited<ReturnType<typeof seedAgent>>;

  beforeAll(async () => {
    const mod = await Test.createTestingModule({
      imports: [ConfigModule.forRoot({ ...testEnv(), DATABASE_POOL_MAX: '32' }), DbModule, RunsModule],
    }).compile();
    ctx = await mod.init();
    db = ctx.get(DatabaseService);
    runs = runsOf(ctx);
    seed = await seedAgent(db);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const newRun = () =>
    runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hi' }] } });

  it('creates a run with sequences 1..2 and its message projection in one statement', async () => {
    const { run, created } = await newRun();
    expect(created).toBe(true);
    expect(run.status).toBe('submitted');
    expect(run.lastSequence).toBe(2);
    const events = await runs.readEvents(seed.orgId, run.id, 0);
    expect(events.map((e) => [e.sequence, e.event.type])).toEqual([
      [1, 'run.created'],
      [2, 'message.added'],
    ]);
    const view = await runs.view(seed.orgId, run.id);
    expect(view.history).toHaveLength(1);
    expect(view.history[0]!.parts).toEqual([{ text: 'hi' }]);
  });

  it('a retried create (same messageId) has exactly one effect', async () => {
    const messageId = randomUUID();
    const cmd = { orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId, role: 'user' as const, parts: [{ text: 'x' }] } };
    const results = await Promise.all(Array.from({ length: 8 }, () => runs.createRun(cmd)));
    const ids = new Set(results.map((r) => r.run.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const n = await db.query<{ n: string }>('SELECT count(*) AS n FROM runs WHERE origin_message_id = $1', [messageId]);
    expect(Number(n[0]!.n)).toBe(1);
  });

  it('concurrent appends from parallel connections leave sequences 1..N with no gap or duplicate', async () => {
    const { run } = await newRun();
    const N = 300;
    await Promise.all(
      Array.from({ length: N }, (_, i) => runs.emitMessage(seed.orgId, run.id, { parts: [{ text: `m${i}` }] })),
    );
    const events = await runs.readEvents(seed.orgId, run.id, 0, 10_000);
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: N + 2 }, (_, i) => i + 1));
    const state = await runs.getRun(seed.orgId, run.id);
    expect(state!.lastSequence).toBe(N + 2);
    const texts = new Set(events.slice(2).map((e) => (e.event.payload as { message: { parts: Array<{ text: string }> } }).message.parts[0]!.text));
    expect(texts.size).toBe(N);
    const msgs = await db.query<{ n: string }>('SELECT count(*) AS n FROM messages WHERE run_id = $1', [run.id]);
    expect(Number(msgs[0]!.n)).toBe(N + 1);
  });

  it('a terminal run accepts no more events, and the log says why nothing was written', async () => {
    const { run } = await newRun();
    await runs.setStatus(seed.orgId, run.id, 'completed');
    await expect(runs.emitMessage(seed.orgId, run.id, { parts: [{ text: 'late' }] })).rejects.toMatchObject({ code: 'run.terminal' });
    await expect(runs.cancelRun(seed.orgId, run.id)).rejects.toMatchObject({ code: 'run.not_cancelable' });
    const events = await runs.readEvents(seed.orgId, run.id, 0);
    expect(events.map((e) => e.event.type)).toEqual(['run.created', 'message.added', 'run.status_changed']);
  });

  it('cancel races with runtime appends: exactly one terminal event, no gap', async () => {
    const { run } = await newRun();
    await runs.setStatus(seed.orgId, run.id, 'working');
    const ops = [
      ...Array.from({ length: 20 }, (_, i) => runs.emitMessage(seed.orgId, run.id, { parts: [{ text: `p${i}` }] }).catch((e: AppError) => e.code)),
      runs.cancelRun(seed.orgId, run.id),
      ...Array.from({ length: 20 }, () => runs.setStatus(seed.orgId, run.id, 'completed').catch((e: AppError) => e.code)),
    ];
    await Promise.all(ops.map((p) => Promise.resolve(p).catch((e: AppError) => e.code)));
    const events = await runs.readEvents(seed.orgId, run.id, 0, 1000);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const terminal = events.filter((e) => e.event.type === 'run.status_changed' && ['completed', 'canceled'].includes((e.event.payload as { status: string }).status));
    expect(terminal).toHaveLength(1);
    expect(events.at(-1)!.event.type).toBe('run.status_changed');
  });

  it('interaction overlay: request blocks, the answer resolves, projections follow the log', async () => {
    const { run } = await newRun();
    const blocked = await runs.requestInteraction(seed.orgId, run.id, 'input', { message: { parts: [{ text: 'which city?' }] } });
    expect(blocked.status).toBe('working');
    expect(blocked.blockedReason).toBe('input_required');
    await expect(runs.requestInteraction(seed.orgId, run.id, 'auth')).rejects.toMatchObject({ code: 'run.invalid_transition' });
    const answered = await runs.continueRun({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'Paris' }] } });
    expect(answered.blockedReason).toBeNull();
    const ir = await db.query<{ status: string }>('SELECT status FROM interaction_requests WHERE run_id = $1', [run.id]);
    expect(ir.map((r) => r.status)).toEqual(['resolved']);
    const view = await runs.view(seed.orgId, run.id);
    expect(view.history.map((m) => m.role)).toEqual(['user', 'agent', 'user']);
  });

  it('a follow-up message retried concurrently is recorded once, and every retry succeeds', async () => {
    const { run } = await newRun();
    await runs.setStatus(seed.orgId, run.id, 'working');
    const message = { messageId: randomUUID(), role: 'user' as const, parts: [{ text: 'again' }] };
    const results = await Promise.all(
      Array.from({ length: 6 }, () => runs.continueRun({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message })),
    );
    expect(results.every((r) => r.id === run.id)).toBe(true);
    const n = await db.query<{ n: string }>('SELECT count(*) AS n FROM messages WHERE run_id = $1 AND message_id = $2', [run.id, message.messageId]);
    expect(Number(n[0]!.n)).toBe(1);
    const events = await runs.readEvents(seed.orgId, run.id, 0);
    expect(events.filter((e) => e.event.type === 'message.added' && (e.event.payload as { message: { messageId: string } }).message.messageId === message.messageId)).toHaveLength(1);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
  });

  it('chunked artifacts are projected in order with append/lastChunk', async () => {
    const { run } = await newRun();
    await runs.emitArtifact(seed.orgId, run.id, { artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }] });
    await runs.emitArtifact(seed.orgId, run.id, { artifactId: 'a1', parts: [{ text: 'lo' }], append: true, lastChunk: true });
    const view = await runs.view(seed.orgId, run.id);
    expect(view.artifacts).toEqual([{ artifactId: 'a1', name: 'out', parts: [{ text: 'Hel' }, { text: 'lo' }], complete: true }]);
  });

  it('is scoped by organization: another org reads nothing and cannot append', async () => {
    const { run } = await newRun();
    const other = await seedAgent(db);
    expect(await runs.getRun(other.orgId, run.id)).toBeNull();
    expect(await runs.readEvents(other.orgId, run.id, 0)).toEqual([]);
    await expect(runs.emitMessage(other.orgId, run.id, { parts: [{ text: 'x' }] })).rejects.toMatchObject({ code: 'run.not_found' });
  });

  it('the log is append-only in the database itself', async () => {
    const { run } = await newRun();
    await expect(db.query('UPDATE run_events SET type = $1 WHERE run_id = $2', ['x', run.id])).rejects.toThrow(/append-only/);
  });
});
