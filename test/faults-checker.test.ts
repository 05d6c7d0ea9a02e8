import { describe, expect, it } from 'vitest';
import { projectEnvelope, type ProjectionState } from '#libs/a2a';
import type { RunEvent } from '#libs/contracts';
import { check, formatReport, isProjected, type AgentModel } from '../bench/faults/checker.js';
import { BACKEND_SCRIPT, FAULTS_RUNTIME, UPSTREAM_SCRIPT } from '../bench/faults/clients.js';
import type { DbSnapshot, History } from '../bench/faults/history.js';
import { eventDigests, expectedBackend, expectedScripted, frameDigest, logOutput } from '../bench/faults/output.js';
import { formatPlan, planFaults, planPgStops } from '../bench/faults/schedule.js';

/**
 * The fault suite's checker (bench/faults/checker.ts) on hand-made histories, no world: a correct
 * history and database pass every property; each deliberate bug is reported under its property.
 */
const AGENT = '00000000-0000-4000-8000-0000000000a1';
const R1 = '11111111-1111-4111-8111-111111111111';
const R2 = '22222222-2222-4222-8222-222222222222';
const user = (messageId: string, text = 'x') => ({ type: 'message.added', payload: { message: { messageId, role: 'user', parts: [{ text }] } } });
const agent = (messageId: string, opId?: string) => ({ type: 'message.added', payload: { message: { messageId, role: 'agent', parts: [{ text: 'y' }] }, ...(opId && { opId }) } });
const status = (s: string, blockedReason: string | null = null, opId?: string) => ({ type: 'run.status_changed', payload: { status: s, blockedReason, ...(opId && { opId }) } });

/** The test agent's script: `x` works, writes artifact `a` in two chunks, says `y` and completes; `ask` asks first. */
const SCRIPT: AgentModel = {
  runtime: 'scripted',
  config: {
    rules: [
      { match: { text: '^x' }, steps: [{ type: 'status', status: 'working' }, { type: 'artifact', artifactId: 'a', content: { text: 'abcd' }, chunks: 2 }, { type: 'message', text: 'y' }, { type: 'status', status: 'completed' }] },
      { match: { text: '^ask' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'y' }, { type: 'status', status: 'completed' }] },
    ],
  },
};
const OPTS = { agents: { faults: SCRIPT } };

/**
 * The v1.0 StreamResponse frames a stream / push receiver gets for a run's log, by sequence: the
 * server's own projection (libs/a2a projectEnvelope), so the digests the checker derives from the
 * log are held to what the server really sends.
 */
function framesOf(runId: string, log: ReadonlyArray<{ type: string; payload: Record<string, unknown> }>): Map<number, unknown> {
  const out = new Map<number, unknown>();
  let state: ProjectionState = { status: 'submitted', blockedReason: null };
  log.forEach((event, i) => {
    const r = projectEnvelope({ runId, threadId: 'c', sequence: i + 1, occurredAt: '2026-01-01T00:00:00.000Z', event: event as RunEvent }, state, '1.0');
    state = r.state;
    if (r.result) out.set(i + 1, r.result);
  });
  return out;
}

