import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { RunStatus } from '#libs/contracts';
import { canTransition, isSettled, isTerminal, statusesLeadingTo, TERMINAL_STATUSES } from './run-state.js';

const ALL: RunStatus[] = ['submitted', 'working', 'completed', 'failed', 'canceled', 'rejected'];

describe('run state machine', () => {
  it('has exactly four terminal statuses and none of them moves', () => {
    expect([...TERMINAL_STATUSES].sort()).toEqual(['canceled', 'completed', 'failed', 'rejected']);
    for (const from of TERMINAL_STATUSES) for (const to of ALL) expect(canTransition(from, to)).toBe(false);
  });

  it('lets active runs finish in any terminal status and submitted start working', () => {
    expect(canTransition('submitted', 'working')).toBe(true);
    for (const to of TERMINAL_STATUSES) {
      expect(canTransition('submitted', to)).toBe(true);
      expect(canTransition('working', to)).toBe(true);
    }
  });

  it('never goes back: working cannot return to submitted, nothing self-loops', () => {
    expect(canTransition('working', 'submitted')).toBe(false);
    for (const s of ALL) expect(canTransition(s, s)).toBe(false);
  });

  it('statusesLeadingTo is the inverse of canTransition', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ALL), fc.constantFrom(...ALL), (from, to) => {
        expect(statusesLeadingTo(to).includes(from)).toBe(canTransition(from, to));
      }),
    );
    expect(statusesLeadingTo('canceled').sort()).toEqual(['submitted', 'working']);
  });

  it('settles a blocking call on terminal or interrupted runs only', () => {
    expect(isSettled('working', null)).toBe(false);
    expect(isSettled('submitted', null)).toBe(false);
    expect(isSettled('working', 'auth_required')).toBe(true);
    for (const s of ALL) if (isTerminal(s)) expect(isSettled(s, null)).toBe(true);
  });
});
