import { describe, expect, it } from 'vitest';
import type { BackendCall } from '../bench/exactly-once/backend.js';
import { judge, outputOf, violations, type LogEvent, type StreamRecord } from '../bench/exactly-once/judge.js';

/**
 * The exactly-once scenarios' judge (bench/exactly-once/judge.ts) on hand-made logs, no world: a
 * run done once passes; a second execution, a failure, a second backend call nobody took over
 * and a stream that skipped or repeated a frame are each reported.
 */
const R1 = '11111111-1111-4111-8111-111111111111';
const INPUT = 'job n=2 d=0';
const expected = (input: string) => ['status:working', `artifact:out:${input} #0;`, `artifact:out:${input} #1;`, 'status:completed'];

type Ev = Omit<LogEvent, 'runId' | 'sequence'>;
const created: Ev = { type: 'run.created', payload: { status: 'submitted' } };
const user: Ev = { type: 'message.added', payload: { message: { messageId: 'm1', role: 'user', parts: [{ text: INPUT }] } } };
const status = (s: string, opId?: string, extra: Record<string, unknown> = {}): Ev => ({ type: 'run.status_changed', payload: { status: s, blockedReason: null, ...(opId && { opId }), ...extra } });
const chunk = (i: number, opId = `c${i}`): Ev => ({ type: 'artifact.updated', payload: { artifactId: 'out', parts: [{ text: `${INPUT} #${i};` }], append: i > 0, opId } });
const resumed: Ev = { type: 'run.execution_resumed', payload: { reason: 'lost', attempt: 1 } };
const log = (...events: Ev[]): LogEvent[] => events.map((e, i) => ({ runId: R1, sequence: i + 1, ...e }));
const once = log(created, user, status('working', 'w'), chunk(0), chunk(1), status('completed', 'done'));
const call = (trigger = 'created'): BackendCall => ({ webhookId: `run_${R1}_k`, runId: R1, trigger, applied: 0, at: 0, finished: true });

describe('exactly-once judge', () => {
  it('passes a run completed once with its output once (user messages and resumptions are not output)', () => {
    const events = log(created, user, status('working', 'w'), chunk(0), resumed, chunk(1), status('completed', 'done'));
    expect(outputOf(events)).toEqual(expected(INPUT));
    const v = judge({ runs: [{ id: R1, status: 'completed' }], events, expected, backendCalls: [call(), call('resumed')] });
    expect(violations(v)).toEqual([]);
    expect(v).toMatchObject({ completed: 1, resumptions: 1, runsResumed: 1, backendCalls: 2, untakenCalls: 0 });
  });

  it('reports a run executed twice: repeated opIds, output beyond the expected, the backend called again without a takeover', () => {
    const events = log(created, user, status('working', 'w'), status('working', 'w'), chunk(0), chunk(0), chunk(1), chunk(1), status('completed', 'done'));
    const v = judge({ runs: [{ id: R1, status: 'completed' }], events, expected, backendCalls: [call(), call()] });
    expect(v).toMatchObject({ completed: 1, duplicatedRuns: 1, duplicatedOps: 3, mismatched: 1, untakenCalls: 1, untakenRuns: 1 });
    expect(v.findings[0]!.duplicated).toBe(true);
    expect(violations(v).join('; ')).toMatch(/1 runs with duplicated output \(3 duplicated operations\).*1 backend calls without a recorded takeover/);
  });

  it('counts a second terminal status as not completed exactly once', () => {
    const events = log(created, user, status('working', 'w'), chunk(0), chunk(1), status('completed', 'done'), status('completed'));
    const v = judge({ runs: [{ id: R1, status: 'completed' }], events, expected });
    expect(v).toMatchObject({ completed: 0, multiTerminal: 1, duplicatedRuns: 1 });
  });

  it('reports a failed run (its failure is output that differs, not a duplicate) and an unfinished one', () => {
    const failed = log(created, user, status('working', 'w'), chunk(0), status('failed', undefined, { reason: 'the agent runtime failed' }));
    const v = judge({ runs: [{ id: R1, status: 'failed' }], events: failed, expected });
    expect(v).toMatchObject({ completed: 0, failed: 1, duplicatedRuns: 0, mismatched: 1 });
    expect(v.findings[0]!.problems.join('; ')).toMatch(/ended failed: status:failed \(the agent runtime failed\)/);
    const stuck = judge({ runs: [{ id: R1, status: 'working' }], events: log(created, user, status('working', 'w')), expected });
    expect(stuck).toMatchObject({ unfinished: 1, failed: 0 });
  });

  it('compares what a stream client saw after its snapshot with the log: gap, repeat, content, end', () => {
    const runs = [{ id: R1, status: 'completed' }];
    // sequences 3..6 are projected (working, two chunks, completed); the snapshot is at 2
    const frames = (ids: number[], key1 = `a:out:${INPUT} #0;`) => ids.map((id) => ({ id, key: id === 4 ? key1 : id === 5 ? `a:out:${INPUT} #1;` : null }));
    const stream = (seen: StreamRecord['seen'], final = true): StreamRecord => ({ client: 0, messageId: 'm1', taskId: R1, snapshot: 2, seen, final, connections: 2 });
    const verdict = (s: StreamRecord) => judge({ runs, events: once, expected, streams: [s] });
    expect(verdict(stream(frames([3, 4, 5, 6]))).badStreams).toBe(0);
    expect(verdict(stream(frames([3, 5, 6]))).streamProblems[0]).toMatch(/saw \[3,5-6\], the log projects \[3-6\]/);
    expect(verdict(stream(frames([3, 4, 4, 5, 6]))).badStreams).toBe(1);
    expect(verdict(stream(frames([3, 4, 5, 6], 'a:out:something else'))).streamProblems[0]).toMatch(/frame 4 carried/);
    // cut after 4 and never resumed: nothing missing up to 4, but the finished run's end was never seen
    expect(verdict(stream(frames([3, 4]), false)).streamProblems[0]).toMatch(/never saw the end of its completed run/);
    expect(verdict({ ...stream([]), taskId: null, snapshot: null, error: 'HTTP 503' }).streamProblems[0]).toMatch(/never got its task snapshot \(HTTP 503\)/);
  });
});
