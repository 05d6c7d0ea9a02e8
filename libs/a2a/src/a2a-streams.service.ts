import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import type { ResolvedA2AAgent } from '#libs/registry';
import { RunStreamHub, RunViews, isTerminal, type RunView } from '#libs/runs';
import { A2AError } from './a2a.errors.js';
import { A2AOperations } from './a2a-operations.service.js';
import { ANONYMOUS_CALLER, type A2ACaller } from './a2a.types.js';
import type { A2AProtocolVersion, InboundMessage, SendOptions } from './a2a.types.js';
import { projectSharedEnvelope, type ProjectionState, type StreamResult } from './stream-projection.js';
import { toV1Message, toV1Task } from './v1/v1.mapper.js';
import { toV03Message, toV03Task } from './v03/v03.mapper.js';

/**
 * One stream event. `sequence` is the run's event-log sequence the event projects (the SSE
 * `id:`; for a direct reply's Message, the reply's event in its `reply` run's log). `final`: the
 * last event.
 */
export interface StreamItem {
  sequence: number;
  result: StreamResult;
  final: boolean;
}

/**
 * Where a resumed stream continues: after `sequence` of run `runId` (thread `threadId`).
 * Passed as `Last-Event-ID: <sequence>` (the task from the request), or explicitly as the token
 * `encodeResumeCursor(...)` in the `A2A-Cursor` header (REST also: `?cursor=`).
 */
export interface ResumeCursor {
  runId?: string;
  threadId?: string;
  sequence: number;
}

const CursorTokenSchema = z.object({ runId: z.string().min(1), threadId: z.string().min(1), sequence: z.number().int().min(0) }).strict();

/** The explicit cursor token: base64url of `{"runId","threadId","sequence"}` (JSON). */
export function encodeResumeCursor(c: Required<ResumeCursor>): string {
  return Buffer.from(JSON.stringify({ runId: c.runId, threadId: c.threadId, sequence: c.sequence })).toString('base64url');
}

/**
 * Parse the resume inputs of a request: an explicit token wins over `Last-Event-ID`.
 * Errors: InvalidParams (-32602 / HTTP 400) for a malformed value. Null when neither is given.
 */
export function parseResumeCursor(input: { lastEventId?: string; token?: string }): ResumeCursor | null {
  if (input.token !== undefined && input.token !== '') {
    let decoded: unknown;
    try {
      decoded = JSON.parse(Buffer.from(input.token, 'base64url').toString('utf8'));
    } catch {
      throw new A2AError('InvalidParams', 'the resume cursor is malformed (expected base64url JSON {runId, threadId, sequence})');
    }
    const r = CursorTokenSchema.safeParse(decoded);
    if (!r.success) throw new A2AError('InvalidParams', 'the resume cursor is malformed (expected base64url JSON {runId, threadId, sequence})');
    return r.data;
  }
  if (input.lastEventId !== undefined && input.lastEventId !== '') {
    const v = input.lastEventId.trim();
    if (!/^\d{1,10}$/.test(v)) throw new A2AError('InvalidParams', `Last-Event-ID must be a sequence number, got '${v.slice(0, 40)}'`);
    return { sequence: Number(v) };
  }
  return null;
}

/**
 * The streaming operations (A2A v1.0 §3.1.2 SendStreamingMessage, §3.1.6 SubscribeToTask; v0.3
 * `message/stream`, `tasks/resubscribe`) as projections of the run's event log:
 * - without a cursor the stream opens with the Task as it is (its SSE id is the sequence the
 *   snapshot reflects), then every later event;
 * - with a cursor it carries exactly the events after the cursor, then live ones — no snapshot;
 * - it ends after a terminal state or input-required (auth-required stays open).
 * Every event comes from RunStreamHub (Postgres + wake-ups), so any instance can serve any
 * stream, and a resumed stream tells the same story as the one that was cut.
 */
@Injectable()
export class A2AStreams {
  constructor(
    private readonly ops: A2AOperations,
    private readonly runs: RunViews,
    private readonly hub: RunStreamHub,
  ) {}

