import { describe, expect, it } from 'vitest';
import { deriveTaskState } from './task-state.js';

describe('A2A task state (view of Run.status + blockedReason)', () => {
  it('derives the A2A task state from status plus the interaction overlay', () => {
    expect(deriveTaskState('working', null)).toBe('TASK_STATE_WORKING');
    expect(deriveTaskState('working', 'input_required')).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(deriveTaskState('working', 'confirmation_required')).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(deriveTaskState('working', 'auth_required')).toBe('TASK_STATE_AUTH_REQUIRED');
    // a terminal status wins over a stale overlay
    expect(deriveTaskState('canceled', 'input_required')).toBe('TASK_STATE_CANCELED');
    expect(deriveTaskState('submitted', null)).toBe('TASK_STATE_SUBMITTED');
    expect(deriveTaskState('rejected', null)).toBe('TASK_STATE_REJECTED');
  });

});
