import { randomUUID } from 'node:crypto';
import { Role, SendMessageRequest, taskStateToJSON, type Message, type Part as SdkPart, type Task } from '@a2a-js/sdk';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client';
import type { ScriptedStep } from '#libs/contracts';
import type { Attempt, MessageSeen, Operation, Outcome, PushConfigRecord, StreamRecord, TaskSeen } from './history.js';
import { frameDigest, messageSeen, taskSeenOfJson, type BackendStep, type ScriptedConfig } from './output.js';
import { prng } from './schedule.js';

/**
 * The fault suite's clients: the official @a2a-js/sdk client (JSON-RPC and HTTP+JSON, against
 * both APIs) for SendMessage, follow-ups, CancelTask and push configs, each retried with the same
 * messageId after an error, on the other API; and raw SSE streams (the SDK does not resume with
 * Last-Event-ID) cut at random points and resumed on the other API. Every operation is recorded.
 */

/** The scripted runtime the clients talk to (rules named by the first word of the text). */
export const FAULTS_RUNTIME: { kind: 'scripted' } & ScriptedConfig = {
  kind: 'scripted',
  rules: [
    {
      name: 'quick',
      match: { text: '^quick' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'artifact', artifactId: 'out', name: 'out.txt', content: { text: 'abcdefgh' }, chunks: 2 },
        { type: 'message', text: 'done: {{input}}' },
        { type: 'status', status: 'completed' },
      ],
    },
    {
      name: 'slow',
      match: { text: '^slow' },
      steps: [
        { type: 'status', status: 'working' },
        ...Array.from({ length: 8 }, (_, i): ScriptedStep[] => [
          { type: 'wait', ms: 150 },
          i % 3 === 2 ? { type: 'artifact', artifactId: `a${i}`, content: { text: `part-${i}-abcdef` }, chunks: 2 } : { type: 'message', text: `step ${i}` },
        ]).flat(),
        { type: 'status', status: 'completed' },
      ],
    },
    { name: 'ask', match: { text: '^ask' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which day?' }, { type: 'message', text: 'Booked for {{input}}' }, { type: 'status', status: 'completed' }] },
    { name: 'hold', match: { text: '^hold' }, steps: [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }] },
  ],
};

/**
 * The answer of the suite's `http` backend (backends.ts HttpBackend plays it as NDJSON operations,
 * 40 ms apart): working, a `report` artifact in four chunks, a message, completed. Every step is
 * named so a resumed execution's replay is dropped by id (status: its `id`; the message: its
 * messageId; chunks: the runtime's `<execution>:report#<n>`).
 */
export const BACKEND_SCRIPT: BackendStep[] = [
  { op: 'status', status: 'working' },
  ...[0, 1, 2, 3].flatMap((i): BackendStep[] => [
    { op: 'wait', ms: 40 },
    { op: 'artifact', artifactId: 'report', text: `section ${i} of {{input}};` },
  ]),
  { op: 'message', text: 'Report on {{input}} written' },
  { op: 'status', status: 'completed' },
];

/**
 * What the suite's upstream A2A agent does with a new task (backends.ts UpstreamAgent, events 40 ms
 * apart): working with a message, a `summary` artifact in four chunks, completed with a message.
 */
export const UPSTREAM_SCRIPT: BackendStep[] = [
  { op: 'status', status: 'working', text: 'Working on {{input}}' },
  ...[0, 1, 2, 3].flatMap((i): BackendStep[] => [
    { op: 'wait', ms: 40 },
    { op: 'artifact', artifactId: 'summary', text: `part ${i} of {{input}};` },
  ]),
  { op: 'status', status: 'completed', text: 'Done: {{input}}' },
];

/** The suite's agents by slug: the scripted one (FAULTS_RUNTIME), the `http` one, the `a2a` one. */
export const AGENTS = { scripted: 'faults', http: 'faults-http', a2a: 'faults-a2a' } as const;
export type AgentSlug = (typeof AGENTS)[keyof typeof AGENTS];

export type Binding = 'JSONRPC' | 'HTTP+JSON';