function world(): { history: History; db: DbSnapshot } {
  // R1: a plain task (send m1); R2: asks for input, answered by the follow-up m3
  const log1 = [
    { type: 'run.created', payload: {} },
    user('m1'),
    status('working', null, 'm:m1/0.0'),
    { type: 'artifact.updated', payload: { artifactId: 'a', parts: [{ text: 'ab' }], append: false, lastChunk: false, opId: 'm:m1/0.1#0' } },
    { type: 'artifact.updated', payload: { artifactId: 'a', parts: [{ text: 'cd' }], append: true, lastChunk: true, opId: 'm:m1/0.1#1' } },
    agent('g1', 'm:m1/0.2'),
    status('completed', null, 'm:m1/0.3'),
  ];
  const log2 = [
    { type: 'run.created', payload: {} },
    user('m2', 'ask'),
    { type: 'interaction.requested', payload: { blockedReason: 'input_required', blocking: true, kind: 'input', opId: 'm:m2/1.0', message: { messageId: 'q2', role: 'agent', parts: [{ text: 'Which day?' }] } } },
    { type: 'interaction.responded', payload: { blocking: true, message: user('m3').payload.message } },
    agent('g2', 'i:q/1.1'),
    status('completed', null, 'i:q/1.2'),
  ];
  const events = [...log1.map((e, i) => ({ runId: R1, sequence: i + 1, ...e })), ...log2.map((e, i) => ({ runId: R2, sequence: i + 1, ...e }))];
  const db: DbSnapshot = {
    runs: [
      { id: R1, agentId: AGENT, status: 'completed', blockedReason: null, lastSequence: 7, originMessageId: 'm1', createdBy: null, leaseExpired: true },
      { id: R2, agentId: AGENT, status: 'completed', blockedReason: null, lastSequence: 6, originMessageId: 'm2', createdBy: null, leaseExpired: false },
    ],
    events,
    messages: [
      { runId: R1, messageId: 'm1', role: 'user', sequence: 2 },
      { runId: R1, messageId: 'g1', role: 'agent', sequence: 6 },
      { runId: R2, messageId: 'm2', role: 'user', sequence: 2 },
      { runId: R2, messageId: 'q2', role: 'agent', sequence: 3 },
      { runId: R2, messageId: 'm3', role: 'user', sequence: 4 },
      { runId: R2, messageId: 'g2', role: 'agent', sequence: 5 },
    ],
    outbox: [],
    pushConfigs: [{ runId: R1, configId: 'c1', path: '/push/1', status: 'done', cursor: 7, deletedAt: null, leaseExpired: false }],
    agents: [{ id: AGENT, slug: 'faults' }],
  };
  const frames = framesOf(R1, log1);
  const digest = (sequence: number) => frameDigest(frames.get(sequence))!;
  const answer = {
    state: 'TASK_STATE_COMPLETED',
    statusMessage: null,
    messages: [
      { messageId: 'm1', role: 'user' as const, text: 'x' },
      { messageId: 'g1', role: 'agent' as const, text: 'y' },
    ],
    artifacts: [{ artifactId: 'a', text: 'ab\ncd' }],
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
          { api: 'B', binding: 'HTTP+JSON', outcome: 'ok', taskId: R1, state: 'TASK_STATE_COMPLETED', task: answer, at: 20 },
        ],
        invokedAt: 10,
        completedAt: 25,
      },
      {
        id: 2,
        client: 1,
        kind: 'send',
        messageId: 'm2',
        taskId: R2,
        outcome: 'ok',
        attempts: [
          {
            api: 'A',
            binding: 'JSONRPC',
            outcome: 'ok',
            taskId: R2,
            state: 'TASK_STATE_INPUT_REQUIRED',
            task: { state: 'TASK_STATE_INPUT_REQUIRED', statusMessage: { messageId: 'q2', role: 'agent', text: 'Which day?' }, messages: [{ messageId: 'm2', role: 'user', text: 'ask' }, { messageId: 'q2', role: 'agent', text: 'Which day?' }], artifacts: [] },
            at: 30,
          },
        ],
        invokedAt: 30,
        completedAt: 31,
      },
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
        seen: [3, 4, 5, 6, 7],
        frames: [3, 4, 5, 6, 7].map(digest),
        finalSeen: { sequence: 7, state: 'TASK_STATE_COMPLETED', statusMessage: null },
        final: true,
        connections: 2,
        segments: [
          { api: 'A', binding: 'JSONRPC', after: null, frames: 3, end: 'cut' },
          { api: 'B', binding: 'HTTP+JSON', after: 4, frames: 3, end: 'final' },
        ],
      },
    ],
    pushConfigs: [{ taskId: R1, configId: 'c1', path: '/push/1', createdWith: 'send' }],
    // at-least-once: 4 was re-sent after a crash, one attempt was answered 500
    pushReceipts: [3, 4, 4, 5, 6, 7].map((sequence, i) => ({ path: '/push/1', taskId: R1, sequence, webhookId: `msg_c1_${sequence}`, status: i === 2 ? 500 : 200, at: i, digest: digest(sequence) })),
    backendCalls: [],
    faults: [],
  };
  return { history, db };
}

