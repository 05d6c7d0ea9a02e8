import type { ScriptedStep } from '#libs/contracts';
import type { MessageSeen, TaskSeen } from './history.js';

/**
 * What an A2A client can see of a run, written as short strings, so the fault suite can compare
 * three sources of it (pure, no I/O):
 * - the log (run_events rows, as the database holds them): `logOutput`, `eventDigests`;
 * - what clients received (SSE frames, push bodies, Task answers): `frameDigest`, `taskSeenOfJson`;
 * - what the agents' scripts say they produce: `expectedScripted` (the `scripted` runtime's rules,
 *   expanded as libs/runtimes/src/scripted/scripted.runtime.ts expands them) and `expectedBackend`
 *   (the steps the suite's own `http` backend and upstream A2A agent play).
 *
 * Two vocabularies:
 * - a digest is one projected event as the stream / push shows it (v1.0 `StreamResponse`):
 *   `status TASK_STATE_WORKING <messageId> "<text>"` or
 *   `artifact <artifactId>[ append][ last] "<text>"` — every field a client sees that the checker
 *   can compare, so a payload replaced after it was delivered shows;
 * - an output item is one step of a run's output as a script defines it: `status <status>[ "<text>"]`,
 *   `ask <blockedReason> "<text>"` (a blocking interaction), `message "<text>"`,
 *   `artifact <artifactId>[ +] "<text>"` (one per part; `+` appends to the artifact). Ids the
 *   platform assigns (messageIds, event ids) and chunk boundaries are left out: a runtime may
 *   merge chunks when it reconciles (the `a2a` runtime does after a resumption).
 */

type LogEvent = { sequence: number; type: string; payload: Record<string, unknown> };
interface Msg {
  messageId?: string;
  role?: string;
  parts?: Array<{ text?: unknown }>;
}

/** Texts of text parts joined with `\n` (libs/contracts messageText); other parts count as nothing. */
export function partsText(parts: unknown): string {
  if (!Array.isArray(parts)) return '';
  return parts.map((p) => (p && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : null)).filter((t): t is string => t !== null).join('\n');
}

/** A2A v1.0 TaskState of a run state (libs/a2a task-state.ts deriveTaskState, restated here). */
export function a2aState(status: string, blockedReason: string | null): string {
  const terminal = ['completed', 'failed', 'canceled', 'rejected'].includes(status);
  if (!terminal && blockedReason) return blockedReason === 'auth_required' ? 'TASK_STATE_AUTH_REQUIRED' : 'TASK_STATE_INPUT_REQUIRED';
  return `TASK_STATE_${status.toUpperCase()}`;
}

const q = (s: string) => JSON.stringify(s);

function statusDigest(state: string, m: Msg | undefined): string {
  return m ? `status ${state} ${m.messageId ?? '-'} ${q(partsText(m.parts))}` : `status ${state}`;
}

function artifactDigest(artifactId: string, parts: unknown, append: boolean, last: boolean): string {
  return `artifact ${artifactId}${append ? ' append' : ''}${last ? ' last' : ''} ${q(partsText(parts))}`;
}

/**
 * Digest of a v1.0 StreamResponse as JSON (an SSE frame's `result`, an HTTP+JSON frame, a push
 * body): `statusUpdate` and `artifactUpdate` only (a `task` snapshot or a `message` is not an
 * event of the log: null).
 */
export function frameDigest(frame: unknown): string | null {
  const f = frame as { statusUpdate?: { status?: { state?: string; message?: Msg } }; artifactUpdate?: { artifact?: { artifactId?: string; parts?: unknown }; append?: boolean; lastChunk?: boolean } };
  if (f?.statusUpdate) return statusDigest(String(f.statusUpdate.status?.state ?? '?'), f.statusUpdate.status?.message);
  if (f?.artifactUpdate) return artifactDigest(String(f.artifactUpdate.artifact?.artifactId ?? '?'), f.artifactUpdate.artifact?.parts, f.artifactUpdate.append === true, f.artifactUpdate.lastChunk === true);
  return null;
}

/**
 * The state a status-affecting event leaves (libs/runs isStatusEvent and foldState, restated), or
 * null for an event that leaves the state alone.
 */
function stateAfter(e: LogEvent): { status: string; blockedReason: string | null } | null {
  const p = e.payload as { status?: string; blockedReason?: string | null; blocking?: boolean };
  switch (e.type) {
    case 'run.status_changed':
      return { status: p.status ?? '?', blockedReason: p.blockedReason ?? null };
    case 'interaction.requested':
      return { status: 'working', blockedReason: p.blockedReason ?? null };
    case 'interaction.responded':
    case 'interaction.expired':
      return p.blocking === false ? null : { status: 'working', blockedReason: null };
    default:
      return null;
  }
}