export interface ClientWorld {
  /** API name → base URL (`http://127.0.0.1:port`). */
  apis: Record<string, string>;
  /** Agent slug → `/a2a/<org>/<agent>`. */
  agents: Record<AgentSlug, string>;
  pushUrl: (path: string) => string;
  t0: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ATTEMPT_TIMEOUT_MS = 20_000;
const OP_BUDGET_MS = 45_000;

/** Connection refused: the request never reached a server, so it certainly had no effect. */
function refused(e: unknown): boolean {
  for (let x: any = e, i = 0; x && i < 6; x = x.cause, i++) {
    if (x.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(String(x.message ?? ''))) return true;
  }
  return false;
}

function describeError(e: unknown): string {
  const parts: string[] = [];
  for (let x: any = e, i = 0; x && i < 4; x = x.cause, i++) parts.push(x.code ? `${x.code}` : String(x.message ?? x).slice(0, 140));
  return parts.join(' <- ');
}

const timedFetch: typeof fetch = (input, init) => fetch(input, { ...init, signal: init?.signal ?? AbortSignal.timeout(ATTEMPT_TIMEOUT_MS) });

function sdkText(parts: readonly SdkPart[] | undefined): string {
  return (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : null)).filter((t): t is string => t !== null).join('\n');
}

function sdkMessage(m: Message): MessageSeen {
  return { messageId: m.messageId, role: m.role === Role.ROLE_AGENT ? 'agent' : 'user', text: sdkText(m.parts) };
}

/** What an SDK Task showed (history.ts TaskSeen). */
function seenOfTask(t: Task): TaskSeen {
  return {
    state: t.status ? taskStateToJSON(t.status.state) : '?',
    statusMessage: t.status?.message ? sdkMessage(t.status.message) : null,
    messages: (t.history ?? []).map(sdkMessage),
    artifacts: (t.artifacts ?? []).map((a) => ({ artifactId: a.artifactId, text: sdkText(a.parts) })),
  };
}

/** The recorder and the clients' shared state. */
export class Workload {
  readonly operations: Operation[] = [];
  readonly streams: StreamRecord[] = [];
  readonly pushConfigs: PushConfigRecord[] = [];
  /** hold tasks whose cancel was never acknowledged (re-cancelled in the quiet period). */
  readonly pendingCancels = new Set<string>();
  /** messageIds of every `hold` send (a send left in doubt may still have created its run). */
  readonly holdMessageIds = new Set<string>();
  private nextId = 1;
  private readonly sdk = new Map<string, Client>();
  stopping = false;

  constructor(private readonly w: ClientWorld) {}

  get apiNames(): string[] {
    return Object.keys(this.w.apis);
  }

  private now(): number {
    return Date.now() - this.w.t0;
  }

  /** Resolve the SDK clients (the Agent Card of each API, each binding, each agent) before the faults start. */
  async init(): Promise<void> {
    for (const [agent, basePath] of Object.entries(this.w.agents)) {
      for (const api of this.apiNames) {
        for (const binding of ['JSONRPC', 'HTTP+JSON'] as const) {
          const transports = binding === 'JSONRPC' ? [new JsonRpcTransportFactory({ fetchImpl: timedFetch })] : [new RestTransportFactory({ fetchImpl: timedFetch })];
          const client = await new ClientFactory({ transports }).createFromUrl(`${this.w.apis[api]}${basePath}/`);
          this.sdk.set(`${api}|${binding}|${agent}`, client);
        }
      }
    }
  }

  private client(api: string, binding: Binding, agent: AgentSlug = AGENTS.scripted): Client {
    return this.sdk.get(`${api}|${binding}|${agent}`)!;
  }

  private other(api: string): string {
    const names = this.apiNames;
    return names[(names.indexOf(api) + 1) % names.length]!;
  }

