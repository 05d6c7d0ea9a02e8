import { describe, expect, it } from 'vitest';
import { check, formatReport, isProjected } from '../bench/faults/checker.js';
import type { DbSnapshot, History } from '../bench/faults/history.js';
import { formatPlan, planFaults } from '../bench/faults/schedule.js';

/**
 * The fault suite's checker (bench/faults/checker.ts) on hand-made histories, no world: a correct
 * history and database pass every property; each deliberate bug is reported under its property.
 */
const AGENT = '00000000-0000-4000-8000-0000000000a1';
const R1 = '11111111-1111-4111-8111-111111111111';
const R2 = '22222222-2222-4222-8222-222222222222';
const user = (messageId: string) => ({ type: 'message.added', payload: { message: { messageId, role: 'user', parts: [{ text: 'x' }] } } });
const agent = (messageId: string) => ({ type: 'message.added', payload: { message: { messageId, role: 'agent', parts: [{ text: 'y' }] } } });
const status = (s: string, blockedReason: string | null = null) => ({ type: 'run.status_changed', payload: { status: s, blockedReason } });

function world(): { history: History; db: DbSnapshot } {
  // R1: a plain task (send m1); R2: asks for input, answered by the follow-up m3
  const log1 = [{ type: 'run.created', payload: {} }, user('m1'), status('working'), { type: 'artifact.updated', payload: { artifactId: 'a', parts: [] } }, agent('g1'), status('completed')];
  const log2 = [
    { type: 'run.created', payload: {} },
    user('m2'),
    { type: 'interaction.requested', payload: { blockedReason: 'input_required', blocking: true } },
    { type: 'interaction.responded', payload: { blocking: true, message: user('m3').payload.message } },
    agent('g2'),
    status('completed'),
  ];
  const events = [...log1.map((e, i) => ({ runId: R1, sequence: i + 1, ...e })), ...log2.map((e, i) => ({ runId: R2, sequence: i + 1, ...e }))];
  const db: DbSnapshot = {
    runs: [
      { id: R1, agentId: AGENT, status: 'completed', blockedReason: null, lastSequence: 6, originMessageId: 'm1', createdBy: null, leaseExpired: true },
      { id: R2, agentId: AGENT, status: 'completed', blockedReason: null, lastSequence: 6, originMessageId: 'm2', createdBy: null, leaseExpired: false },
    ],
    events,
    messages: [
      { runId: R1, messageId: 'm1', role: 'user', sequence: 2 },
      { runId: R1, messageId: 'g1', role: 'agent', sequence: 5 },
      { runId: R2, messageId: 'm2', role: 'user', sequence: 2 },
      { runId: R2, messageId: 'm3', role: 'user', sequence: 4 },
      { runId: R2, messageId: 'g2', role: 'agent', sequence: 5 },
    ],
    outbox: [],
    pushConfigs: [{ runId: R1, configId: 'c1', path: '/push/1', status: 'done', cursor: 6, deletedAt: null, leaseExpired: false }],
  };
  const history: History = {
    operations: [
      {
        id: 1,
        client: 0,
        kind: 'send',
        messageId: 'm1',
        taskId: R1,
        outcome: 'ok',
        attempts: [
          { api: 'A', binding: 'JSONRPC', outcome: 'unknown', error: 'socket hang up', at: 10 },
          { api: 'B', binding: 'HTTP+JSON', outcome: 'ok', taskId: R1, state: 'TASK_STATE_COMPLETED', at: 20 },
        ],
        invokedAt: 10,
        completedAt: 25,
      },
      { id: 2, client: 1, kind: 'send', messageId: 'm2', taskId: R2, outcome: 'ok', attempts: [{ api: 'A', binding: 'JSONRPC', outcome: 'ok', taskId: R2, state: 'TASK_STATE_INPUT_REQUIRED', at: 30 }], invokedAt: 30, completedAt: 31 },
      {
        id: 3,
        client: 1,
        kind: 'followup',
        messageId: 'm3',
        taskId: R2,
        outcome: 'ok',
        attempts: [
          { api: 'A', binding: 'JSONRPC', outcome: 'unknown', error: '503', at: 40 },
          { api: 'B', binding: 'JSONRPC', outcome: 'ok', taskId: R2, state: 'TASK_STATE_COMPLETED', at: 41 },
        ],
        invokedAt: 40,
        completedAt: 42,
      },
      { id: 4, client: 2, kind: 'send', messageId: 'never-arrived', outcome: 'fail', attempts: [{ api: 'A', binding: 'JSONRPC', outcome: 'fail', error: 'ECONNREFUSED', at: 50 }], invokedAt: 50, completedAt: 50 },
    ],
    // a stream from the snapshot at 2, cut after 4, resumed on the other API from 4
    streams: [
      {
        id: 5,
        client: 3,
        messageId: 'm1',
        taskId: R1,
        snapshotSequence: 2,
        seen: [3, 4, 5, 6],
        final: true,
        connections: 2,
        segments: [
          { api: 'A', binding: 'JSONRPC', after: null, frames: 3, end: 'cut' },
          { api: 'B', binding: 'HTTP+JSON', after: 4, frames: 2, end: 'final' },
        ],
      },
    ],
    pushConfigs: [{ taskId: R1, configId: 'c1', path: '/push/1', createdWith: 'send' }],
    // at-least-once: 4 was re-sent after a crash, one attempt was answered 500
    pushReceipts: [3, 4, 4, 5, 6].map((sequence, i) => ({ path: '/push/1', taskId: R1, sequence, webhookId: `msg_c1_${sequence}`, status: i === 2 ? 500 : 200, at: i })),
    faults: [],
  };
  return { history, db };
}

