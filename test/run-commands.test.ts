import { randomUUID } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '#libs/common';
import type { BlockedReason, CanonicalMessage, RunStatus } from '#libs/contracts';
import type { DatabaseService } from '#libs/db';
import { CancelRunHandler, ContinueRunHandler, CreateRunHandler, RespondInteractionHandler, RunViews, RuntimeOperations, canTransition, isTerminal } from '#libs/runs';
import { bootRuns } from './support/runs.js';
import type { seedAgent } from './support/fixtures.js';

/**
 * The command handlers against real PostgreSQL: each validates against the run state machine,
 * appends through the event log and records its dispatch in the outbox (the relay is off here, so
 * the outbox rows can be read back).
 */
let ctx: INestApplicationContext;
let db: DatabaseService;
let create: CreateRunHandler;
let cont: ContinueRunHandler;
let respond: RespondInteractionHandler;
let cancel: CancelRunHandler;
let ops: RuntimeOperations;
let views: RunViews;
let seed: Awaited<ReturnType<typeof seedAgent>>;

const msg = (text: string, messageId = randomUUID()): CanonicalMessage => ({ messageId, role: 'user', parts: [{ text }] });
const codeOf = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof AppError) return e.code;
    throw e;
  }
  return 'ok';
};
const dispatches = (runId: string) =>
  db.query<{ triggerSequence: number; job: { trigger: string; inputMessageId: string; context?: { threadId: string } } }>(
    'SELECT trigger_sequence AS "triggerSequence", job FROM run_dispatches WHERE run_id = $1 ORDER BY id',
    [runId],
  );

beforeAll(async () => {
  ({ ctx, db, seed } = await bootRuns({ DATABASE_POOL_MAX: '16' }));
  create = ctx.get(CreateRunHandler);
  cont = ctx.get(ContinueRunHandler);
  respond = ctx.get(RespondInteractionHandler);
  cancel = ctx.get(CancelRunHandler);
  ops = ctx.get(RuntimeOperations);
  views = ctx.get(RunViews);
});
afterAll(async () => {
  await ctx?.close();
});

const newRun = (text = 'hi', threadId?: string) =>
  create.execute({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, threadId, message: msg(text) });

describe('CreateRunHandler', () => {
  it('creates the run, its first events and its dispatch in one commit', async () => {
    const { run, created } = await newRun('first');
    expect(created).toBe(true);
    expect([run.status, run.lastSequence, run.blockedReason]).toEqual(['submitted', 2, null]);
    const [d] = await dispatches(run.id);
    expect(d).toMatchObject({ triggerSequence: 2, job: { trigger: 'created', context: { threadId: run.threadId } } });
  });

  it('a retry (same messageId) returns the same run and records nothing more', async () => {
    const message = msg('again');
    const cmd = { orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message };
    const results = await Promise.all(Array.from({ length: 6 }, () => create.execute(cmd)));
    expect(new Set(results.map((r) => r.run.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await dispatches(results[0]!.run.id)).toHaveLength(1);
  });

  it('a messageId already used on another run is run.conflict, and only that create fails in its batch', async () => {
    const { run } = await newRun();
    const used = msg('follow-up');
    await cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: used });
    const outcomes = await Promise.all([
      ...Array.from({ length: 10 }, () => codeOf(newRun('ok'))),
      codeOf(create.execute({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: used })),
    ]);
    expect(outcomes.filter((c) => c === 'ok')).toHaveLength(10);
    expect(outcomes.at(-1)).toBe('run.conflict');
  });

  it('group commit: many concurrent creations each get their own gapless log and dispatch', async () => {
    const results = await Promise.all(Array.from({ length: 120 }, (_, i) => newRun(`g${i}`)));
    expect(new Set(results.map((r) => r.run.id)).size).toBe(120);
    const rows = await db.query<{ run_id: string; seqs: number[] }>(
      'SELECT run_id, array_agg(sequence ORDER BY sequence) AS seqs FROM run_events WHERE run_id = ANY($1::uuid[]) GROUP BY run_id',
      [results.map((r) => r.run.id)],
    );
    expect(rows).toHaveLength(120);
    for (const r of rows) expect(r.seqs).toEqual([1, 2]);
    const n = await db.query<{ n: string }>('SELECT count(*) AS n FROM run_dispatches WHERE run_id = ANY($1::uuid[])', [results.map((r) => r.run.id)]);
    expect(Number(n[0]!.n)).toBe(120);
  });
});