  /**
   * Run `attempt` until it is acknowledged, on alternating APIs and bindings, with backoff, within
   * the operation budget. The op is ok when one attempt was; fail when all were refused.
   */
  private async retried(
    op: Omit<Operation, 'id' | 'outcome' | 'attempts' | 'invokedAt' | 'completedAt'>,
    random: () => number,
    attempt: (c: Client) => Promise<{ taskId?: string; state?: string; task?: TaskSeen }>,
    opts: { api?: string; binding?: Binding; budgetMs?: number; /** keep retrying after `stopping` (the quiet period's cancels) */ force?: boolean } = {},
  ): Promise<Operation> {
    const rec: Operation = { ...op, id: this.nextId++, outcome: 'unknown', attempts: [], invokedAt: this.now(), completedAt: 0 };
    this.operations.push(rec);
    let api = opts.api ?? this.apiNames[Math.floor(random() * this.apiNames.length)]!;
    let binding: Binding = opts.binding ?? (random() < 0.5 ? 'JSONRPC' : 'HTTP+JSON');
    const deadline = Date.now() + (opts.budgetMs ?? OP_BUDGET_MS);
    for (let n = 0; ; n++) {
      const at = this.now();
      try {
        const r = await attempt(this.client(api, binding, (op.agent as AgentSlug | undefined) ?? AGENTS.scripted));
        rec.attempts.push({ api, binding, outcome: 'ok', at, ...r });
        rec.outcome = 'ok';
        if (r.taskId && !rec.taskId) rec.taskId = r.taskId;
        break;
      } catch (e) {
        const a: Attempt = { api, binding, outcome: refused(e) ? 'fail' : 'unknown', error: describeError(e), at };
        rec.attempts.push(a);
        if (Date.now() > deadline || (this.stopping && !opts.force)) break;
        await sleep(Math.min(3_000, 250 * 2 ** Math.min(n, 4)) * (0.5 + random()));
        api = this.other(api);
        binding = random() < 0.5 ? 'JSONRPC' : 'HTTP+JSON';
      }
    }
    if (rec.outcome !== 'ok') rec.outcome = rec.attempts.every((a) => a.outcome === 'fail') ? 'fail' : 'unknown';
    rec.completedAt = this.now();
    return rec;
  }

  private static taskOf(r: unknown): { taskId?: string; state?: string; task?: TaskSeen } {
    if (r && typeof r === 'object' && 'status' in r && 'id' in r) {
      const t = r as Task;
      return { taskId: t.id, state: t.status ? taskStateToJSON(t.status.state) : undefined, task: seenOfTask(t) };
    }
    return {};
  }

  private static request(text: string, messageId: string, opts: { taskId?: string; contextId?: string; returnImmediately?: boolean; pushUrl?: string } = {}): SendMessageRequest {
    return SendMessageRequest.fromJSON({
      message: { messageId, role: 'ROLE_USER', parts: [{ text }], ...(opts.taskId && { taskId: opts.taskId }), ...(opts.contextId && { contextId: opts.contextId }) },
      configuration: { returnImmediately: opts.returnImmediately ?? false, ...(opts.pushUrl && { taskPushNotificationConfig: { url: opts.pushUrl, token: 'faults' } }) },
    });
  }

  /** SendMessage `quick` / `slow`, blocking or not, maybe with a push config inside it. */
  async send(client: number, random: () => number): Promise<void> {
    const messageId = randomUUID();
    const kind = random() < 0.7 ? 'quick' : 'slow';
    const returnImmediately = random() < 0.5;
    const push = random() < 0.35 ? `/push/send-${messageId}` : undefined;
    const op = await this.retried({ client, kind: 'send', messageId, note: `${kind}${returnImmediately ? ' returnImmediately' : ' blocking'}${push ? ' +push' : ''}` }, random, async (c) =>
      Workload.taskOf(await c.sendMessage(Workload.request(`${kind} ${messageId.slice(0, 8)}`, messageId, { returnImmediately, pushUrl: push && this.w.pushUrl(push) }))),
    );
    if (push && op.taskId) this.pushConfigs.push({ taskId: op.taskId, configId: null, path: push, createdWith: 'send' });
  }