  /** SendStreamingMessage: errors before the first event are thrown (A2AError). */
  async sendStreaming(agent: ResolvedA2AAgent, inbound: InboundMessage, options: SendOptions, version: A2AProtocolVersion, signal: AbortSignal): Promise<AsyncIterable<StreamItem>> {
    requireStreaming(agent);
    const outcome = await this.ops.sendMessage(agent, inbound, { ...options, returnImmediately: true });
    if (outcome.kind === 'message') {
      const ids = { contextId: outcome.contextId };
      const result: StreamResult = version === '1.0' ? { message: toV1Message(outcome.message, ids) } : toV03Message(outcome.message, ids);
      return single({ sequence: outcome.sequence, result, final: true });
    }
    return this.fromSnapshot(agent, outcome.view, version, signal);
  }

  /**
   * SubscribeToTask. Errors (thrown before the stream starts): TaskNotFound; UnsupportedOperation
   * for a terminal task (unless a cursor still has events to deliver); InvalidParams for a cursor
   * of another task or thread, or past the end of the task's log.
   */
  async subscribe(agent: ResolvedA2AAgent, taskId: string, cursor: ResumeCursor | null, version: A2AProtocolVersion, signal: AbortSignal, caller: A2ACaller = ANONYMOUS_CALLER): Promise<AsyncIterable<StreamItem>> {
    requireStreaming(agent);
    const view = await this.ops.getTask(agent, taskId, undefined, caller);
    const { run } = view;
    if (!cursor) {
      if (isTerminal(run.status)) {
        throw new A2AError('UnsupportedOperation', `task ${run.id} is ${run.status}: a terminal task cannot be subscribed to`, { metadata: { taskId: run.id } });
      }
      return this.fromSnapshot(agent, view, version, signal);
    }
    if (cursor.runId !== undefined && cursor.runId !== run.id) {
      throw new A2AError('InvalidParams', 'the resume cursor belongs to another task', { metadata: { taskId: run.id } });
    }
    if (cursor.threadId !== undefined && cursor.threadId !== run.threadId) {
      throw new A2AError('InvalidParams', "the resume cursor's contextId is not the task's", { metadata: { taskId: run.id } });
    }
    if (cursor.sequence > run.lastSequence) {
      throw new A2AError('InvalidParams', `the resume cursor (sequence ${cursor.sequence}) points past the end of the task's log (${run.lastSequence})`, {
        metadata: { taskId: run.id, lastSequence: String(run.lastSequence) },
      });
    }
    if (isTerminal(run.status) && cursor.sequence === run.lastSequence) {
      throw new A2AError('UnsupportedOperation', `task ${run.id} is ${run.status} and the cursor is at the end of its log`, { metadata: { taskId: run.id } });
    }
    let state: ProjectionState;
    state = await this.runs.stateAt(agent.org.id, run.id, cursor.sequence);
    return this.follow(agent.org.id, run.id, cursor.sequence, state, version, signal);
  }

  private fromSnapshot(agent: ResolvedA2AAgent, view: RunView, version: A2AProtocolVersion, signal: AbortSignal): AsyncIterable<StreamItem> {
    const { run } = view;
    const result: StreamResult = version === '1.0' ? { task: toV1Task(view) } : toV03Task(view);
    let first: StreamItem | null = { sequence: run.lastSequence, result, final: isTerminal(run.status) };
    const rest = first.final ? null : this.follow(agent.org.id, run.id, run.lastSequence, { status: run.status, blockedReason: run.blockedReason }, version, signal);
    return (async function* () {
      const snapshot = first!;
      first = null; // a long-lived stream must not keep the whole snapshot (history) alive
      yield snapshot;
      if (rest) yield* rest;
    })();
  }

  private async *follow(orgId: string, runId: string, after: number, initial: ProjectionState, version: A2AProtocolVersion, signal: AbortSignal): AsyncGenerator<StreamItem> {
    let state = initial;
    for await (const env of this.hub.follow(orgId, runId, after, signal)) {
      const p = projectSharedEnvelope(env, state, version);
      state = p.state;
      if (p.result) yield { sequence: env.sequence, result: p.result, final: p.final };
      if (p.final) return;
    }
  }
}

/** Capability validation (A2A v1.0 §3.3.4): an agent whose card says no streaming refuses streams. */
export function requireStreaming(agent: ResolvedA2AAgent): void {
  if (!agent.revision.a2a.capabilities.streaming) {
    throw new A2AError('UnsupportedOperation', 'streaming is not supported by this agent (capabilities.streaming is false)');
  }
}

function single(item: StreamItem): AsyncIterable<StreamItem> {
  return (async function* () {
    yield item;
  })();
}