const violated = (h: History, d: DbSnapshot) => check(h, d).violations.map((v) => v.property);

describe('fault suite checker', () => {
  it('a correct history and database: every property checked, no violation', () => {
    const { history, db } = world();
    const result = check(history, db);
    expect(result.properties.map((p) => p.name)).toEqual([
      'acknowledged-exists',
      'no-stuck-run',
      'one-run-per-message',
      'one-message-per-followup',
      'gapless-log',
      'state-is-fold',
      'stream-contiguous',
      'push-delivered',
      'outbox-empty',
      'no-expired-lease',
      'lost-only-when-lost',
    ]);
    expect(result.violations).toEqual([]);
    expect(formatReport(result, 5, 0).split('\n').at(-1)).toBe('faults: 5 operations, 0 faults, 0 violations');
  });

  it('(a) a skipped sequence in a run log', () => {
    const { history, db } = world();
    db.events = db.events.filter((e) => !(e.runId === R1 && e.sequence === 4));
    const result = check(history, db);
    const gap = result.violations.filter((v) => v.property === 'gapless-log');
    expect(gap).toHaveLength(1);
    expect(gap[0]).toMatchObject({ runId: R1, message: expect.stringContaining('missing [4]') });
    // the stream and the push receiver saw an event the log no longer has
    expect(violated(history, db)).toEqual(expect.arrayContaining(['stream-contiguous', 'push-delivered']));
    expect(formatReport(result, 5, 0)).toMatch(/^FAIL gapless-log/m);
    expect(formatReport(result, 5, 0).split('\n').at(-1)).toBe(`faults: 5 operations, 0 faults, ${result.violations.length} violations`);
  });

  it('(b) an acknowledged task that is not in the database', () => {
    const { history, db } = world();
    db.runs = db.runs.filter((r) => r.id !== R2);
    db.events = db.events.filter((e) => e.runId !== R2);
    db.messages = db.messages.filter((m) => m.runId !== R2);
    const v = check(history, db).violations.filter((x) => x.property === 'acknowledged-exists');
    expect(v.map((x) => x.operationId)).toEqual([2, 3]);
    expect(v[0]!.message).toContain(`task ${R2}, which is not in the database`);
    // the follow-up it acknowledged is missing from the log too
    expect(violated(history, db)).toContain('one-message-per-followup');
  });

  it('(c) a stream client that saw a gap across its resume (and one that saw a repeat)', () => {
    const { history, db } = world();
    history.streams[0]!.seen = [3, 5, 6];
    expect(check(history, db).violations).toEqual([expect.objectContaining({ property: 'stream-contiguous', runId: R1, message: expect.stringContaining('saw [3,5,6], the log projects [3,4,5,6]') })]);
    history.streams[0]!.seen = [3, 4, 4, 5, 6];
    expect(violated(history, db)).toEqual(['stream-contiguous']);
    // a stream that stopped early is checked up to what it saw: no gap, no violation
    history.streams[0]!.seen = [3, 4];
    history.streams[0]!.final = false;
    expect(violated(history, db)).toEqual([]);
  });

  it('(d) two runs for one messageId, and one send answered with two different tasks', () => {
    const { history, db } = world();
    const dup = '33333333-3333-4333-8333-333333333333';
    db.runs.push({ ...db.runs[0]!, id: dup, lastSequence: 2 });
    db.events.push({ runId: dup, sequence: 1, type: 'run.created', payload: {} }, { runId: dup, sequence: 2, ...status('completed') });
    const v = check(history, db).violations;
    expect(v).toEqual([expect.objectContaining({ property: 'one-run-per-message', message: `messageId m1 created 2 runs: ${R1}, ${dup}` })]);

    const second = world();
    second.history.operations[0]!.attempts[0] = { api: 'A', binding: 'JSONRPC', outcome: 'ok', taskId: R2, at: 10 };
    expect(check(second.history, second.db).violations).toEqual([expect.objectContaining({ property: 'one-run-per-message', operationId: 1, message: expect.stringContaining('2 different tasks') })]);
  });

  it('also: a duplicated follow-up, a stuck run, a refused send that took effect, a lost push, a left outbox row, an expired lease', () => {
    const { history, db } = world();
    db.events.push({ runId: R2, sequence: 7, ...user('m3') });
    db.runs[1]!.lastSequence = 7;
    db.runs.push({ id: '44444444-4444-4444-8444-444444444444', agentId: AGENT, status: 'working', blockedReason: null, lastSequence: 0, originMessageId: 'never-arrived', createdBy: null, leaseExpired: true });
    history.pushReceipts = history.pushReceipts.filter((r) => r.sequence !== 5);
    db.outbox.push({ runId: R1, triggerSequence: 2 });
    const props = violated(history, db);
    expect(props).toEqual(
      expect.arrayContaining(['one-message-per-followup', 'no-stuck-run', 'acknowledged-exists', 'push-delivered', 'outbox-empty', 'no-expired-lease', 'state-is-fold']),
    );
    // a lease left on a finished run is harmless: only the active run's counts
    expect(check(history, db).violations.filter((v) => v.property === 'no-expired-lease')).toHaveLength(1);
  });

  it('a run failed as lost while blocked on its caller, or failed for "no live job" although it had just moved', () => {
    const { history, db } = world();
    const lost = (reason: string) => ({ type: 'run.status_changed', payload: { status: 'failed', blockedReason: null, reason } });
    // R2 blocked at 3, then the sweeper cancelled its interaction and failed it
    const blocked = db.events.filter((e) => e.runId === R2 && e.sequence <= 3);
    db.events = [
      ...db.events.filter((e) => e.runId !== R2),
      ...blocked,
      { runId: R2, sequence: 4, type: 'interaction.canceled', payload: { blocking: true, reason: 'the execution was lost (no live job: active)' } },
      { runId: R2, sequence: 5, ...lost('the execution was lost (no live job: active)') },
    ];
    db.runs[1] = { ...db.runs[1]!, status: 'failed', lastSequence: 5 };
    history.operations = history.operations.filter((o) => o.id !== 3);
    history.operations[1]!.attempts[0]!.state = 'TASK_STATE_SUBMITTED';
    db.messages = db.messages.filter((m) => m.messageId !== 'm3' && m.messageId !== 'g2');
    expect(check(history, db).violations).toEqual([expect.objectContaining({ property: 'lost-only-when-lost', runId: R2, message: expect.stringContaining('while blocked on its caller (input_required') })]);

    // R1 failed for "no live job" 700 ms after an event: it was not stale
    const second = world();
    const log1 = second.db.events.filter((e) => e.runId === R1 && e.sequence <= 3).map((e, i) => ({ ...e, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() }));
    second.db.events = [
      ...second.db.events.filter((e) => e.runId !== R1),
      ...log1,
      { runId: R1, sequence: 4, ...lost('the execution was lost (no live job: completed)'), createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 2, 700)).toISOString() },
    ];
    second.db.runs[0] = { ...second.db.runs[0]!, status: 'failed', lastSequence: 4 };
    second.history = { ...second.history, streams: [], pushConfigs: [], pushReceipts: [], operations: [] };
    second.db.messages = second.db.messages.filter((m) => m.messageId !== 'g1');
    expect(check(second.history, second.db).violations).toEqual([]); // no stale time given: not judged
    expect(check(second.history, second.db, { staleAfterMs: 15_000 }).violations).toEqual([
      expect.objectContaining({ property: 'lost-only-when-lost', runId: R1, message: expect.stringContaining('700 ms after its sequence 3') }),
    ]);
    // 20 s of silence: a fair verdict
    second.db.events.find((e) => e.runId === R1 && e.sequence === 4)!.createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, 22)).toISOString();
    expect(check(second.history, second.db, { staleAfterMs: 15_000 }).violations).toEqual([]);
  });

  it('the projection: the caller’s own messages, run.created and bookkeeping yield no event', () => {
    expect(isProjected(user('u'))).toBe(false);
    expect(isProjected(agent('a'))).toBe(true);
    expect(isProjected({ type: 'run.created', payload: {} })).toBe(false);
    expect(isProjected({ type: 'run.execution_resumed', payload: {} })).toBe(false);
    expect(isProjected({ type: 'interaction.responded', payload: { blocking: false } })).toBe(false);
    expect(isProjected({ type: 'interaction.expired', payload: { blocking: true, outcome: 'fail' } })).toBe(false);
    expect(isProjected({ type: 'interaction.expired', payload: { blocking: true, outcome: 'continue' } })).toBe(true);
  });
});