  /**
   * SendMessage `job …` to the `http` or the `a2a` agent, blocking or not, maybe with a push config;
   * `burst` sends three at once (returnImmediately), so runs wait behind the agent's cap.
   */
  async backendSend(client: number, random: () => number, agent: AgentSlug, burst = false): Promise<void> {
    const one = async (returnImmediately: boolean) => {
      const messageId = randomUUID();
      const push = random() < 0.3 ? `/push/send-${messageId}` : undefined;
      const op = await this.retried({ client, agent, kind: 'send', messageId, note: `job${returnImmediately ? ' returnImmediately' : ' blocking'}${push ? ' +push' : ''}${burst ? ' (burst)' : ''}` }, random, async (c) =>
        Workload.taskOf(await c.sendMessage(Workload.request(`job ${messageId.slice(0, 8)}`, messageId, { returnImmediately, pushUrl: push && this.w.pushUrl(push) }))),
      );
      if (push && op.taskId) this.pushConfigs.push({ taskId: op.taskId, configId: null, path: push, createdWith: 'send' });
    };
    if (burst) await Promise.all([one(true), one(true), one(true)]);
    else await one(random() < 0.5);
  }

  /** A slow task, then a push config created on it while it runs. */
  async laterPush(client: number, random: () => number): Promise<void> {
    const messageId = randomUUID();
    const sent = await this.retried({ client, kind: 'send', messageId, note: 'slow returnImmediately (later push)' }, random, async (c) =>
      Workload.taskOf(await c.sendMessage(Workload.request(`slow ${messageId.slice(0, 8)}`, messageId, { returnImmediately: true }))),
    );
    if (!sent.taskId) return;
    const configId = `cfg-${messageId.slice(0, 8)}`;
    const path = `/push/later-${messageId}`;
    const op = await this.retried({ client, kind: 'push-config', taskId: sent.taskId, note: configId }, random, async (c) => {
      await c.createTaskPushNotificationConfig({ tenant: '', id: configId, taskId: sent.taskId!, url: this.w.pushUrl(path), token: 'faults', authentication: undefined });
      return { taskId: sent.taskId };
    });
    if (op.outcome === 'ok') this.pushConfigs.push({ taskId: sent.taskId, configId, path, createdWith: 'later' });
  }

  /** Multi-turn: `ask` → input-required → the answer (a follow-up retried with its messageId). */
  async multiTurn(client: number, random: () => number): Promise<void> {
    const messageId = randomUUID();
    const sent = await this.retried({ client, kind: 'send', messageId, note: 'ask blocking' }, random, async (c) => Workload.taskOf(await c.sendMessage(Workload.request(`ask ${messageId.slice(0, 8)}`, messageId))));
    if (!sent.taskId) return;
    // a blocking answer can come back before the question (timeout): wait for input-required
    let state = sent.attempts.at(-1)!.state;
    const deadline = Date.now() + 20_000;
    while (state !== 'TASK_STATE_INPUT_REQUIRED' && Date.now() < deadline && !this.stopping) {
      if (state && state !== 'TASK_STATE_WORKING' && state !== 'TASK_STATE_SUBMITTED') return; // failed / canceled by a fault
      await sleep(300);
      try {
        state = Workload.taskOf(await this.client(this.apiNames[Math.floor(random() * 2)]!, 'JSONRPC').getTask({ tenant: '', id: sent.taskId, historyLength: undefined })).state;
      } catch {
        state = undefined;
      }
    }
    if (state !== 'TASK_STATE_INPUT_REQUIRED') return;
    const answer = randomUUID();
    await this.retried({ client, kind: 'followup', messageId: answer, taskId: sent.taskId, note: 'answer' }, random, async (c) =>
      Workload.taskOf(await c.sendMessage(Workload.request('Friday', answer, { taskId: sent.taskId, returnImmediately: random() < 0.5 }))),
    );
  }

  /** A held task, then CancelTask (retried until acknowledged). */
  async cancel(client: number, random: () => number): Promise<void> {
    const messageId = randomUUID();
    this.holdMessageIds.add(messageId);
    const sent = await this.retried({ client, kind: 'send', messageId, note: 'hold returnImmediately' }, random, async (c) =>
      Workload.taskOf(await c.sendMessage(Workload.request(`hold ${messageId.slice(0, 8)}`, messageId, { returnImmediately: true }))),
    );
    if (!sent.taskId) return;
    this.pendingCancels.add(sent.taskId);
    await sleep(random() * 1_000);
    await this.cancelTask(client, random, sent.taskId);
  }

