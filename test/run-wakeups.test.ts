import { randomUUID } from 'node:crypto';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SequencedOutputEnvelope } from '#libs/contracts';
import { ConfigModule } from '#libs/config';
import { DatabaseService, DbModule } from '#libs/db';
import { RunNotifier, RunStreamHub, RunViews, RunsModule, WAKEUP_PAYLOAD_MAX_BYTES } from '#libs/runs';
import { prng } from './support/prng.js';
import { observeQueries } from './support/db-spy.js';
import { runsOf } from './support/runs.js';
import { TEST_REDIS_URL, testEnv } from './support/env.js';
import { seedAgent } from './support/fixtures.js';

/*
 * Wake-ups carry the committed envelopes; a follower delivers them when they continue its tail
 * exactly and reads the log otherwise. Instance A writes (its wake-ups go to prefix PA); instance
 * B follows on another prefix PB, whose wake-ups this test publishes itself: the real messages A
 * sent, forwarded as they are, or lost, duplicated, reordered, stripped of their envelopes, or
 * forged. B's poll is 60 s, so only the wake-ups (and an explicit `pollNow`, the poll) move it.
 */

async function instance(env: Record<string, string>): Promise<INestApplicationContext> {
  const mod = await Test.createTestingModule({ imports: [ConfigModule.forRoot(env), DbModule, RunsModule] }).compile();
  return mod.init();
}

const until = async (cond: () => boolean, ms = 10_000) => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** Follows `runId` on `hub` from `after`; `envelopes` fills as they come; `done` resolves at `last`. */
function follower(hub: RunStreamHub, orgId: string, runId: string, after: number) {
  const ac = new AbortController();
  const envelopes: SequencedOutputEnvelope[] = [];
  let last = Number.POSITIVE_INFINITY;
  let stop: () => void = () => undefined;
  const reached = new Promise<void>((r) => (stop = r));
  const loop = (async () => {
    for await (const env of hub.follow(orgId, runId, after, ac.signal)) {
      envelopes.push(env);
      if (env.sequence >= last) break;
    }
    stop();
  })();
  return {
    envelopes,
    /** Resolves once the envelope at `sequence` arrived (or after `ms`, then the caller's expect fails). */
    async until(sequence: number, ms = 10_000) {
      last = sequence;
      if (envelopes.at(-1)?.sequence !== undefined && envelopes.at(-1)!.sequence >= sequence) ac.abort();
      const t = setTimeout(() => ac.abort(), ms);
      await Promise.race([reached, loop]);
      clearTimeout(t);
      ac.abort();
      await loop;
    },
  };
}

