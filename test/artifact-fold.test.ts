import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArtifactChunkInput } from '#libs/contracts';
import { DatabaseService } from '#libs/db';
import { BatchingRuntimeContext } from '#libs/execution';
import type { RuntimeOp } from '#libs/runs';
import { prng } from './support/prng.js';
import { bootRuns, runsOf, type TestRuns } from './support/runs.js';

/**
 * Several chunks of an artifact in ONE append (a runtime's back-to-back chunks, committed
 * together by BatchingRuntimeContext) are folded by the append statement exactly as appending
 * them one by one would: parts from the last chunk that does not append on (else after the
 * stored parts), the last name / description / metadata given, the last chunk's lastChunk, the
 * first write's extensions. Each chunk is still its own event with its own sequence.
 */
let ctx: INestApplicationContext;
let runs: TestRuns;
let seed: Awaited<ReturnType<typeof bootRuns>>['seed'];
let db: DatabaseService;

beforeAll(async () => {
  ({ ctx, seed, db } = await bootRuns());
  runs = runsOf(ctx);
}, 60_000);

afterAll(async () => {
  await ctx?.close();
});

async function workingRun(): Promise<string> {
  const { run } = await runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'go' }] } });
  await runs.setStatus(seed.orgId, run.id, 'working');
  return run.id;
}

const artifact = (chunk: ArtifactChunkInput): RuntimeOp => ({ op: 'artifact', chunk });

/** A BatchingRuntimeContext on `runId` (reads unused here). */
function contextOf(runId: string): BatchingRuntimeContext {
  const never = () => Promise.reject(new Error('not read here'));
  return new BatchingRuntimeContext(runs.ops, { orgId: seed.orgId, runId, threadId: 't', agentId: seed.agentId, revisionId: seed.revisionId }, { messageId: 'm', role: 'user', parts: [{ text: 'go' }] }, new AbortController().signal, {
    history: never,
    savedState: never,
    recorded: never,
    operationIds: never,
    extensions: never,
    childResult: never,
    triggerKey: randomUUID(),
  });
}

/** The transaction of each artifact chunk event of `runId`, in sequence order. */
async function chunkTxs(runId: string): Promise<string[]> {
  const rows = await db.query<{ tx: string }>(`SELECT xmin::text AS tx FROM run_events WHERE org_id = $1 AND run_id = $2 AND type = 'artifact.updated' ORDER BY sequence`, [seed.orgId, runId]);
  return rows.map((r) => r.tx);
}

