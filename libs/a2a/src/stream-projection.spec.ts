import { describe, expect, it } from 'vitest';
import type { SequencedOutputEnvelope } from '#libs/contracts';
import { projectEnvelope, projectSharedEnvelope, stringifyStreamResult } from './stream-projection.js';

const base = { runId: 'r1', threadId: 't1', occurredAt: '2026-11-27T12:00:00.000Z' };
const agentMessage = (sequence: number): SequencedOutputEnvelope => ({
  ...base,
  sequence,
  event: { type: 'message.added', payload: { message: { messageId: `m${sequence}`, role: 'agent', parts: [{ text: `hello ${sequence}` }] } } },
} as SequencedOutputEnvelope);

describe('shared stream projection (the streams of one run share an envelope)', () => {
  it('projects an envelope once per version and state: later subscribers get the same result object', () => {
    const env = agentMessage(3);
    const working = { status: 'working' as const, blockedReason: null };
    const a = projectSharedEnvelope(env, working, '1.0');
    const b = projectSharedEnvelope(env, { ...working }, '1.0');
    expect(b).toBe(a);
    expect(b).toEqual(projectEnvelope(env, working, '1.0'));
    // another version, another state: their own projections, each equal to the plain one
    const v03 = projectSharedEnvelope(env, working, '0.3');
    expect(v03).not.toBe(a);
    expect(v03).toEqual(projectEnvelope(env, working, '0.3'));
    const blocked = { status: 'working' as const, blockedReason: 'input_required' as const };
    const c = projectSharedEnvelope(env, blocked, '1.0');
    expect(c).not.toBe(a);
    expect(c).toEqual(projectEnvelope(env, blocked, '1.0'));
    expect(JSON.stringify(c.result)).not.toBe(JSON.stringify(a.result));
  });

  it('serializes a result once, to exactly the bytes of JSON.stringify', () => {
    const { result } = projectSharedEnvelope(agentMessage(4), { status: 'working', blockedReason: null }, '1.0');
    const json = stringifyStreamResult(result!);
    expect(json).toBe(JSON.stringify(result));
    expect(stringifyStreamResult(result!)).toBe(json);
    // a JSON-RPC frame built around it equals the one built whole
    const head = `{"jsonrpc":"2.0","id":${JSON.stringify('req-7')},"result":`;
    expect(`${head}${json}}`).toBe(JSON.stringify({ jsonrpc: '2.0', id: 'req-7', result }));
  });
});