  async cancelTask(client: number, random: () => number, taskId: string, budgetMs = OP_BUDGET_MS, force = false): Promise<Operation> {
    this.pendingCancels.add(taskId);
    const op = await this.retried(
      { client, kind: 'cancel', taskId, note: 'cancel' },
      random,
      async (c) => Workload.taskOf(await c.cancelTask({ tenant: '', id: taskId, metadata: undefined })),
      { budgetMs, force },
    );
    if (op.outcome === 'ok') this.pendingCancels.delete(taskId);
    return op;
  }

  /**
   * SendStreamingMessage on one API, cut after a few frames, resumed with `Last-Event-ID` on the
   * other API (alternating bindings), until the stream delivers its final event.
   */
  async stream(client: number, random: () => number, agent: AgentSlug = AGENTS.scripted): Promise<void> {
    const messageId = randomUUID();
    const rec: StreamRecord = { id: this.nextId++, client, agent, messageId, taskId: null, snapshotSequence: null, seen: [], frames: [], final: false, connections: 0, segments: [] };
    this.streams.push(rec);
    let api = this.apiNames[Math.floor(random() * this.apiNames.length)]!;
    const deadline = Date.now() + 60_000;
    let failures = 0;
    // a stream in progress is followed to its end even after the load stops (within its deadline)
    while (!rec.final && Date.now() < deadline) {
      const binding: Binding = random() < 0.5 ? 'JSONRPC' : 'HTTP+JSON';
      const cutAfter = random() < 0.25 ? Infinity : 1 + Math.floor(random() * 6);
      const last = rec.seen.at(-1) ?? rec.snapshotSequence;
      const seg = await this.segment(rec, api, binding, messageId, last, cutAfter);
      rec.segments.push(seg);
      rec.connections++;
      if (seg.end === 'final' || seg.end === 'terminal-task') break;
      if (seg.end === 'error' || seg.end === 'closed') {
        failures++;
        await sleep(Math.min(3_000, 200 * 2 ** Math.min(failures, 4)) * (0.5 + random()));
      }
      api = this.other(api);
    }
  }

