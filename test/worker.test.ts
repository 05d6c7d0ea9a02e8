import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseService } from '#libs/db';
import { RunExecutionQueue } from '#libs/runs';
import { runsOf, type TestRuns } from './support/runs.js';
import { RunExecutor, RunSweeper } from '#libs/execution';
import { RunExecutionProcessor } from '../apps/worker/src/run-execution.processor.js';
import { createWorkerApp } from '../apps/worker/src/worker.factory.js';
import { seedAgent } from './support/fixtures.js';
import { startStack, type Stack } from './support/stack.js';

const RULES = {
  kind: 'scripted',
  rules: [
    { match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
    { match: { text: '^ask' }, steps: [{ type: 'status', status: 'input-required', message: 'Which city?' }] },
    { match: { text: '^Paris' }, steps: [{ type: 'message', text: 'Sunny in {{input}}' }, { type: 'status', status: 'completed' }] },
    {
      match: { text: '^file' },
      steps: [{ type: 'artifact', artifactId: 'doc', name: 'doc.txt', content: { text: 'abcdefghij' }, chunks: 3 }, { type: 'status', status: 'completed' }],
    },
  ],
};

describe('worker executes runs from BullMQ', () => {
  let stack: Stack;
  let runs: TestRuns;
  let seed: Awaited<ReturnType<typeof seedAgent>>;

  beforeAll(async () => {
    stack = await startStack();
    runs = runsOf(stack.api);
    seed = await seedAgent(stack.api.get(DatabaseService), RULES);
  });
  afterAll(async () => {
    await stack?.close();
  });

  const create = (text: string, messageId = randomUUID()) =>
    runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId, role: 'user', parts: [{ text }] } });

  it('echoes by default and completes, every step in the log', async () => {
    const { run } = await create('hello there');
    const settled = await runs.waitUntilSettled(seed.orgId, run.id, 10_000);
    expect(settled.status).toBe('completed');
    const events = await runs.readEvents(seed.orgId, run.id, 0);
    expect(events.map((e) => e.event.type)).toEqual(['run.created', 'message.added', 'run.status_changed', 'message.added', 'run.status_changed']);
    const view = await runs.view(seed.orgId, run.id);
    expect(view.history.map((m) => [m.role, m.parts])).toEqual([
      ['user', [{ text: 'hello there' }]],
      ['agent', [{ text: 'hello there' }]],
    ]);
  });

  it('cancel aborts a held run, and nothing is appended after the terminal event', async () => {
    const { run } = await create('hold on');
    await expect.poll(async () => (await runs.getRun(seed.orgId, run.id))!.status, { timeout: 10_000 }).toBe('working');
    await runs.cancelRun(seed.orgId, run.id);
    await new Promise((r) => setTimeout(r, 300));
    const events = await runs.readEvents(seed.orgId, run.id, 0);
    expect(events.at(-1)!.event).toMatchObject({ type: 'run.status_changed', payload: { status: 'canceled' } });
  });

  it('a cancel aborts every execution of the run, also when two overlap', async () => {
    const processor = stack.worker!.get(RunExecutor) as unknown as { inFlight: Map<string, Set<AbortController>> };
    const { run } = await create('hold one');
    await expect.poll(async () => (await runs.getRun(seed.orgId, run.id))!.status, { timeout: 10_000 }).toBe('working');
    // more input while it holds: a second execution of the same run starts and holds too
    await runs.continueRun({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'hold two' }] } });
    await expect.poll(() => processor.inFlight.get(run.id)?.size ?? 0, { timeout: 10_000 }).toBe(2);
    await runs.cancelRun(seed.orgId, run.id);
    await expect.poll(() => processor.inFlight.has(run.id), { timeout: 5_000 }).toBe(false);
  });

  it('input-required blocks the run; the answer continues it to completion', async () => {
    const { run } = await create('ask me');
    const blocked = await runs.waitUntilSettled(seed.orgId, run.id, 10_000);
    expect(blocked.status).toBe('working');
    expect(blocked.blockedReason).toBe('input_required');
    await runs.continueRun({ orgId: seed.orgId, agentId: seed.agentId, runId: run.id, message: { messageId: randomUUID(), role: 'user', parts: [{ text: 'Paris' }] } });
    await expect.poll(async () => (await runs.getRun(seed.orgId, run.id))!.status, { timeout: 10_000 }).toBe('completed');
    const view = await runs.view(seed.orgId, run.id);
    expect(view.history.map((m) => m.parts[0]!.text)).toEqual(['ask me', 'Which city?', 'Paris', 'Sunny in Paris']);
  });

  it('a large input message is not carried in the job: the worker reads it from the log', async () => {
    const big = 'x'.repeat(40_000);
    const { run } = await create(big);
    const settled = await runs.waitUntilSettled(seed.orgId, run.id, 10_000);
    expect(settled.status).toBe('completed');
    const job = await stack.api.get(RunExecutionQueue).queue.getJob(RunExecutionQueue.jobId(run.id, 2));
    expect((job?.data.dispatches[0]?.job as { context?: unknown }).context).toBeUndefined();
    const view = await runs.view(seed.orgId, run.id);
    expect(view.history.map((m) => m.parts[0]!.text!.length)).toEqual([40_000, 40_000]);
  });

  it('a job for a run canceled before it ran appends nothing after the cancel', async () => {
    const processor = stack.worker!.get(RunExecutionProcessor);
    const { run } = await create('hello later');
    await runs.waitUntilSettled(seed.orgId, run.id, 10_000);
    const again = await create('hold me');
    await expect.poll(async () => (await runs.getRun(seed.orgId, again.run.id))!.status, { timeout: 10_000 }).toBe('working');
    await runs.cancelRun(seed.orgId, again.run.id);
    const before = (await runs.readEvents(seed.orgId, again.run.id, 0)).length;
    // a duplicate delivery of the original job (as if BullMQ handed it out again): its dispatch was claimed
    const job = await stack.api.get(RunExecutionQueue).queue.getJob(RunExecutionQueue.jobId(again.run.id, 2));
    await processor.process({ data: job!.data });
    const after = await runs.readEvents(seed.orgId, again.run.id, 0);
    expect(after).toHaveLength(before);
    expect(after.at(-1)!.event).toMatchObject({ type: 'run.status_changed', payload: { status: 'canceled' } });
  });

  it('streams a chunked artifact into one projected artifact', async () => {
    const { run } = await create('file please');
    await runs.waitUntilSettled(seed.orgId, run.id, 10_000);
    const view = await runs.view(seed.orgId, run.id);
    expect(view.artifacts).toHaveLength(1);
    expect(view.artifacts[0]!.complete).toBe(true);
    expect(view.artifacts[0]!.parts.map((p) => p.text).join('')).toBe('abcdefghij');
    const chunks = (await runs.readEvents(seed.orgId, run.id, 0)).filter((e) => e.event.type === 'artifact.updated');
    expect(chunks.map((c) => [(c.event.payload as { append: boolean }).append, (c.event.payload as { lastChunk: boolean }).lastChunk])).toEqual([
      [false, false],
      [true, false],
      [true, true],
    ]);
  });
});