/**
 * Per projected event of one run's log (sorted by sequence), the digest a stream or push receiver
 * must have got for it: the table of libs/a2a/src/stream-projection.ts `projectEnvelope` (status
 * updates carry the state after the event and the event's message, when it has one).
 */
export function eventDigests(events: readonly LogEvent[]): Map<number, string> {
  const out = new Map<number, string>();
  let state = { status: 'submitted', blockedReason: null as string | null };
  for (const e of events) {
    const after = stateAfter(e);
    if (after) state = after;
    const p = e.payload as { message?: Msg; blocking?: boolean; outcome?: string; artifactId?: string; parts?: unknown; append?: boolean; lastChunk?: boolean };
    const here = a2aState(state.status, state.blockedReason);
    switch (e.type) {
      case 'message.added':
        if (p.message?.role === 'agent') out.set(e.sequence, statusDigest(here, p.message));
        break;
      case 'run.status_changed':
      case 'interaction.requested':
      case 'run.linked':
        out.set(e.sequence, statusDigest(here, p.message));
        break;
      case 'interaction.responded':
        if (after) out.set(e.sequence, statusDigest(here, undefined));
        break;
      case 'interaction.expired':
        if (after && p.outcome === 'continue') out.set(e.sequence, statusDigest(here, undefined));
        break;
      case 'run.link_updated':
        out.set(e.sequence, statusDigest(here, undefined));
        break;
      case 'artifact.updated':
        out.set(e.sequence, artifactDigest(String(p.artifactId), p.parts, p.append === true, p.lastChunk === true));
        break;
    }
  }
  return out;
}

/**
 * A run's output as its script would define it, from its log (sorted by sequence): status
 * changes, blocking interactions, agent messages, artifact parts, in order. Bookkeeping is left
 * out: run.created, the caller's messages, interaction closings and cancellations,
 * run.execution_resumed, run.runtime_state_saved. Links are kept (`link ...`): no script of the
 * suite delegates, so one is output nobody asked for.
 */
export function logOutput(events: readonly LogEvent[]): Array<{ sequence: number; item: string }> {
  const out: Array<{ sequence: number; item: string }> = [];
  for (const e of events) {
    const p = e.payload as { status?: string; message?: Msg; blocking?: boolean; blockedReason?: string; artifactId?: string; parts?: unknown[]; append?: boolean };
    switch (e.type) {
      case 'run.status_changed':
        out.push({ sequence: e.sequence, item: `status ${p.status}${p.message ? ` ${q(partsText(p.message.parts))}` : ''}` });
        break;
      case 'interaction.requested':
        out.push({ sequence: e.sequence, item: p.blocking === false ? `note ${q(partsText(p.message?.parts))}` : `ask ${p.blockedReason} ${q(partsText(p.message?.parts))}` });
        break;
      case 'message.added':
        if (p.message?.role === 'agent') out.push({ sequence: e.sequence, item: `message ${q(partsText(p.message.parts))}` });
        break;
      case 'artifact.updated':
        (p.parts ?? []).forEach((part, i) => out.push({ sequence: e.sequence, item: `artifact ${p.artifactId}${p.append || i > 0 ? ' +' : ''} ${q(partsText([part]))}` }));
        break;
      case 'run.linked':
      case 'run.link_updated':
        out.push({ sequence: e.sequence, item: `link ${e.type}` });
        break;
    }
  }
  return out;
}

/** The caller's messages of a run's log, in order (the first is the one that created it). */
export function userInputs(events: readonly LogEvent[]): Array<{ messageId: string; text: string }> {
  const out: Array<{ messageId: string; text: string }> = [];
  for (const e of events) {
    if (e.type !== 'message.added' && e.type !== 'interaction.responded') continue;
    const m = (e.payload as { message?: Msg }).message;
    if (m?.role === 'user') out.push({ messageId: m.messageId ?? '', text: partsText(m.parts) });
  }
  return out;
}

/**
 * What a script leaves a run with: `items` (output items, see the module doc) and how it ends —
 * `terminal` (its last item is a terminal status), `blocked` (waits for an answer the log does not
 * hold), `held` (a holdUntilCanceled step: only a cancel ends it), or `unsupported` (a step the
 * expansion does not model, named in `why`: nothing is checked).
 */
export interface Expected {
  items: string[];
  end: 'terminal' | 'blocked' | 'held' | 'unsupported';
  why?: string;
}

/** A `scripted` runtime config as the suite publishes it (ScriptedRuntimeConfigSchema's shape). */
export interface ScriptedConfig {
  rules: Array<{ name?: string; match: { text?: string; flags?: string; messageIdPrefix?: string }; steps: ScriptedStep[] }>;
}

const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

/** Split `length` items into `n` near-equal non-empty slices (the scripted runtime's `slices`). */
function slices(length: number, n: number): Array<[number, number]> {
  const count = Math.max(1, Math.min(n, length));
  return Array.from({ length: count }, (_, i) => [Math.floor((i * length) / count), Math.floor(((i + 1) * length) / count)]);
}