  private async segment(rec: StreamRecord, api: string, binding: Binding, messageId: string, last: number | null, cutAfter: number): Promise<StreamRecord['segments'][number]> {
    const agent = (rec.agent as AgentSlug | undefined) ?? AGENTS.scripted;
    const base = `${this.w.apis[api]}${this.w.agents[agent]}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' };
    let url: string;
    let body: string;
    const resuming = rec.taskId !== null && last !== null;
    if (!resuming) {
      // the opening request (or its retry with the same messageId: the same task comes back)
      const params = { message: { messageId, role: 'ROLE_USER', parts: [{ text: `${agent === AGENTS.scripted ? 'slow' : 'job'} ${messageId.slice(0, 8)}` }] } };
      url = binding === 'JSONRPC' ? base : `${base}/message:stream`;
      body = binding === 'JSONRPC' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params }) : JSON.stringify(params);
    } else {
      headers['last-event-id'] = String(last);
      url = binding === 'JSONRPC' ? base : `${base}/tasks/${rec.taskId}:subscribe`;
      body = binding === 'JSONRPC' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: rec.taskId } }) : '{}';
    }
    const seg: StreamRecord['segments'][number] = { api, binding, after: resuming ? last : null, frames: 0, end: 'closed' };
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 30_000);
    try {
      const res = await fetch(url, { method: 'POST', headers, body, signal: ac.signal });
      const ct = res.headers.get('content-type') ?? '';
      if (!ct.startsWith('text/event-stream')) {
        const text = await res.text();
        // a terminal task whose cursor is at the end: nothing left to deliver
        if (resuming && (binding === 'JSONRPC' ? /"code":\s*-32004/.test(text) : res.status === 501)) seg.end = 'terminal-task';
        else seg.end = 'error';
        seg.error = `HTTP ${res.status} ${text.slice(0, 160)}`;
        return seg;
      }
      for await (const ev of res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream())) {
        seg.frames++;
        const end = this.frame(rec, ev.id, ev.data, resuming);
        if (end) {
          seg.end = end;
          if (end !== 'final') seg.error = ev.data.slice(0, 160);
          ac.abort();
          return seg;
        }
        if (seg.frames >= cutAfter) {
          seg.end = 'cut';
          ac.abort();
          return seg;
        }
      }
      return seg;
    } catch (e) {
      seg.end = 'error';
      seg.error = describeError(e);
      return seg;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Record one SSE frame; returns how the stream ends with it (or null). */
  private frame(rec: StreamRecord, id: string | undefined, data: string, resuming: boolean): 'final' | 'error' | null {
    let parsed: any;
    try {
      parsed = JSON.parse(data);
    } catch {
      return 'error';
    }
    if (parsed.error) return 'error';
    const r = parsed.result ?? parsed;
    if (r.task) {
      if (resuming || rec.snapshotSequence !== null) return 'error'; // a snapshot only opens a stream
      rec.taskId = r.task.id;
      rec.snapshotSequence = Number(id);
      rec.snapshot = taskSeenOfJson(r.task);
      if (!['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'].includes(r.task.status?.state)) return null;
      rec.final = true;
      return 'final';
    }
    if (id !== undefined) {
      rec.seen.push(Number(id));
      (rec.frames ??= []).push(frameDigest(r) ?? '?');
    }
    const state = r.statusUpdate?.status?.state;
    if (state && ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED', 'TASK_STATE_INPUT_REQUIRED'].includes(state)) {
      rec.final = true;
      const m = r.statusUpdate.status.message;
      rec.finalSeen = { sequence: Number(id), state, statusMessage: m ? messageSeen(m) : null };
      return 'final';
    }
    return null;
  }

  /** One client's loop: operations chosen by its own seeded PRNG, until `stopping`. */
  async loop(client: number, seed: number): Promise<void> {
    const random = prng(seed);
    while (!this.stopping) {
      const x = random();
      const backend = (): AgentSlug => (random() < 0.5 ? AGENTS.http : AGENTS.a2a);
      try {
        if (x < 0.24) await this.send(client, random);
        else if (x < 0.44) await this.stream(client, random, random() < 0.6 ? AGENTS.scripted : backend());
        else if (x < 0.57) await this.multiTurn(client, random);
        else if (x < 0.67) await this.cancel(client, random);
        else if (x < 0.77) await this.laterPush(client, random);
        else await this.backendSend(client, random, backend(), random() < 0.25);
      } catch (e) {
        process.stderr.write(`[faults] client ${client}: unexpected ${describeError(e)}\n`);
      }
      await sleep(50 + random() * 200);
    }
  }

  /** Outcomes by operation kind (and agent, for the `http` and `a2a` ones), for the report. */
  summary(): string {
    const by = new Map<string, Record<Outcome, number>>();
    for (const op of this.operations) {
      const k = op.agent && op.agent !== AGENTS.scripted ? `${op.kind} ${op.agent.replace('faults-', '')}` : op.kind;
      const o = by.get(k) ?? { ok: 0, fail: 0, unknown: 0 };
      o[op.outcome]++;
      by.set(k, o);
    }
    const s = { ok: 0, fail: 0, unknown: 0 };
    for (const r of this.streams) r.final ? s.ok++ : s.unknown++;
    by.set('stream', s);
    const retried = this.operations.filter((o) => o.attempts.length > 1).length;
    const lines = [...by].map(([k, o]) => `  ${k.padEnd(12)} ok ${o.ok}, fail ${o.fail}, unknown ${o.unknown}`);
    lines.push(`  retried operations: ${retried}; stream connections: ${this.streams.reduce((a, r) => a + r.connections, 0)}`);
    return lines.join('\n');
  }
}