describe('lost executions', () => {
  it('a job gone before any worker claimed it is enqueued again and runs; a claimed execution that left nothing is resumed (scripted); held runs are left alone', async () => {
    const stack = await startStack({ worker: false, env: { RUN_STALE_AFTER_MS: '1000', RUN_SWEEP_INTERVAL_MS: '600000', EXECUTION_HEARTBEAT_MS: '400' } });
    try {
      const runs = runsOf(stack.api);
      const db = stack.api.get(DatabaseService);
      const seed = await seedAgent(db, RULES);
      const mk = (text: string) =>
        runs.createRun({ orgId: seed.orgId, agentId: seed.agentId, revisionId: seed.revisionId, message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } });
      // two jobs vanish (e.g. Redis lost them) before any worker saw them: once relayed, they are removed
      const queue = stack.api.get(RunExecutionQueue).queue;
      const requeued = (await mk('lost')).run;
      const lost = (await mk('gone')).run;
      for (const r of [requeued, lost]) {
        await expect.poll(async () => Boolean(await queue.getJob(RunExecutionQueue.jobId(r.id, 2))), { timeout: 5_000 }).toBe(true);
        await queue.remove(RunExecutionQueue.jobId(r.id, 2));
      }
      // the second one's dispatch had been claimed, as by a worker that died before it wrote anything
      await db.query('DELETE FROM run_dispatches WHERE run_id = $1', [lost.id]);
      const held = (await mk('hold this')).run;

      const worker = await createWorkerApp({ ...stack.env, RUN_STALE_AFTER_MS: '1000', RUN_SWEEP_INTERVAL_MS: '600000', EXECUTION_HEARTBEAT_MS: '400' });
      try {
        await expect.poll(async () => (await runs.getRun(seed.orgId, held.id))!.status, { timeout: 10_000 }).toBe('working');
        await new Promise((r) => setTimeout(r, 1200));
        const failed = await worker.get(RunSweeper).sweep();
        // nothing failed: the lost one is resumed (its runtime replays), the others were not lost
        expect(failed).toEqual([]);
        // the unclaimed dispatch is enqueued again by the relay once the queue has nothing waiting
        expect((await runs.waitUntilSettled(seed.orgId, requeued.id, 15_000)).status).toBe('completed');
        expect((await runs.waitUntilSettled(seed.orgId, lost.id, 15_000)).status).toBe('completed');
        const resumed = await db.query<{ payload: { reason: string; attempt: number } }>(`SELECT payload FROM run_events WHERE run_id = $1 AND type = 'run.execution_resumed'`, [lost.id]);
        expect(resumed.map((r) => r.payload)).toEqual([{ reason: 'the execution was lost (no live execution)', attempt: 1 }]);
        expect((await runs.getRun(seed.orgId, held.id))!.status).toBe('working');
        await runs.cancelRun(seed.orgId, held.id);
      } finally {
        await worker.close();
      }
    } finally {
      await stack.close();
    }
  });
});
