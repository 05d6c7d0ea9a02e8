// Bench child: the official @a2a-js/sdk 1.3 server in memory (express, JSON-RPC, InMemoryTaskStore,
// as bench/baselines/sdk-in-memory.mjs) whose executor streams tokens: for an input text
// `… n=<chunks> d=<ms> …` it publishes the Task (SUBMITTED), a WORKING status, <chunks>
// TaskArtifactUpdateEvents <ms> apart (artifact `out`, append from the second on, lastChunk on
// the last), each one text part `{"i":<index>,"t":<emit time, ms since the epoch, sub-ms>}`, then
// COMPLETED. Prints the ready line of serveSdk ({"ready":true,"url":…,"cardUrl":…}); exits when
// stdin closes. Used as the `sdk` and `direct` targets and as the upstream of ours' a2a runtime.
import { performance } from 'node:perf_hooks';
import { TaskState } from '@a2a-js/sdk';
import { AgentEvent, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { EchoExecutor, publishSubmitted, serveSdk, textPart } from '../baselines/sdk-common.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowMs = () => performance.timeOrigin + performance.now();
const status = (ctx, state) =>
  AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: { state, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined });

class TokenExecutor extends EchoExecutor {
  async execute(ctx, bus) {
    const text = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const chunks = Number(/\bn=(\d+)/.exec(text)?.[1] ?? 10);
    const delayMs = Number(/\bd=(\d+)/.exec(text)?.[1] ?? 20);
    publishSubmitted(ctx, bus);
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING));
    for (let i = 0; i < chunks; i++) {
      if (i > 0) await sleep(delayMs);
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId: ctx.taskId,
          contextId: ctx.contextId,
          artifact: { artifactId: 'out', name: 'out.txt', description: '', parts: [textPart(JSON.stringify({ i, t: nowMs() }))], metadata: undefined, extensions: [] },
          append: i > 0,
          lastChunk: i === chunks - 1,
          metadata: undefined,
        }),
      );
    }
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }
}

await serveSdk({ name: 'SDK token agent (bench)', description: 'Streams n=<chunks> artifact chunks d=<ms> apart', store: new InMemoryTaskStore(), executor: new TokenExecutor() });
