import { describe, expect, it } from 'vitest';
import { GroupCommit } from './group-commit.js';

/** A GroupCommit whose writes wait until the test lets them go, recording each batch. */
function controlled(opts: { maxInFlight: number; maxBatch: number; keyed?: boolean }) {
  const batches: string[][] = [];
  const gates: Array<() => void> = [];
  const gc = new GroupCommit<string, string>(
    async (batch) => {
      batches.push([...batch]);
      await new Promise<void>((r) => gates.push(r));
      return batch.map((item) => (item.endsWith('!') ? { status: 'rejected', reason: new Error(item) } : { status: 'fulfilled', value: item.toUpperCase() }));
    },
    { maxInFlight: opts.maxInFlight, maxBatch: opts.maxBatch, ...(opts.keyed && { key: (item: string) => item.split(':')[0]! }) },
  );
  const tick = () => new Promise((r) => setTimeout(r, 0));
  /** Let the writes in flight finish (and the next batches start). */
  const open = async () => {
    while (gates.length) gates.shift()!();
    await tick();
  };
  return { gc, batches, tick, open };
}

describe('GroupCommit', () => {
  it('writes the items of one turn together at its end, and batches what arrives while the slots are busy', async () => {
    const { gc, batches, open, tick } = controlled({ maxInFlight: 1, maxBatch: 3 });
    const results = Promise.allSettled(['a', 'b', 'c', 'd', 'e!'].map((x) => gc.submit(x)));
    // nothing is written synchronously: the turn's items go out together when it ends
    expect(batches).toEqual([]);
    await tick();
    expect(batches).toEqual([['a', 'b', 'c']]);
    const later = gc.submit('f');
    await tick();
    // the slot is busy: 'f' waits with 'd' and 'e!' (maxBatch 3)
    expect(batches).toEqual([['a', 'b', 'c']]);
    await open();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e!', 'f']]);
    await open();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e!', 'f']]);
    expect(await results).toMatchObject([
      { value: 'A' }, { value: 'B' }, { value: 'C' }, { value: 'D' }, { status: 'rejected', reason: { message: 'e!' } },
    ]);
    expect(await later).toBe('F');
  });

  it('at low load an item goes out in its own turn, without waiting for another', async () => {
    const { gc, batches, open, tick } = controlled({ maxInFlight: 2, maxBatch: 10 });
    const a = gc.submit('a');
    await tick();
    expect(batches).toEqual([['a']]);
    const b = gc.submit('b');
    await tick();
    // a second slot is free: 'b' does not wait for 'a'
    expect(batches).toEqual([['a'], ['b']]);
    await open();
    expect([await a, await b]).toEqual(['A', 'B']);
  });

  it('with a key, a batch holds one item per key: the next of a key waits for a later batch, in order', async () => {
    const { gc, batches, open, tick } = controlled({ maxInFlight: 1, maxBatch: 10, keyed: true });
    const results = ['x:0', 'x:1', 'y:1', 'x:2', 'z:1', 'y:2', 'x:3'].map((x) => gc.submit(x));
    await tick();
    expect(batches).toEqual([['x:0', 'y:1', 'z:1']]);
    for (let i = 0; i < 4; i++) await open();
    expect(batches).toEqual([['x:0', 'y:1', 'z:1'], ['x:1', 'y:2'], ['x:2'], ['x:3']]);
    expect(await Promise.all(results)).toEqual(['X:0', 'X:1', 'Y:1', 'X:2', 'Z:1', 'Y:2', 'X:3']);
  });
});