async function until(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The same chunks on two runs: first in one append per chunk, then `batches` (lengths) per append. The artifacts and the log must agree. */
async function foldAgrees(chunks: ArtifactChunkInput[], batches: number[]): Promise<void> {
  const oneByOne = await workingRun();
  for (const c of chunks) await runs.ops.apply(seed.orgId, oneByOne, [artifact(c)]);
  const together = await workingRun();
  let at = 0;
  for (const n of batches) {
    await runs.ops.apply(seed.orgId, together, chunks.slice(at, at + n).map(artifact));
    at += n;
  }
  expect(at).toBe(chunks.length);
  const [a, b] = await Promise.all([runs.view(seed.orgId, oneByOne), runs.view(seed.orgId, together)]);
  expect(b.artifacts).toEqual(a.artifacts);
  // every chunk is its own event, at the same sequences
  const events = async (id: string) => (await runs.readEvents(seed.orgId, id, 0)).filter((e) => e.event.type === 'artifact.updated').map((e) => [e.sequence, e.event.payload]);
  expect(await events(together)).toEqual(await events(oneByOne));
}

describe('artifact chunks folded in one append', () => {
  it('appends a streamed artifact (first chunk creates, the others append, the last completes)', async () => {
    const chunks = Array.from({ length: 8 }, (_, i): ArtifactChunkInput => ({ artifactId: 'a', ...(i === 0 && { name: 'out.txt' }), parts: [{ text: `c${i};` }], append: i > 0, lastChunk: i === 7 }));
    await foldAgrees(chunks, [8]);
    await foldAgrees(chunks, [3, 5]);
    await foldAgrees(chunks, [1, 6, 1]);
  });

  it('starts over at a chunk that does not append, in the same append or after stored parts', async () => {
    const chunks: ArtifactChunkInput[] = [
      { artifactId: 'a', name: 'first', parts: [{ text: 'x' }, { text: 'y' }] },
      { artifactId: 'a', parts: [{ text: 'z' }], append: true, metadata: { k: 1 } },
      { artifactId: 'a', description: 'reset', parts: [{ text: 'new' }] },
      { artifactId: 'a', name: 'second', parts: [{ text: 'tail' }], append: true },
      { artifactId: 'a', parts: [{ text: 'end' }], append: true, lastChunk: true, metadata: { k: 2 } },
    ];
    await foldAgrees(chunks, [5]);
    await foldAgrees(chunks, [2, 3]);
    await foldAgrees(chunks, [1, 4]);
  });

  it('keeps artifacts apart, interleaved in one append, and an appending first chunk creates the artifact', async () => {
    const chunks: ArtifactChunkInput[] = [
      { artifactId: 'a', parts: [{ text: 'a0' }], append: true, extensions: ['https://example.com/ext/a'] },
      { artifactId: 'b', name: 'b', parts: [{ text: 'b0' }] },
      { artifactId: 'a', parts: [{ text: 'a1' }], append: true, extensions: ['https://example.com/ext/other'] },
      { artifactId: 'b', parts: [{ text: 'b1' }], append: true, lastChunk: true },
      { artifactId: 'a', parts: [{ data: { n: 2 } }], append: true, lastChunk: true },
    ];
    await foldAgrees(chunks, [5]);
    await foldAgrees(chunks, [1, 1, 3]);
  });

  it('folds random chunk sequences as appending them one by one (fixed seed)', async () => {
    const random = prng(20261127);
    const rand = (n: number) => Math.floor(random() * n);
    for (let round = 0; round < 12; round++) {
      const chunks = Array.from({ length: 2 + rand(7) }, (_, i): ArtifactChunkInput => ({
        artifactId: ['a', 'b'][rand(2)]!,
        ...(rand(3) === 0 && { name: `n${round}.${i}` }),
        ...(rand(4) === 0 && { description: `d${i}` }),
        ...(rand(4) === 0 && { metadata: { i } }),
        parts: Array.from({ length: 1 + rand(2) }, (_, j) => ({ text: `${round}.${i}.${j}` })),
        append: rand(3) !== 0,
        lastChunk: rand(4) === 0,
      }));
      const batches: number[] = [];
      for (let left = chunks.length; left > 0; ) {
        const n = 1 + rand(left);
        batches.push(n);
        left -= n;
      }
      await foldAgrees(chunks, batches);
    }
  }, 60_000);
});

describe('a streaming runtime\'s chunks (BatchingRuntimeContext)', () => {
  it('commits a chunk when the next one comes, and the last one at the end of the turn: a streamed artifact reaches readers as it is made', async () => {
    const runId = await workingRun();
    const ctx = contextOf(runId);
    await ctx.emitArtifact({ artifactId: 'a', parts: [{ text: 'c0' }] });
    await ctx.emitArtifact({ artifactId: 'a', parts: [{ text: 'c1' }], append: true });
    // c0 went when c1 came; the runtime now waits for its upstream's next chunk (no call to the
    // context): c1 reaches the log at the end of its turn
    await until(async () => (await chunkTxs(runId)).length === 2);
    await ctx.emitArtifact({ artifactId: 'a', parts: [{ text: 'c2' }], append: true, lastChunk: true });
    await until(async () => (await chunkTxs(runId)).length === 3);
    // one append (one transaction) each
    expect(new Set(await chunkTxs(runId)).size).toBe(3);
    await ctx.flush();
    expect((await runs.view(seed.orgId, runId)).artifacts[0]!.parts).toEqual([{ text: 'c0' }, { text: 'c1' }, { text: 'c2' }]);
  });

  it("commits a status message before the runtime's next call: a runtime waiting on its upstream is not holding it back", async () => {
    const runId = await workingRun();
    const ctx = contextOf(runId);
    await ctx.setStatus('working', { parts: [{ text: 'asking upstream' }] });
    await until(async () => (await runs.readEvents(seed.orgId, runId, 0)).some((e) => JSON.stringify(e.event.payload).includes('asking upstream')));
    await ctx.setStatus('completed', { parts: [{ text: 'done' }] });
    expect((await runs.requireRun(seed.orgId, runId)).status).toBe('completed');
  });

  it("keeps a failed end-of-turn flush for the runtime's next call", async () => {
    const runId = await workingRun();
    const ctx = contextOf(runId);
    // the run ends meanwhile (as a cancel would): the context's next append is refused
    await runs.setStatus(seed.orgId, runId, 'failed');
    await ctx.emitMessage({ parts: [{ text: 'too late' }] });
    await new Promise((r) => setTimeout(r, 100));
    await expect(ctx.emitMessage({ parts: [{ text: 'later' }] })).rejects.toMatchObject({ code: 'run.terminal' });
    await expect(ctx.flush()).rejects.toMatchObject({ code: 'run.terminal' });
  });
});