describe('ContinueRunHandler', () => {
  it('appends the message with a dispatch; a retry has no second effect', async () => {
    const { run } = await newRun();
    const m = msg('more');
    const a = await cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: m });
    const b = await cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: m });
    expect(a.lastSequence).toBe(3);
    expect(b.lastSequence).toBe(3);
    expect((await dispatches(run.id)).map((d) => [d.triggerSequence, d.job.trigger, d.job.inputMessageId])).toEqual([
      [2, 'created', expect.any(String)],
      [3, 'continued', m.messageId],
    ]);
  });

  it('refuses: another thread, another agent, a terminal run, a blocked run, a messageId of another run', async () => {
    const { run } = await newRun();
    const base = { orgId: seed.orgId, agentId: seed.agentId, runId: run.id };
    expect(await codeOf(cont.execute({ ...base, threadId: 'other-thread', message: msg('x') }))).toBe('run.thread_mismatch');
    expect(await codeOf(cont.execute({ ...base, agentId: randomUUID(), message: msg('x') }))).toBe('run.not_found');
    expect(await codeOf(cont.execute({ ...base, runId: randomUUID(), message: msg('x') }))).toBe('run.not_found');
    await ops.requestInteraction(seed.orgId, run.id, 'input');
    expect(await codeOf(cont.execute({ ...base, message: msg('x') }))).toBe('run.awaiting_interaction');
    const other = (await newRun()).run;
    const used = msg('used');
    await cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: other.id, message: used });
    expect(await codeOf(cont.execute({ ...base, message: used }))).toBe('run.conflict');
    await ops.setStatus(seed.orgId, other.id, 'completed');
    expect(await codeOf(cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: other.id, message: msg('late') }))).toBe('run.terminal');
    // a retry of a message the run already has is answered even after the run ended
    expect(await codeOf(cont.execute({ orgId: seed.orgId, agentId: seed.agentId, runId: other.id, message: used }))).toBe('ok');
  });
});

describe('RespondInteractionHandler', () => {
  it('resolves the open interaction, clears the overlay and dispatches; a duplicate answer has one effect', async () => {
    const { run } = await newRun();
    await ops.setStatus(seed.orgId, run.id, 'working');
    await ops.requestInteraction(seed.orgId, run.id, 'input');
    const blocked = await views.require(seed.orgId, run.id);
    expect(blocked.blockedReason).toBe('input_required');
    const answer = msg('Paris');
    const cmd = { orgId: seed.orgId, agentId: seed.agentId, runId: run.id, interactionId: blocked.openInteractionId!, message: answer };
    const [a, b] = await Promise.all([respond.execute(cmd), respond.execute(cmd)]);
    expect(a.lastSequence).toBe(b.lastSequence);
    const now = await views.require(seed.orgId, run.id);
    expect([now.status, now.blockedReason, now.openInteractionId]).toEqual(['working', null, null]);
    const types = (await views.events(seed.orgId, run.id, 0)).map((e) => e.event.type);
    expect(types.filter((t) => t === 'interaction.responded')).toHaveLength(1);
    expect((await dispatches(run.id)).at(-1)).toMatchObject({ job: { trigger: 'continued', inputMessageId: answer.messageId } });
  });

  it('refuses an unknown or closed interaction, an answer that chooses no option, and a terminal run', async () => {
    const { run } = await newRun();
    const base = { orgId: seed.orgId, agentId: seed.agentId, runId: run.id };
    expect(await codeOf(respond.execute({ ...base, interactionId: randomUUID(), message: msg('x') }))).toBe('interaction.not_found');
    await ops.requestInteraction(seed.orgId, run.id, 'confirmation');
    const first = (await views.require(seed.orgId, run.id)).openInteractionId!;
    expect(await codeOf(respond.execute({ ...base, interactionId: first, message: msg('maybe') }))).toBe('interaction.invalid_answer');
    await respond.execute({ ...base, interactionId: first, message: msg('approve') });
    const closed = (await views.detail(seed.orgId, run.id)).interactions.find((i) => i.id === first);
    expect([closed!.status, closed!.response?.decision, closed!.response?.optionId]).toEqual(['resolved', 'approved', 'approve']);
    expect(await codeOf(respond.execute({ ...base, interactionId: first, message: msg('again') }))).toBe('interaction.not_open');
    await ops.requestInteraction(seed.orgId, run.id, 'auth');
    const second = (await views.require(seed.orgId, run.id)).openInteractionId!;
    await cancel.execute({ orgId: seed.orgId, runId: run.id });
    expect(await codeOf(respond.execute({ ...base, interactionId: second, message: msg('x') }))).toBe('run.terminal');
    expect((await views.detail(seed.orgId, run.id)).interactions.map((i) => i.status)).toEqual(['resolved', 'canceled']);
  });
});