const violated = (h: History, d: DbSnapshot) => check(h, d, OPTS).violations.map((v) => v.property);
const of = (h: History, d: DbSnapshot, property: string, opts: Parameters<typeof check>[2] = OPTS) => check(h, d, opts).violations.filter((v) => v.property === property);

/** Replace run `runId`'s log by `log` (sequences 1..n), its last sequence and status following it. */
function relog(db: DbSnapshot, runId: string, log: Array<{ type: string; payload: Record<string, unknown> }>, status?: string): void {
  db.events = [...db.events.filter((e) => e.runId !== runId), ...log.map((e, i) => ({ runId, sequence: i + 1, ...e }))];
  const run = db.runs.find((r) => r.id === runId)!;
  run.lastSequence = log.length;
  if (status) run.status = status;
}
const logOf = (db: DbSnapshot, runId: string) => db.events.filter((e) => e.runId === runId).sort((a, b) => a.sequence - b.sequence).map(({ type, payload }) => ({ type, payload }));

describe('fault suite checker', () => {
  it('a correct history and database: every property checked, no violation', () => {
    const { history, db } = world();
    const result = check(history, db, OPTS);
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
      'no-duplicate-operation',
      'output-is-script',
      'failed-only-when-declared',
      'acknowledged-tail',
      'seen-is-logged',
      'one-call-per-execution',
    ]);
    expect(result.violations).toEqual([]);
    expect(result.properties.find((p) => p.name === 'output-is-script')!.checked).toBe('2 runs');
    expect(formatReport(result, 5, 0).split('\n').at(-1)).toBe('faults: 5 operations, 0 faults, 0 violations');
  });

  it('(a) a skipped sequence in a run log', () => {
    const { history, db } = world();
    db.events = db.events.filter((e) => !(e.runId === R1 && e.sequence === 4));
    const result = check(history, db, OPTS);
    const gap = result.violations.filter((v) => v.property === 'gapless-log');
    expect(gap).toHaveLength(1);
    expect(gap[0]).toMatchObject({ runId: R1, message: expect.stringContaining('missing [4]') });
    // the stream and the push receiver saw an event the log no longer has
    expect(violated(history, db)).toEqual(expect.arrayContaining(['stream-contiguous', 'push-delivered', 'seen-is-logged', 'output-is-script']));
    expect(formatReport(result, 5, 0)).toMatch(/^FAIL gapless-log/m);
    expect(formatReport(result, 5, 0).split('\n').at(-1)).toBe(`faults: 5 operations, 0 faults, ${result.violations.length} violations`);
  });

  it('(b) an acknowledged task that is not in the database', () => {
    const { history, db } = world();
    db.runs = db.runs.filter((r) => r.id !== R2);
    db.events = db.events.filter((e) => e.runId !== R2);
    db.messages = db.messages.filter((m) => m.runId !== R2);
    const v = of(history, db, 'acknowledged-exists');
    expect(v.map((x) => x.operationId)).toEqual([2, 3]);
    expect(v[0]!.message).toContain(`task ${R2}, which is not in the database`);
    // the follow-up it acknowledged is missing from the log too
    expect(violated(history, db)).toContain('one-message-per-followup');
  });

  it('(c) a stream client that saw a gap across its resume (and one that saw a repeat)', () => {
    const { history, db } = world();
    delete history.streams[0]!.frames;
    history.streams[0]!.seen = [3, 5, 6, 7];
    expect(check(history, db, OPTS).violations).toEqual([expect.objectContaining({ property: 'stream-contiguous', runId: R1, message: expect.stringContaining('saw [3,5,6,7], the log projects [3,4,5,6,7]') })]);
    history.streams[0]!.seen = [3, 4, 4, 5, 6, 7];
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
    const v = check(history, db, OPTS).violations;
    expect(v).toEqual([expect.objectContaining({ property: 'one-run-per-message', message: `messageId m1 created 2 runs: ${R1}, ${dup}` })]);

    const second = world();
    second.history.operations[0]!.attempts[0] = { api: 'A', binding: 'JSONRPC', outcome: 'ok', taskId: R2, at: 10 };
    expect(check(second.history, second.db, OPTS).violations).toEqual([expect.objectContaining({ property: 'one-run-per-message', operationId: 1, message: expect.stringContaining('2 different tasks') })]);
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
    expect(of(history, db, 'no-expired-lease')).toHaveLength(1);
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
    // the failure itself is not a declared one either (failed-only-when-declared); the output up to it is the script's
    expect(violated(history, db).sort()).toEqual(['failed-only-when-declared', 'lost-only-when-lost']);
    expect(of(history, db, 'lost-only-when-lost')).toEqual([expect.objectContaining({ runId: R2, message: expect.stringContaining('while blocked on its caller (input_required') })]);

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
    expect(of(second.history, second.db, 'lost-only-when-lost', {})).toEqual([]); // no stale time given: not judged
    expect(of(second.history, second.db, 'lost-only-when-lost', { staleAfterMs: 15_000 })).toEqual([
      expect.objectContaining({ property: 'lost-only-when-lost', runId: R1, message: expect.stringContaining('700 ms after its sequence 3') }),
    ]);
    // 20 s of silence: a fair verdict
    second.db.events.find((e) => e.runId === R1 && e.sequence === 4)!.createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, 22)).toISOString();
    expect(of(second.history, second.db, 'lost-only-when-lost', { staleAfterMs: 15_000 })).toEqual([]);
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

  it('no-duplicate-operation: every step recorded twice (same opIds), an agent message appended twice under a fresh sequence, a chunk written twice', () => {
    // #42: after a short PostgreSQL stop, a second execution recorded every step again
    const { history, db } = world();
    const log = logOf(db, R1);
    relog(db, R1, [...log.slice(0, 6), ...log.slice(2, 6), log[6]!]);
    const v = of(history, db, 'no-duplicate-operation');
    expect(v).toHaveLength(1);
    expect(v[0]!.message).toContain(`run ${R1} (faults, completed, 0 resumptions): 4 operations more than once (m:m1/0.0 at 3, 7; m:m1/0.1#0 at 4, 8; m:m1/0.1#1 at 5, 9; …), 1 agent message more than once (g1 at 6, 10), 2 artifact chunks more than once`);
    expect(violated(history, db)).toEqual(expect.arrayContaining(['output-is-script']));

    // the agent message alone, appended again under a new sequence (the completion after it)
    const second = world();
    const log1 = logOf(second.db, R1);
    relog(second.db, R1, [...log1.slice(0, 6), log1[5]!, log1[6]!]);
    expect(of(second.history, second.db, 'no-duplicate-operation')).toEqual([
      expect.objectContaining({ runId: R1, message: expect.stringMatching(/1 operation more than once \(m:m1\/0\.2 at 6, 7\), 1 agent message more than once \(g1 at 6, 7\)$/) }),
    ]);
    expect(of(second.history, second.db, 'output-is-script')[0]!.message).toContain('output item 5 is message "y" at sequence 7 (a repeat of sequence 6), the script\'s is status completed');

    // chunks without opIds (the a2a runtime's): a chunk that does not append, twice
    const third = world();
    const bare = logOf(third.db, R1).map((e) => ({ ...e, payload: { ...e.payload, opId: undefined } }));
    relog(third.db, R1, [...bare.slice(0, 5), bare[3]!, ...bare.slice(5)]);
    expect(of(third.history, third.db, 'no-duplicate-operation')[0]!.message).toMatch(/1 artifact chunk more than once \(a#0 at 4, 6\)$/);
  });

  it('output-is-script: a payload replaced, output missing, a canceled run is a prefix, and the suite’s own scripts expand as their runtimes do', () => {
    const { history, db } = world();
    (db.events.find((e) => e.runId === R1 && e.sequence === 5)!.payload as { parts: unknown }).parts = [{ text: 'XY' }];
    expect(of(history, db, 'output-is-script')).toEqual([
      expect.objectContaining({ runId: R1, message: expect.stringContaining('output item 3 is artifact a + "XY" at sequence 5, the script\'s is artifact a + "cd"') }),
    ]);

    // the agent's message lost (a bookkeeping event in its place)
    const second = world();
    second.db.events.find((e) => e.runId === R1 && e.sequence === 6)!.type = 'run.execution_resumed';
    expect(of(second.history, second.db, 'output-is-script')[0]!.message).toContain('output item 4 is status completed at sequence 7, the script\'s is message "y"');

    // canceled after its first chunk: a prefix of the script, then canceled
    const third = world();
    relog(third.db, R1, [...logOf(third.db, R1).slice(0, 4), { type: 'run.status_changed', payload: { status: 'canceled', blockedReason: null, reason: 'canceled by the caller' } }], 'canceled');
    third.history = { ...third.history, streams: [], pushConfigs: [], pushReceipts: [] };
    third.history.operations.push({ id: 9, client: 0, kind: 'cancel', taskId: R1, outcome: 'ok', attempts: [{ api: 'A', binding: 'JSONRPC', outcome: 'ok', taskId: R1, state: 'TASK_STATE_CANCELED', at: 60 }], invokedAt: 60, completedAt: 61 });
    third.history.operations[0]!.attempts[1]!.task = undefined;
    expect(check(third.history, third.db, OPTS).violations.filter((v) => v.property !== 'acknowledged-exists')).toEqual([]);
    // but completed early is output missing
    (third.db.events.find((e) => e.runId === R1 && e.sequence === 5)!.payload as { status: string }).status = 'completed';
    third.db.runs[0]!.status = 'completed';
    expect(of(third.history, third.db, 'output-is-script')[0]!.message).toContain('output item 3 is status completed at sequence 5, the script\'s is artifact a + "cd"');

    // the suite's scripts, expanded from their definitions
    const input = (text: string) => ({ messageId: 'm', text });
    expect(expectedScripted(FAULTS_RUNTIME, [input('quick 1234')])).toEqual({
      items: ['status working', 'artifact out "abcd"', 'artifact out + "efgh"', 'message "done: quick 1234"', 'status completed'],
      end: 'terminal',
    });
    const slow = expectedScripted(FAULTS_RUNTIME, [input('slow 1')]).items;
    expect(slow).toEqual(['status working', 'message "step 0"', 'message "step 1"', 'artifact a2 "part-2"', 'artifact a2 + "-abcdef"', 'message "step 3"', 'message "step 4"', 'artifact a5 "part-5"', 'artifact a5 + "-abcdef"', 'message "step 6"', 'message "step 7"', 'status completed']);
    expect(expectedScripted(FAULTS_RUNTIME, [input('ask 1')])).toEqual({ items: ['ask input_required "Which day?"'], end: 'blocked' });
    expect(expectedScripted(FAULTS_RUNTIME, [input('ask 1'), input('Friday')]).items).toEqual(['ask input_required "Which day?"', 'message "Booked for Friday"', 'status completed']);
    expect(expectedScripted(FAULTS_RUNTIME, [input('hold 1')])).toEqual({ items: ['status working'], end: 'held' });
    expect(expectedScripted(FAULTS_RUNTIME, [input('nothing matches')]).items).toEqual(['status working', 'message "nothing matches"', 'status completed']);
    expect(expectedBackend(BACKEND_SCRIPT, 'job 1').items).toEqual([
      'status working',
      'artifact report "section 0 of job 1;"',
      'artifact report + "section 1 of job 1;"',
      'artifact report + "section 2 of job 1;"',
      'artifact report + "section 3 of job 1;"',
      'message "Report on job 1 written"',
      'status completed',
    ]);
    expect(expectedBackend(UPSTREAM_SCRIPT, 'job 1').items).toEqual(['status working "Working on job 1"', 'artifact summary "part 0 of job 1;"', 'artifact summary + "part 1 of job 1;"', 'artifact summary + "part 2 of job 1;"', 'artifact summary + "part 3 of job 1;"', 'status completed "Done: job 1"']);
    // chunks a runtime merged (the a2a runtime reconciling after a resumption) are the same output
    const merged = [{ sequence: 1, type: 'artifact.updated', payload: { artifactId: 'summary', parts: [{ text: 'p0' }], append: false } }, { sequence: 2, type: 'artifact.updated', payload: { artifactId: 'summary', parts: [{ text: 'p1' }, { text: 'p2' }], append: true } }];
    expect(logOutput(merged).map((x) => x.item)).toEqual(['artifact summary "p0"', 'artifact summary + "p1"', 'artifact summary + "p2"']);
  });

  it('failed-only-when-declared: a failure for any reason but a spent budget shows its reason; a cancel nobody sent', () => {
    const failWith = (payload: Record<string, unknown>) => {
      const w = world();
      relog(w.db, R1, [...logOf(w.db, R1).slice(0, 4), { type: 'run.status_changed', payload: { status: 'failed', blockedReason: null, ...payload } }], 'failed');
      w.history = { ...w.history, streams: [], pushConfigs: [], pushReceipts: [], operations: w.history.operations.slice(1) };
      return of(w.history, w.db, 'failed-only-when-declared');
    };
    expect(failWith({ reason: 'the agent runtime failed', message: { messageId: 'f', role: 'agent', parts: [{ text: 'Failed: the agent runtime failed' }] } })).toEqual([
      expect.objectContaining({ runId: R1, message: `run ${R1} (faults, input "x") failed at sequence 5: "the agent runtime failed" (0 resumptions)` }),
    ]);
    expect(failWith({ reason: 'the execution was lost (its lease expired)' })[0]!.message).toContain('"the execution was lost (its lease expired)"');
    // a runtime's own failure carries no reason: its message shows
    expect(failWith({ message: { messageId: 'f', role: 'agent', parts: [{ text: "The agent's backend failed: connect ECONNREFUSED 127.0.0.1:9" }] } })[0]!.message).toContain('ECONNREFUSED');
    // declared budgets
    expect(failWith({ reason: 'the execution was lost (its lease expired) (after 3 resumptions)' })).toEqual([]);
    expect(failWith({ reason: 'interaction 8ceadd7a-34e9-463a-9dc9-5bd6dcd32a34 expired' })).toEqual([]);

    const { history, db } = world();
    relog(db, R1, [...logOf(db, R1).slice(0, 3), { type: 'run.status_changed', payload: { status: 'canceled', blockedReason: null, reason: 'canceled by the caller' } }], 'canceled');
    history.operations = history.operations.slice(1);
    history.streams = [];
    history.pushReceipts = [];
    history.pushConfigs = [];
    expect(of(history, db, 'failed-only-when-declared')).toEqual([expect.objectContaining({ message: expect.stringContaining('was canceled at sequence 4 ("canceled by the caller") but no cancel was sent for it') })]);
    history.operations.push({ id: 9, client: 0, kind: 'cancel', taskId: R1, outcome: 'unknown', attempts: [{ api: 'A', binding: 'JSONRPC', outcome: 'unknown', error: 'timeout', at: 60 }], invokedAt: 60, completedAt: 80 });
    expect(of(history, db, 'failed-only-when-declared')).toEqual([]);
  });

  it('push-delivered: a config created later on a running task is owed every event after its creation', () => {
    const { history, db } = world();
    const t = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
    for (const e of db.events) if (e.runId === R1) e.createdAt = t(e.sequence * 100);
    // created while sequence 4 was the last (between its append at 400 ms and the next at 500 ms)
    db.pushConfigs.push({ runId: R1, configId: 'c2', path: '/push/2', status: 'done', cursor: 7, deletedAt: null, leaseExpired: false, createdAt: t(450) });
    history.pushConfigs.push({ taskId: R1, configId: 'c2', path: '/push/2', createdWith: 'later' });
    const receive = (...sequences: number[]) => (history.pushReceipts = [...world().history.pushReceipts, ...sequences.map((sequence) => ({ path: '/push/2', taskId: R1, sequence, webhookId: `c2_${sequence}`, status: 200, at: 0 }))]);
    receive();
    expect(of(history, db, 'push-delivered')).toEqual([expect.objectContaining({ message: `push config c2 of task ${R1} (later, created before sequence 5) received [], owed [5,6,7]; never received [5,6,7]` })]);
    receive(6, 7);
    expect(of(history, db, 'push-delivered')[0]!.message).toContain('never received [5]');
    receive(5, 6, 7);
    expect(of(history, db, 'push-delivered')).toEqual([]);
    // an event appended in the same ms as the insert may or may not be owed
    db.pushConfigs.at(-1)!.createdAt = t(500);
    receive(6, 7);
    expect(of(history, db, 'push-delivered')).toEqual([]);
    receive(5, 6, 7);
    expect(of(history, db, 'push-delivered')).toEqual([]);
    // without the config's creation time only a suffix is asked for, as before
    delete db.pushConfigs.at(-1)!.createdAt;
    receive();
    expect(of(history, db, 'push-delivered')).toEqual([]);
  });

  it('acknowledged-tail: an answer or a stream end that the log does not end with', () => {
    const { history, db } = world();
    // the blocking send was answered COMPLETED with half the artifact and another status message
    const answer = history.operations[0]!.attempts[1]!.task!;
    answer.artifacts = [{ artifactId: 'a', text: 'ab' }];
    answer.statusMessage = { messageId: 'z', role: 'agent', text: 'all done' };
    expect(of(history, db, 'acknowledged-tail')).toEqual([
      expect.objectContaining({
        operationId: 1,
        message: `send 1 on B HTTP+JSON was answered TASK_STATE_COMPLETED for task ${R1} with status message z "all done", the log's none; artifacts [a "ab"], the log's [a "ab\\ncd"]`,
      }),
    ]);
    // an answer at input-required showing an agent message the log does not begin with
    const second = world();
    second.history.operations[1]!.attempts[0]!.task!.messages[1]!.text = 'Which month?';
    expect(of(second.history, second.db, 'acknowledged-tail')[0]!.message).toContain('agent messages [q2 "Which month?"], which the log\'s [q2 "Which day?"; g2 "y"] does not begin with');
    // a stream that ended on a state the run is not in
    const third = world();
    third.history.streams[0]!.finalSeen = { sequence: 7, state: 'TASK_STATE_FAILED', statusMessage: null };
    expect(of(third.history, third.db, 'acknowledged-tail')[0]!.message).toContain('stream 5 ended with TASK_STATE_FAILED (status message none) at sequence 7');
    // a stream opened on a terminal snapshot, compared as an answer
    third.history.streams[0]!.finalSeen = undefined;
    third.history.streams[0]!.snapshot = { state: 'TASK_STATE_COMPLETED', statusMessage: null, messages: [], artifacts: [{ artifactId: 'a', text: 'ab\ncd' }] };
    expect(of(third.history, third.db, 'acknowledged-tail')[0]!.message).toContain('agent messages [], the log\'s [g1 "y"]');
  });

  it('seen-is-logged: a payload replaced after clients saw it, and a log tail lost with its counter', () => {
    const { history, db } = world();
    (db.events.find((e) => e.runId === R1 && e.sequence === 5)!.payload as { parts: unknown }).parts = [{ text: 'XY' }];
    expect(of(history, db, 'seen-is-logged').map((v) => v.message)).toEqual([
      `stream 5 was shown at sequence 5 of run ${R1}: artifact a append last "cd"; the log's event projects artifact a append last "XY"`,
      `push config /push/1 was shown at sequence 5 of run ${R1}: artifact a append last "cd"; the log's event projects artifact a append last "XY"`,
    ]);
    // a status message replaced
    const second = world();
    (second.db.events.find((e) => e.runId === R1 && e.sequence === 6)!.payload as { message: { parts: unknown } }).message.parts = [{ text: 'z' }];
    expect(of(second.history, second.db, 'seen-is-logged')[0]!.message).toContain('status TASK_STATE_WORKING g1 "y"; the log\'s event projects status TASK_STATE_WORKING g1 "z"');

    // the last two events vanished with the counter: the run is back to working at sequence 5
    const third = world();
    relog(third.db, R1, logOf(third.db, R1).slice(0, 5), 'working');
    third.db.runs[0]!.leaseExpired = false;
    expect(of(third.history, third.db, 'seen-is-logged').map((v) => v.message)).toEqual([
      `stream 5 was shown sequences [6,7] of run ${R1}, which the log does not hold (last sequence 5, 5 events)`,
      `push config /push/1 was shown sequences [6,7] of run ${R1}, which the log does not hold (last sequence 5, 5 events)`,
    ]);
    // the digests the checker derives from a log are those of what libs/a2a projects from it, interactions included
    const prompt = (text: string) => ({ messageId: text, role: 'agent', parts: [{ text }] });
    const interactions = [
      { type: 'run.created', payload: {} },
      user('m9'),
      { type: 'interaction.requested', payload: { interactionId: 'i1', kind: 'input', blocking: false, blockedReason: null, message: prompt('fyi') } },
      { type: 'interaction.requested', payload: { interactionId: 'i2', kind: 'auth', blocking: true, blockedReason: 'auth_required', message: prompt('sign in') } },
      { type: 'interaction.expired', payload: { interactionId: 'i2', blocking: true, outcome: 'continue' } },
      { type: 'interaction.responded', payload: { interactionId: 'i1', blocking: false, message: user('m10').payload.message } },
      { type: 'interaction.requested', payload: { interactionId: 'i3', kind: 'confirmation', blocking: true, blockedReason: 'confirmation_required', message: prompt('sure?') } },
      { type: 'interaction.expired', payload: { interactionId: 'i3', blocking: true, outcome: 'fail' } },
      { type: 'run.status_changed', payload: { status: 'failed', blockedReason: null, reason: 'interaction i3 expired', message: prompt('Failed: nobody answered in time') } },
    ];
    for (const log of [logOf(world().db, R1), logOf(world().db, R2), interactions]) {
      expect(eventDigests(log.map((e, i) => ({ sequence: i + 1, ...e })))).toEqual(new Map([...framesOf(R1, log)].map(([q, f]) => [q, frameDigest(f)])));
    }
  });

  it('one-call-per-execution: a second request for one execution (or a second upstream task for one run) unless a takeover was recorded', () => {
    const { history, db } = world();
    const webhookId = `run_${R1}_76493a10208acf02`;
    history.backendCalls = [
      { backend: 'http', key: webhookId, runId: R1, trigger: 'created', at: 1_000 },
      { backend: 'http', key: webhookId, runId: R1, trigger: 'created', at: 1_400 },
      { backend: 'a2a', key: 'm2', taskId: 'up-1', trigger: 'new', at: 2_000 },
    ];
    expect(of(history, db, 'one-call-per-execution')).toEqual([
      expect.objectContaining({ runId: R1, message: `the http backend got 2 requests for execution ${webhookId} of run ${R1} (its log records 0 resumptions; completed): +1.0 s created, +1.4 s created` }),
    ]);
    // a takeover recorded in the log allows one more
    const log = logOf(db, R1);
    relog(db, R1, [...log.slice(0, 4), { type: 'run.execution_resumed', payload: { attempt: 1, reason: 'the execution was lost (its lease expired)' } }, ...log.slice(4)]);
    history.streams = [];
    history.pushReceipts = [];
    history.pushConfigs = [];
    expect(of(history, db, 'one-call-per-execution')).toEqual([]);
    // the upstream started two tasks for R2's messageId; a follow-up on its task is not a new one
    history.backendCalls.push({ backend: 'a2a', key: 'm2', taskId: 'up-2', trigger: 'new', at: 2_500 }, { backend: 'a2a', key: 'm3', taskId: 'up-1', trigger: 'continued', at: 3_000 });
    expect(of(history, db, 'one-call-per-execution')).toEqual([
      expect.objectContaining({ runId: R2, message: `the upstream A2A agent started 2 tasks for messageId m2 of run ${R2} (its log records 0 resumptions; completed): +2.0 s new (task up-1), +2.5 s new (task up-2)` }),
    ]);
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

  it('FAULTS_PG_STOPS: exactly the stops given, spread over the load, never overlapping', () => {
    expect(planPgStops([30, 30], 120_000)).toEqual([
      { at: 16_000, kind: 'pg-stop', target: 'pg', durationMs: 30_000 },
      { at: 72_000, kind: 'pg-stop', target: 'pg', durationMs: 30_000 },
    ]);
    expect(planPgStops([8], 30_000)).toEqual([{ at: 10_000, kind: 'pg-stop', target: 'pg', durationMs: 8_000 }]);
    // stops longer than their slot follow each other, 3 s apart
    const tight = planPgStops([30, 30], 30_000);
    expect(tight.map((f) => f.at)).toEqual([3_000, 36_000]);
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
