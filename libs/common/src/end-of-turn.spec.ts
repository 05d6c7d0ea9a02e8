import { describe, expect, it } from 'vitest';
import { endOfTurn } from './end-of-turn.js';

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

describe('endOfTurn', () => {
  it('runs once at the end of a turn however often it was asked for in it, not before', async () => {
    let runs = 0;
    const soon = endOfTurn(() => runs++);
    soon();
    soon();
    soon();
    expect(runs).toBe(0);
    await nextTurn();
    expect(runs).toBe(1);
  });

  it('a call made while it runs schedules the next turn', async () => {
    const seen: number[] = [];
    let turn = 0;
    const soon = endOfTurn(() => {
      seen.push(turn);
      if (seen.length < 3) soon();
    });
    soon();
    for (turn = 1; turn <= 4; turn++) await nextTurn();
    expect(seen).toEqual([1, 2, 3]);
  });
});