describe('fault schedule', () => {
  it('is a function of the seed: the same seed, the same schedule; faults on one resource never overlap', () => {
    expect(formatPlan(planFaults(7, 300_000))).toBe(formatPlan(planFaults(7, 300_000)));
    expect(formatPlan(planFaults(7, 300_000))).not.toBe(formatPlan(planFaults(8, 300_000)));
    const plan = planFaults(7, 300_000);
    expect(plan.length).toBeGreaterThan(30);
    expect(plan.every((f) => f.at >= 3_000 && f.at <= 295_000)).toBe(true);
    for (const target of new Set(plan.map((f) => f.target))) {
      const mine = plan.filter((f) => f.target === target);
      for (let i = 1; i < mine.length; i++) expect(mine[i]!.at).toBeGreaterThanOrEqual(mine[i - 1]!.at + mine[i - 1]!.durationMs);
    }
  });

  it('a 30 s smoke schedule kills a process and hits PostgreSQL and Redis, whatever the seed', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const kinds = planFaults(seed, 30_000).map((f) => f.kind);
      expect(kinds.some((k) => k.startsWith('kill-')), `seed ${seed}`).toBe(true);
      expect(kinds.some((k) => k.startsWith('pg-')), `seed ${seed}`).toBe(true);
      expect(kinds.some((k) => k.startsWith('redis-')), `seed ${seed}`).toBe(true);
    }
  });
});
