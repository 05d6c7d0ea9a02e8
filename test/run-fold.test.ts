import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArtifactChunkInput, CanonicalMessage } from '#libs/contracts';
import { foldRunView, type RunRecord, type RunView, type RuntimeOp } from '#libs/runs';
import { prng } from './support/prng.js';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';

/**
 * foldRunView (the answer of a blocking SendMessage, folded from the envelopes the wake-ups
 * carried) against RunViews.view (the SQL read model of the projections) on the same logs,
 * appended through the append path: fixed cases and random ones, every historyLength.
 */
let ctx: INestApplicationContext;
let runs: TestRuns;
let seed: Awaited<ReturnType<typeof bootRuns>>['seed'];

beforeAll(async () => {
  ({ ctx, seed } = await bootRuns());
  runs = runsOf(ctx);
}, 60_000);

afterAll(async () => {
  await ctx?.close();
});

async function created(message: CanonicalMessage = { messageId: randomUUID(), role: 'user', parts: [{ text: 'go' }] }): Promise<{ run: RunRecord; message: CanonicalMessage }> {
  const r = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message, metadata: { from: 'test' } });
  expect(r.created).toBe(true);
  return { run: r.run, message: r.message! };
}

/** Timestamps as ISO strings (the SQL view's run comes through row_to_json, the created run's as Dates). */
function comparable(v: RunView): unknown {
  const run: Record<string, unknown> = { ...v.run };
  for (const k of ['createdAt', 'updatedAt', 'statusAt']) run[k] = new Date(run[k] as string).toISOString();
  return { ...v, run };
}

/** Apply `batches` of ops (one append each), then compare the fold of the log with the SQL view at several history lengths. */
async function foldAgrees(batches: RuntimeOp[][], message?: CanonicalMessage): Promise<void> {
  const { run, message: stored } = await created(message);
  for (const b of batches) await runs.ops.apply(seed.orgId, run.id, b);
  const log = await runs.readEvents(seed.orgId, run.id, run.lastSequence);
  for (const historyLength of [undefined, 0, 1, 2, 50]) {
    const folded = foldRunView(run, [stored], log, { historyLength });
    expect(folded, `fold of ${JSON.stringify(batches)}`).not.toBeNull();
    const read = await runs.view(seed.orgId, run.id, { historyLength });
    expect(comparable(folded!)).toEqual(comparable(read));
  }
}

const msg = (text: string, extra: Partial<CanonicalMessage> = {}) => ({ parts: [{ text }], ...extra });
const art = (chunk: ArtifactChunkInput): RuntimeOp => ({ op: 'artifact', chunk });

describe('foldRunView agrees with RunViews.view', () => {
  it('folds an echo run (working, a message, completed in one append)', async () => {
    await foldAgrees([[{ op: 'status', status: 'working' }, { op: 'message', message: msg('echo: go') }, { op: 'status', status: 'completed' }]]);
  });

  it('folds status messages, metadata, a saved state and streamed artifacts over several appends', async () => {
    await foldAgrees(
      [
        [{ op: 'status', status: 'working', message: msg('starting', { metadata: { step: 1 } }) }],
        [art({ artifactId: 'r', name: 'report', parts: [{ text: 'a' }], metadata: { v: 1 }, extensions: ['https://example.com/ext'] })],
        [art({ artifactId: 'r', parts: [{ text: 'b' }], append: true }), { op: 'state', state: { cursor: 2 } }],
        [art({ artifactId: 'x', description: 'other', parts: [{ data: { n: 1.5, list: [1, 'two'] } }], lastChunk: true })],
        [art({ artifactId: 'r', name: 'renamed', parts: [{ text: 'c' }], append: true, lastChunk: true, metadata: { v: 2 } })],
        [{ op: 'status', status: 'completed', message: msg('done') }],
      ],
      { messageId: randomUUID(), role: 'user', parts: [{ text: 'go' }, { data: { z: 1, a: [true, null] } }], metadata: { b: 2, a: 1 }, extensions: ['https://example.com/ext'] },
    );
  });

  it('folds a reset chunk, a failure, and a run that never changed status', async () => {
    await foldAgrees([[art({ artifactId: 'a', parts: [{ text: '1' }] }), art({ artifactId: 'a', parts: [{ text: '2' }], append: true }), art({ artifactId: 'a', parts: [{ text: 'new' }] })], [{ op: 'status', status: 'failed', message: msg('boom') }]]);
    await foldAgrees([[{ op: 'message', message: msg('just a message') }]]);
    await foldAgrees([]);
  });

  it('folds random logs', async () => {
    const random = prng(12345);
    const rnd = (n: number) => Math.floor(random() * n);
    for (let t = 0; t < 15; t++) {
      const batches: RuntimeOp[][] = [];
      const nb = 1 + rnd(5);
      for (let b = 0; b < nb; b++) {
        const batch: RuntimeOp[] = [];
        for (let k = 1 + rnd(4); k > 0; k--) {
          const r = rnd(10);
          if (r < 2) {
            batch.push({ op: 'status', status: 'working', ...(rnd(2) ? { message: msg(`w${t}.${b}`) } : {}) });
          } else if (r < 4) batch.push({ op: 'message', message: msg(`m${t}.${b}.${k}`, rnd(2) ? { metadata: { k } } : {}) });
          else
            batch.push(
              art({
                artifactId: ['a', 'b', 'c'][rnd(3)]!,
                parts: [{ text: `p${t}.${b}.${k}` }],
                append: rnd(3) > 0,
                lastChunk: rnd(3) === 0,
                ...(rnd(3) === 0 ? { name: `n${rnd(5)}` } : {}),
                ...(rnd(4) === 0 ? { description: `d${rnd(5)}` } : {}),
                ...(rnd(4) === 0 ? { metadata: { r: rnd(100) } } : {}),
                ...(rnd(5) === 0 ? { extensions: [`https://example.com/e${rnd(3)}`] } : {}),
              }),
            );
        }
        batches.push(batch);
      }
      if (rnd(3) > 0) batches.push([{ op: 'status', status: rnd(2) ? 'completed' : 'failed', ...(rnd(2) ? { message: msg('end') } : {}) }]);
      await foldAgrees(batches);
    }
  });
});

describe('foldRunView gives up', () => {
  it('on an interaction, a gap, another run or a run that is not as created', async () => {
    const { run, message } = await created();
    await runs.ops.apply(seed.orgId, run.id, [{ op: 'status', status: 'working' }, { op: 'message', message: msg('one') }]);
    await runs.ops.apply(seed.orgId, run.id, [{ op: 'interaction', kind: 'input', message: msg('more?') }]);
    const log = await runs.readEvents(seed.orgId, run.id, run.lastSequence);
    expect(foldRunView(run, [message], log)).toBeNull();
    const before = log.filter((e) => e.event.type !== 'interaction.requested');
    expect(foldRunView(run, [message], before)).not.toBeNull();
    expect(foldRunView(run, [message], before.slice(1))).toBeNull();
    expect(foldRunView(run, [message], before.map((e) => ({ ...e, runId: randomUUID() })))).toBeNull();
    expect(foldRunView({ ...run, status: 'working' }, [message], before)).toBeNull();
  });
});
