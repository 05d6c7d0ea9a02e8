import { randomUUID } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { RunNotifier, RunStreamHub, RunsModule } from '#libs/runs';
import { runsOf } from './support/runs.js';
import { testEnv } from './support/env.js';
import { seedAgent } from './support/fixtures.js';

async function instance(env: Record<string, string>): Promise<INestApplicationContext> {
  const mod = await Test.createTestingModule({ imports: [ConfigModule.forRoot(env), DbModule, RunsModule] }).compile();
  return mod.init();
}

async function collect(hub: RunStreamHub, orgId: string, runId: string, after: number, until: number, opts: { delayMs?: number } = {}): Promise<number[]> {
  const ac = new AbortController();
  const seen: number[] = [];
  const timer = setTimeout(() => ac.abort(), 15_000);
  try {
    for await (const env of hub.follow(orgId, runId, after, ac.signal)) {
      seen.push(env.sequence);
      if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
      if (env.sequence >= until) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return seen;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('RunStreamHub: follow the log live across instances', () => {
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let seed: Awaited<ReturnType<typeof seedAgent>>;
  const env = { ...testEnv(), REDIS_PREFIX: `aaas-test-${randomUUID().slice(0, 8)}`, STREAM_POLL_INTERVAL_MS: '200', STREAM_RING_SIZE: '16' };

  beforeAll(async () => {
    a = await instance(env);
    b = await instance(env);
    seed = await seedAgent(a.get(DatabaseService));
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  const newRun = async () =>
    (await runsOf(a).createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'go' }] } })).run;

  const appendMany = async (runId: string, n: number, gapMs = 0) => {
    const runs = runsOf(a);
    for (let i = 0; i < n; i++) {
      await runs.emitMessage(seed.orgId, runId, { parts: [{ text: `e${i}` }] });
      if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
    }
  };

  it('a follower on instance B receives 1..N written on instance A, in order, live', async () => {
    const run = await newRun();
    const reading = collect(b.get(RunStreamHub), seed.orgId, run.id, 0, 42);
    await appendMany(run.id, 40, 2);
    expect(await reading).toEqual(range(1, 42));
  });

  it('resumes from any cursor with exactly the rest (random cut points, fixed seed)', async () => {
    const run = await newRun();
    await appendMany(run.id, 30);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 31 }), async (cut) => {
        expect(await collect(b.get(RunStreamHub), seed.orgId, run.id, cut, 32)).toEqual(range(cut + 1, 32));
      }),
      { seed: 42, numRuns: 25 },
    );
  });

  it('a slow reader falls behind the ring and catches up from Postgres without gaps', async () => {
    const run = await newRun();
    const reading = collect(b.get(RunStreamHub), seed.orgId, run.id, 0, 102, { delayMs: 5 });
    await appendMany(run.id, 100);
    expect(await reading).toEqual(range(1, 102));
  });

  it('lost wake-ups are covered by the poll', async () => {
    const run = await newRun();
    const hub = b.get(RunStreamHub);
    const reading = collect(hub, seed.orgId, run.id, 0, 22);
    await new Promise((r) => setTimeout(r, 50));
    // drop B's Redis subscription: from now on B hears nothing
    const notifier = b.get(RunNotifier) as unknown as { sub?: { disconnect(): void } };
    notifier.sub?.disconnect();
    await appendMany(run.id, 20, 5);
    expect(await reading).toEqual(range(1, 22));
  });

  it('many followers of one run in one process share one tail', async () => {
    const run = await newRun();
    const hub = a.get(RunStreamHub);
    const readers = Array.from({ length: 200 }, () => collect(hub, seed.orgId, run.id, 0, 12));
    await new Promise((r) => setTimeout(r, 100));
    expect(hub.stats()).toEqual({ runs: 1, subscribers: 200 });
    await appendMany(run.id, 10);
    for (const r of await Promise.all(readers)) expect(r).toEqual(range(1, 12));
    expect(hub.stats()).toEqual({ runs: 0, subscribers: 0 });
  });

  it('another organization follows nothing', async () => {
    const run = await newRun();
    const other = await seedAgent(a.get(DatabaseService));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const seen: number[] = [];
    for await (const env of b.get(RunStreamHub).follow(other.orgId, run.id, 0, ac.signal)) seen.push(env.sequence);
    expect(seen).toEqual([]);
  });
});