/** The rule's steps for `input`: the longest match wins, ties to the earlier rule; none: the echo rule. */
function selectSteps(config: ScriptedConfig, input: { messageId: string; text: string }): ScriptedStep[] {
  let best: ScriptedStep[] | null = null;
  let bestScore = -1;
  for (const rule of config.rules) {
    let score = 0;
    if (rule.match.text !== undefined) {
      const m = new RegExp(rule.match.text, rule.match.flags).exec(input.text);
      if (!m) continue;
      score += m[0].length;
    }
    if (rule.match.messageIdPrefix !== undefined) {
      if (!input.messageId.startsWith(rule.match.messageIdPrefix)) continue;
      score += rule.match.messageIdPrefix.length;
    }
    if (score > bestScore) {
      best = rule.steps;
      bestScore = score;
    }
  }
  return best ?? [{ type: 'status', status: 'working' }, { type: 'message', text: '{{input}}' }, { type: 'status', status: 'completed' }];
}

/**
 * The output a `scripted` config defines for a run whose caller sent `inputs` (its creating
 * message, then each answer), expanded as the scripted runtime runs steps:
 * - `{{input}}` is the text of the message that triggered the execution (the answer, after an
 *   interaction);
 * - `status` → `status <s>`; input-required / auth-required → `ask` and the next input selects a
 *   rule again; a terminal status ends the run;
 * - `message` / `reply` → `message`; `artifact` (text content) → its `chunks` slices by code
 *   point, one item each, the first not appending; `wait` → nothing;
 * - `interaction` → `ask <kind>_required`, then (blocking) the next input resumes the script with
 *   its `answered` branch and the steps after it (the option and decision branches are not
 *   modelled: `unsupported` when the step has other branches); non-blocking: `note`;
 * - `holdUntilCanceled` ends the expansion (`held`); the end of the steps adds `status completed`.
 * Delegations, sub-states, byte/url/data artifacts and artifacts without id are `unsupported`.
 */
export function expectedScripted(config: ScriptedConfig, inputs: ReadonlyArray<{ messageId: string; text: string }>): Expected {
  const items: string[] = [];
  if (inputs.length === 0) return { items, end: 'unsupported', why: 'no input in the log' };
  let input = inputs[0]!;
  let next = 1;
  let queue = [...selectSteps(config, input)];
  const render = (t: string) => t.replaceAll('{{input}}', input.text);
  while (queue.length > 0) {
    const step = queue.shift()!;
    switch (step.type) {
      case 'status':
        if (step.status === 'input-required' || step.status === 'auth-required') {
          items.push(`ask ${step.status.replace('-', '_')} ${q(step.message !== undefined ? render(step.message) : '')}`);
          if (next >= inputs.length) return { items, end: 'blocked' };
          input = inputs[next++]!;
          queue = [...selectSteps(config, input)];
          continue;
        }
        items.push(`status ${step.status}${step.message !== undefined ? ` ${q(render(step.message))}` : ''}`);
        if (TERMINAL.has(step.status)) return { items, end: 'terminal' };
        break;
      case 'message':
      case 'reply':
        items.push(`message ${q(step.text !== undefined ? render(step.text) : partsText(step.parts))}`);
        break;
      case 'artifact': {
        if (!('text' in step.content) || step.artifactId === undefined) return { items, end: 'unsupported', why: 'an artifact step without artifactId or with non-text content' };
        const chars = Array.from(render(step.content.text));
        slices(chars.length, step.chunks ?? 1).forEach(([a, b], i) => items.push(`artifact ${step.artifactId}${i > 0 ? ' +' : ''} ${q(chars.slice(a, b).join(''))}`));
        break;
      }
      case 'wait':
        break;
      case 'holdUntilCanceled':
        return { items, end: 'held' };
      case 'interaction': {
        if (step.branches && Object.keys(step.branches).some((k) => k !== 'answered')) return { items, end: 'unsupported', why: 'an interaction with option / decision branches' };
        const prompt = step.text !== undefined ? render(step.text) : [step.title, step.description].filter(Boolean).join('\n');
        if (step.blocking === false) {
          items.push(`note ${q(prompt)}`);
          break;
        }
        items.push(`ask ${step.kind}_required ${q(prompt)}`);
        if (next >= inputs.length) return { items, end: 'blocked' };
        input = inputs[next++]!;
        queue = [...(step.branches?.answered ?? []), ...queue];
        break;
      }
      default:
        return { items, end: 'unsupported', why: `a ${step.type} step` };
    }
  }
  items.push('status completed');
  return { items, end: 'terminal' };
}