describe('wake-ups carry the committed envelopes', () => {
  let a: INestApplicationContext;
  let b: INestApplicationContext;
  let seed: Awaited<ReturnType<typeof seedAgent>>;
  let redis: Redis;
  let tap: Redis;
  const PA = `aaas-test-${randomUUID().slice(0, 8)}`;
  const PB = `aaas-test-${randomUUID().slice(0, 8)}`;
  /** Every wake-up A published, per run, in arrival order. */
  const heard = new Map<string, string[]>();
  /** Log reads (`runs.read_after`) made by instance B. */
  let readsB = 0;

  beforeAll(async () => {
    const base = testEnv();
    a = await instance({ ...base, REDIS_PREFIX: PA });
    b = await instance({ ...base, REDIS_PREFIX: PB, STREAM_POLL_INTERVAL_MS: '60000', STREAM_RING_SIZE: '64' });
    seed = await seedAgent(a.get(DatabaseService));
    redis = new Redis(TEST_REDIS_URL);
    tap = new Redis(TEST_REDIS_URL);
    tap.on('pmessage', (_p: string, channel: string, message: string) => {
      const runId = channel.slice(`${PA}:run:`.length);
      // A's wake-ups of one turn come batched on `<prefix>:run:+`, one `<runId> <wake-up>` line per run
      const lines = runId === '+' ? message.split('\n').map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)] as const) : [[runId, message] as const];
      for (const [id, m] of lines) heard.set(id, [...(heard.get(id) ?? []), m]);
    });
    await tap.psubscribe(`${PA}:run:*`);
    // observe (not replace) B's statements: count the log reads
    observeQueries(b.get(DatabaseService), (name) => {
      if (name === 'runs.read_after') readsB += 1;
    });
  });
  afterAll(async () => {
    tap?.disconnect();
    redis?.disconnect();
    await a?.close();
    await b?.close();
  });

  const newRun = async () =>
    (await runsOf(a).createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'go' }] } })).run;

  /** Appends on A: single messages, and every fifth a batch of three operations (one commit, three envelopes). */
  const appendOnA = async (runId: string, n: number, text = (i: number) => `e${i}`) => {
    const ops = runsOf(a).ops;
    let last = 0;
    for (let i = 0; i < n; i++) {
      const rec =
        i % 5 === 4
          ? await ops.apply(seed.orgId, runId, [
              { op: 'message', message: { parts: [{ text: `${text(i)}-1` }] } },
              { op: 'message', message: { parts: [{ text: `${text(i)}-2` }] } },
              { op: 'message', message: { parts: [{ text: `${text(i)}-3` }] } },
            ])
          : await ops.emitMessage(seed.orgId, runId, { parts: [{ text: text(i) }] });
      last = rec.lastSequence;
    }
    await until(() => (heard.get(runId) ?? []).some((m) => Number.parseInt(m, 10) === last));
    return last;
  };

  const forward = async (runId: string, messages: string[]) => {
    for (const m of messages) await redis.publish(`${PB}:run:${runId}`, m);
  };

  const log = (runId: string, after: number) => a.get(RunViews).events(seed.orgId, runId, after, 1000);

  it('a follower fed by wake-ups delivers exactly the log and reads nothing', async () => {
    const run = await newRun();
    const f = follower(b.get(RunStreamHub), seed.orgId, run.id, run.lastSequence);
    await until(() => b.get(RunStreamHub).stats().subscribers === 1);
    await new Promise((r) => setTimeout(r, 100)); // its first read is done
    const before = readsB;
    const last = await appendOnA(run.id, 20);
    const messages = heard.get(run.id)!;
    // the commits' envelopes are in the messages: `<seq>|<status>|<blocked>|<payload>`
    expect(messages.every((m) => m.split('|').length >= 4)).toBe(true);
    await forward(run.id, messages);
    await f.until(last);
    expect(f.envelopes).toEqual(await log(run.id, run.lastSequence));
    expect(readsB - before).toBe(0);
  });

  it('lost, duplicated, reordered, stripped, malformed and forged wake-ups: still exactly the log, gaps read', async () => {
    const rand = prng(19);
    for (let round = 0; round < 6; round++) {
      const run = await newRun();
      const f = follower(b.get(RunStreamHub), seed.orgId, run.id, run.lastSequence);
      await until(() => b.get(RunStreamHub).stats().subscribers === 1);
      await new Promise((r) => setTimeout(r, 50));
      const before = readsB;
      const last = await appendOnA(run.id, 25, (i) => `r${round}-${i}`);
      const real = heard.get(run.id)!;
      const sent: string[] = [];
      for (const m of real) {
        const [seq, status, blocked] = m.split('|');
        const x = rand();
        if (x < 0.15) continue; // lost
        if (x < 0.3) sent.push(m, m); // duplicated
        else if (x < 0.45) sent.splice(Math.max(0, sent.length - 1), 0, m); // reordered with the previous one
        else if (x < 0.55) sent.push(`${seq}|${status}|${blocked}`); // as if above the size bound
        else if (x < 0.6) sent.push(`${seq}|${status}|${blocked}|{"orgId":`); // malformed payload
        else if (x < 0.65) {
          // forged: another organization's envelopes, or a payload that does not end at its sequence
          const payload = JSON.parse(m.slice(m.indexOf('|', m.indexOf('|', m.indexOf('|') + 1) + 1) + 1)) as { orgId: string; events: Array<{ event: unknown }> };
          payload.events = payload.events.map((e) => ({ ...e, event: { type: 'message.added', payload: { message: { role: 'agent', messageId: randomUUID(), parts: [{ text: 'forged' }] } } } }));
          sent.push(`${seq}|${status}|${blocked}|${JSON.stringify({ ...payload, orgId: randomUUID() })}`, m);
        } else sent.push(m);
      }
      // a wake-up from the future without envelopes (a sequence not yet in the log) changes nothing
      sent.push(`${last + 5}|working|`);
      await forward(run.id, sent);
      await new Promise((r) => setTimeout(r, 100));
      await b.get(RunStreamHub).pollNow(); // the poll repairs a lost last wake-up
      await f.until(last);
      const truth = await log(run.id, run.lastSequence);
      expect(f.envelopes).toEqual(truth);
      expect(JSON.stringify(f.envelopes)).not.toContain('forged');
      // gaps were read from the log, not skipped
      expect(readsB - before).toBeGreaterThan(0);
    }
  });

  it('a commit above the size bound is announced by its sequence only; followers read it', async () => {
    const run = await newRun();
    const f = follower(b.get(RunStreamHub), seed.orgId, run.id, run.lastSequence);
    await until(() => b.get(RunStreamHub).stats().subscribers === 1);
    await new Promise((r) => setTimeout(r, 50));
    const before = readsB;
    const big = 'é'.repeat(WAKEUP_PAYLOAD_MAX_BYTES / 2 + 10); // under the bound in UTF-16 units, above it in UTF-8 bytes
    const rec = await runsOf(a).ops.emitMessage(seed.orgId, run.id, { parts: [{ text: big }] });
    const small = await runsOf(a).ops.emitMessage(seed.orgId, run.id, { parts: [{ text: 'small' }] });
    await until(() => (heard.get(run.id) ?? []).some((m) => Number.parseInt(m, 10) === small.lastSequence));
    const messages = heard.get(run.id)!;
    const bigMessage = messages.find((m) => Number.parseInt(m, 10) === rec.lastSequence);
    if (bigMessage) expect(bigMessage.split('|')).toHaveLength(3); // (may have been coalesced with the next commit)
    expect(messages.every((m) => m.length <= WAKEUP_PAYLOAD_MAX_BYTES + 200)).toBe(true);
    await forward(run.id, messages);
    await f.until(small.lastSequence);
    expect(f.envelopes).toEqual(await log(run.id, run.lastSequence));
    expect(readsB - before).toBeGreaterThan(0);
  });

  it('the commits of one tick go out as one wake-up: joined when they follow each other, else the newest', async () => {
    const notifier = a.get(RunNotifier);
    const runId = randomUUID();
    const env = (sequence: number): SequencedOutputEnvelope => ({
      runId,
      threadId: 't',
      sequence,
      occurredAt: new Date(0).toISOString(),
      event: { type: 'message.added', payload: { message: { role: 'agent', messageId: `m${sequence}`, parts: [{ text: `${sequence}` }] } } },
    });
    const state = { status: 'working' as const, blockedReason: null };
    notifier.notify(runId, 2, state, { orgId: seed.orgId, envelopes: [env(1), env(2)] });
    notifier.notify(runId, 3, state, { orgId: seed.orgId, envelopes: [env(3)] });
    await until(() => (heard.get(runId) ?? []).length === 1);
    const joined = JSON.parse(heard.get(runId)![0]!.split('|').slice(3).join('|')) as { events: Array<{ sequence: number }> };
    expect(joined.events.map((e) => e.sequence)).toEqual([1, 2, 3]);
    // not following each other: the newest commit's envelopes only (an older one is dropped)
    notifier.notify(runId, 5, state, { orgId: seed.orgId, envelopes: [env(5)] });
    notifier.notify(runId, 8, state, { orgId: seed.orgId, envelopes: [env(7), env(8)] });
    notifier.notify(runId, 6, state, { orgId: seed.orgId, envelopes: [env(6)] });
    await until(() => (heard.get(runId) ?? []).length === 2);
    const newest = JSON.parse(heard.get(runId)![1]!.split('|').slice(3).join('|')) as { events: Array<{ sequence: number }> };
    expect(heard.get(runId)![1]!.startsWith('8|working||')).toBe(true);
    expect(newest.events.map((e) => e.sequence)).toEqual([7, 8]);
    // envelopes that do not end at the announced sequence are not sent
    notifier.notify(runId, 12, state, { orgId: seed.orgId, envelopes: [env(9)] });
    await until(() => (heard.get(runId) ?? []).length === 3);
    expect(heard.get(runId)![2]).toBe('12|working|');
  });
});