describe('CancelRunHandler', () => {
  it('cancels, resolving the open interaction in the same append; a second cancel is run.not_cancelable', async () => {
    const { run } = await newRun();
    await ops.requestInteraction(seed.orgId, run.id, 'confirmation');
    const canceled = await cancel.execute({ orgId: seed.orgId, runId: run.id, agentId: seed.agentId });
    expect([canceled.status, canceled.blockedReason]).toEqual(['canceled', null]);
    const tail = (await views.events(seed.orgId, run.id, 0)).slice(-2);
    expect(tail.map((e) => e.event.type)).toEqual(['interaction.canceled', 'run.status_changed']);
    expect(tail[0]!.event.payload).toMatchObject({ blocking: true });
    expect(await codeOf(cancel.execute({ orgId: seed.orgId, runId: run.id }))).toBe('run.not_cancelable');
    expect(await codeOf(cancel.execute({ orgId: seed.orgId, runId: randomUUID() }))).toBe('run.not_found');
    expect(await codeOf(cancel.execute({ orgId: randomUUID(), runId: run.id }))).toBe('run.not_found');
  });
});

/** The (status, blockedReason) sequence a log implies, checked step by step against the state machine. */
function checkLog(events: Array<{ sequence: number; event: { type: string; payload: unknown } }>): { status: RunStatus; blockedReason: BlockedReason | null } {
  let status: RunStatus = 'submitted';
  let blocked: BlockedReason | null = null;
  events.forEach((e, i) => {
    expect(e.sequence, 'gapless sequence').toBe(i + 1);
    if (i > 0) expect(isTerminal(status), `no event after a terminal status (seq ${e.sequence}: ${e.event.type})`).toBe(false);
    const p = e.event.payload as { status?: RunStatus; blockedReason?: BlockedReason | null; resolution?: string };
    switch (e.event.type) {
      case 'run.status_changed':
        expect(canTransition(status, p.status!) || (status === 'working' && p.status === 'working'), `${status} → ${p.status}`).toBe(true);
        status = p.status!;
        blocked = null;
        break;
      case 'interaction.requested':
        expect(blocked, 'an interaction opens only on an unblocked run').toBeNull();
        status = 'working';
        blocked = p.blockedReason ?? null;
        break;
      case 'interaction.responded':
      case 'interaction.expired':
        if ((p as { blocking?: boolean }).blocking) {
          expect(blocked, 'only an open blocking interaction lifts the overlay').not.toBeNull();
          blocked = null;
        }
        break;
      case 'interaction.canceled':
        expect(events[i + 1]?.event.type, 'a canceled interaction goes with the run ending').toMatch(/^(interaction\.canceled|run\.status_changed)$/);
        break;
    }
  });
  return { status, blockedReason: blocked };
}