/**
 * One step of the suite's own backends (the `http` backend's NDJSON answer, the upstream A2A
 * agent's events), `{{input}}` being the text of the run's input:
 * - `status`: a status change, with an agent message when `text` is given (the `http` backend
 *   sends it as the operation's message, the upstream as its TaskStatus.message);
 * - `message`: an agent message (`http` backend only: an A2A agent has no bare message inside a task);
 * - `artifact`: one chunk of `artifactId` with one text part, appending to the artifact's earlier
 *   chunks in the script, the last one of its artifact marked lastChunk;
 * - `wait`: `ms` milliseconds before the next step (so readers see the chunks arrive).
 */
export type BackendStep =
  | { op: 'status'; status: 'working' | 'completed' | 'failed'; text?: string }
  | { op: 'message'; text: string }
  | { op: 'artifact'; artifactId: string; text: string }
  | { op: 'wait'; ms: number };

/** Whether the artifact step at `i` appends (an earlier step wrote its artifact) / is its artifact's last chunk. */
export function chunkFlags(steps: readonly BackendStep[], i: number): { append: boolean; lastChunk: boolean } {
  const s = steps[i] as Extract<BackendStep, { op: 'artifact' }>;
  const same = (x: BackendStep) => x.op === 'artifact' && x.artifactId === s.artifactId;
  return { append: steps.slice(0, i).some(same), lastChunk: !steps.slice(i + 1).some(same) };
}

/**
 * The output a backend script defines for a run whose input text is `input`: each step as its
 * runtime records it (`status <s>[ "<text>"]`, `message`, `artifact <id>[ +]`); a script that ends
 * without a terminal status gets `status completed` (what both runtimes add).
 */
export function expectedBackend(steps: readonly BackendStep[], input: string): Expected {
  const items: string[] = [];
  const render = (t: string) => t.replaceAll('{{input}}', input);
  for (const [i, s] of steps.entries()) {
    if (s.op === 'status') {
      items.push(`status ${s.status}${s.text !== undefined ? ` ${q(render(s.text))}` : ''}`);
      if (TERMINAL.has(s.status)) return { items, end: 'terminal' };
    } else if (s.op === 'message') items.push(`message ${q(render(s.text))}`);
    else if (s.op === 'artifact') items.push(`artifact ${s.artifactId}${chunkFlags(steps, i).append ? ' +' : ''} ${q(render(s.text))}`);
  }
  items.push('status completed');
  return { items, end: 'terminal' };
}

/** A message as TaskSeen records it, from a log payload or a v1.0 JSON message. */
export function messageSeen(m: unknown): MessageSeen {
  const x = m as Msg;
  const role = x.role === 'agent' || x.role === 'ROLE_AGENT' ? 'agent' : 'user';
  return { messageId: x.messageId ?? '', role, text: partsText(x.parts) };
}

/** A v1.0 Task as JSON (a stream's opening snapshot) → TaskSeen. */
export function taskSeenOfJson(task: unknown): TaskSeen {
  const t = task as { status?: { state?: string; message?: unknown }; history?: unknown[]; artifacts?: Array<{ artifactId?: string; parts?: unknown }> };
  return {
    state: String(t.status?.state ?? '?'),
    statusMessage: t.status?.message ? messageSeen(t.status.message) : null,
    messages: (t.history ?? []).map(messageSeen),
    artifacts: (t.artifacts ?? []).map((a) => ({ artifactId: String(a.artifactId ?? '?'), text: partsText(a.parts) })),
  };
}

/**
 * The Task a run's log projects at its end (the read model of libs/runs run-fold.ts): the state of
 * the newest status event and its message; every message the log carries, in order; the
 * artifacts with their chunks folded (a chunk that does not append restarts its artifact), in
 * order of first chunk. Texts as `partsText` joins them.
 */
export function finalTask(events: readonly LogEvent[]): TaskSeen {
  let state = { status: 'submitted', blockedReason: null as string | null };
  let statusMessage: MessageSeen | null = null;
  const messages: MessageSeen[] = [];
  const artifacts = new Map<string, string[]>();
  for (const e of events) {
    const p = e.payload as { message?: Msg; artifactId?: string; parts?: unknown[]; append?: boolean };
    if (p.message) messages.push(messageSeen(p.message));
    const after = stateAfter(e);
    if (after) {
      state = after;
      statusMessage = p.message ? messageSeen(p.message) : null;
    }
    if (e.type === 'artifact.updated') {
      const texts = (p.parts ?? []).map((x) => partsText([x]));
      const id = String(p.artifactId);
      artifacts.set(id, p.append && artifacts.has(id) ? [...artifacts.get(id)!, ...texts] : texts);
    }
  }
  return {
    state: a2aState(state.status, state.blockedReason),
    statusMessage,
    messages,
    artifacts: [...artifacts].map(([artifactId, texts]) => ({ artifactId, text: texts.join('\n') })),
  };
}