describe('property: random command sequences never store an illegal transition', () => {
  type Step =
    | { kind: 'continue'; retry: boolean }
    | { kind: 'respond'; retry: boolean }
    | { kind: 'cancel' }
    | { kind: 'status'; status: 'working' | 'completed' | 'failed' | 'rejected' }
    | { kind: 'interaction'; interaction: 'input' | 'auth' | 'confirmation'; blocking: boolean }
    | { kind: 'answerAny' }
    | { kind: 'message' };
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({ kind: fc.constant('continue' as const), retry: fc.boolean() }),
    fc.record({ kind: fc.constant('respond' as const), retry: fc.boolean() }),
    fc.record({ kind: fc.constant('cancel' as const) }),
    fc.record({ kind: fc.constant('status' as const), status: fc.constantFrom('working' as const, 'completed' as const, 'failed' as const, 'rejected' as const) }),
    fc.record({ kind: fc.constant('interaction' as const), interaction: fc.constantFrom('input' as const, 'auth' as const, 'confirmation' as const), blocking: fc.boolean() }),
    fc.record({ kind: fc.constant('answerAny' as const) }),
    fc.record({ kind: fc.constant('message' as const) }),
  );
  const EXPECTED_REFUSALS = new Set(['run.terminal', 'run.not_cancelable', 'run.invalid_transition', 'run.awaiting_interaction', 'interaction.not_open', 'interaction.not_found']);

  it('holds for 40 random sequences (fixed seed), sequential and concurrent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), fc.boolean(), async (steps, concurrent) => {
        const { run } = await newRun('prop');
        const base = { orgId: seed.orgId, agentId: seed.agentId, runId: run.id };
        let last: CanonicalMessage | undefined;
        const doStep = async (s: Step): Promise<void> => {
          switch (s.kind) {
            case 'continue':
              last = s.retry && last ? last : msg('c');
              return void (await cont.execute({ ...base, message: last }));
            case 'respond': {
              const now = await views.require(seed.orgId, run.id);
              last = s.retry && last ? last : msg('r');
              return void (await respond.execute({ ...base, interactionId: now.openInteractionId ?? randomUUID(), message: last, optionId: 'approve' }));
            }
            case 'cancel':
              return void (await cancel.execute({ orgId: seed.orgId, runId: run.id }));
            case 'status':
              return void (await ops.setStatus(seed.orgId, run.id, s.status));
            case 'interaction':
              return void (await ops.requestInteraction(seed.orgId, run.id, s.interaction, { blocking: s.blocking }));
            case 'answerAny': {
              // answer the oldest open interaction, blocking or not, naming it
              const now = await views.require(seed.orgId, run.id);
              const target = now.openInteractionIds?.[0] ?? randomUUID();
              return void (await respond.execute({ ...base, interactionId: target, message: msg('any'), optionId: 'reject' }));
            }
            case 'message':
              return void (await ops.emitMessage(seed.orgId, run.id, { parts: [{ text: 'm' }] }));
          }
        };
        const guarded = async (s: Step) => {
          try {
            await doStep(s);
          } catch (e) {
            // only the state machine's refusals, never anything else
            expect(e instanceof AppError && EXPECTED_REFUSALS.has(e.code), String(e)).toBe(true);
          }
        };
        if (concurrent) await Promise.all(steps.map(guarded));
        else for (const s of steps) await guarded(s);

        const events = await views.events(seed.orgId, run.id, 0);
        const folded = checkLog(events);
        const row = await views.require(seed.orgId, run.id);
        expect([row.status, row.blockedReason, row.lastSequence]).toEqual([folded.status, folded.blockedReason, events.length]);
        expect(row.openInteractionId !== null).toBe(folded.blockedReason !== null);
        // the open interactions the log implies are the projection's and the run row's count
        const open = new Set<string>();
        for (const e of events) {
          const id = (e.event.payload as { interactionId?: string }).interactionId;
          if (e.event.type === 'interaction.requested') open.add(id!);
          else if (e.event.type.startsWith('interaction.')) open.delete(id!);
        }
        expect(new Set(row.openInteractionIds)).toEqual(open);
        expect(row.openInteractions).toBe(open.size);
        if (isTerminal(row.status)) expect(open.size, 'a run ends with no interaction open').toBe(0);
      }),
      { numRuns: 40, seed: 20261123 },
    );
  }, 120_000);
});
