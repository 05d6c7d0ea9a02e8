/**
 * `aaas send` / `aaas chat`: talk to an agent as an A2A client would, with the official
 * `@a2a-js/sdk` client (the agent's card at `/a2a/<org>/<agent>/.well-known/agent-card.json`,
 * the transport the card offers: JSON-RPC or HTTP+JSON). The answer is printed as it streams in
 * (`SendStreamingMessage` when the card says the agent streams; the SDK falls back to one
 * `SendMessage` otherwise).
 *
 * The API key goes along as `Authorization: Bearer` only to the service's own origin (an agent
 * card could name any URL; the key must never leave for another host).
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Role, SendMessageRequest, taskStateToJSON, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client';
import { networkReason, UsageError } from './admin-client.js';

/** What one exchange ended with: the task (or none, for a direct Message reply), its state and what the agent asks, if it does. */
export interface Turn {
  taskId: string | null;
  contextId: string | null;
  /** `completed`, `input-required`, … (A2A's TASK_STATE_ prefix dropped, lowercase, `-`); `message` for a direct reply. */
  state: string;
  /** The agent's text, in order (message and status texts, artifact chunks). */
  text: string[];
  /** The open interaction the agent asks, from its status message's `metadata.interaction`. */
  interaction: { id: string; kind?: string; options?: Array<{ id: string; label?: string }> } | null;
}

/** The client of one agent; `key` is sent only to `serviceUrl`'s origin. */
export async function connectAgent(serviceUrl: string, orgSlug: string, agentSlug: string, key: string | undefined): Promise<Client> {
  const origin = new URL(serviceUrl).origin;
  const fetchImpl: typeof fetch = (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    if (!key || url.origin !== origin) return fetch(input, init);
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
  const cardUrl = `${serviceUrl.replace(/\/+$/, '')}/a2a/${encodeURIComponent(orgSlug)}/${encodeURIComponent(agentSlug)}/.well-known/agent-card.json`;
  try {
    return await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })] }).createFromUrl(cardUrl, '');
  } catch (e) {
    const reason = e instanceof Error && /\b404\b/.test(e.message) ? 'HTTP 404 (no such agent, or it has no enabled A2A binding)' : networkReason(e);
    throw new UsageError(`cannot load the agent card ${cardUrl}: ${reason}`);
  }
}

const stateName = (s: number | undefined) => (s === undefined ? 'unknown' : taskStateToJSON(s).replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-'));

function textOf(m: Message | undefined): string {
  return (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
}

function interactionOf(m: Message | undefined): Turn['interaction'] {
  const i = (m?.metadata as { interaction?: { id?: unknown; kind?: unknown; options?: unknown } } | undefined)?.interaction;
  if (!i || typeof i.id !== 'string') return null;
  return { id: i.id, ...(typeof i.kind === 'string' && { kind: i.kind }), ...(Array.isArray(i.options) && { options: i.options as Array<{ id: string; label?: string }> }) };
}

/**
 * Send `text` (in `contextId`, continuing `taskId` when given) and stream the answer: each agent
 * text goes to `onText` as it arrives (artifact chunks as `append` pieces). Resolves when the
 * stream ends.
 */
export async function sendTurn(
  client: Client,
  text: string,
  opts: { contextId?: string | null; taskId?: string | null; onText: (text: string, append: boolean) => void },
): Promise<Turn> {
  const request = SendMessageRequest.fromJSON({
    message: {
      messageId: randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text, mediaType: 'text/plain' }],
      ...(opts.contextId ? { contextId: opts.contextId } : {}),
      ...(opts.taskId ? { taskId: opts.taskId } : {}),
    },
  });
  const turn: Turn = { taskId: opts.taskId ?? null, contextId: opts.contextId ?? null, state: 'unknown', text: [], interaction: null };
  const seen = new Set<string>();
  const say = (m: Message | undefined) => {
    if (!m || m.role === Role.ROLE_USER || seen.has(m.messageId)) return;
    seen.add(m.messageId);
    const t = textOf(m);
    if (t) {
      turn.text.push(t);
      opts.onText(t, false);
    }
  };
  const onTask = (task: Task) => {
    turn.taskId = task.id;
    turn.contextId = task.contextId;
    turn.state = stateName(task.status?.state);
    // the agent's messages after the last user message (a non-streaming answer arrives whole)
    const lastUser = task.history.map((m) => m.role).lastIndexOf(Role.ROLE_USER);
    for (const m of task.history.slice(lastUser + 1)) say(m);
    for (const a of task.artifacts) {
      for (const p of a.parts) {
        if (p.content?.$case !== 'text') continue;
        turn.text.push(p.content.value);
        opts.onText(p.content.value, false);
      }
    }
    say(task.status?.message);
    turn.interaction = interactionOf(task.status?.message);
  };
  for await (const ev of client.sendMessageStream(request)) {
    const p = ev.payload;
    if (!p) continue;
    if (p.$case === 'task') onTask(p.value);
    else if (p.$case === 'message') {
      turn.state = 'message';
      turn.contextId = p.value.contextId || turn.contextId;
      say(p.value);
    } else if (p.$case === 'statusUpdate') {
      turn.taskId = p.value.taskId;
      turn.contextId = p.value.contextId;
      turn.state = stateName(p.value.status?.state);
      say(p.value.status?.message);
      turn.interaction = interactionOf(p.value.status?.message);
    } else if (p.$case === 'artifactUpdate') {
      for (const part of p.value.artifact?.parts ?? []) {
        if (part.content?.$case !== 'text') continue;
        turn.text.push(part.content.value);
        opts.onText(part.content.value, p.value.append);
      }
    }
  }
  if (turn.state !== 'input-required' && turn.state !== 'auth-required') turn.interaction = null;
  return turn;
}

/** The states where the agent waits for the caller: the next line answers. */
export const ASKING = new Set(['input-required', 'auth-required']);
const ENDED = new Set(['completed', 'failed', 'canceled', 'rejected', 'message']);

/**
 * The interactive loop: each line of `input` is a message in the same context; while the agent asks
 * (input-required / auth-required: a question, a confirmation), the next line answers that task
 * (for a confirmation, an option's id or label). `/quit` or end of input ends it. A message that
 * fails is reported on `err` (exit code 2 at the end) and the loop goes on.
 */
export async function chatLoop(
  client: Client,
  io: { input: NodeJS.ReadableStream; interactive: boolean; out: (s: string) => void; write: (s: string) => void; err: (s: string) => void },
): Promise<void> {
  const rl = createInterface({ input: io.input, terminal: false });
  let contextId: string | null = null;
  let asking: { taskId: string } | null = null;
  const prompt = () => {
    if (io.interactive) io.write(asking ? 'answer> ' : 'you> ');
  };
  prompt();
  for await (const raw of rl) {
    const line = raw.trim();
    if (line === '/quit' || line === '/exit') break;
    if (!line) {
      prompt();
      continue;
    }
    let midLine = false;
    let turn: Turn;
    try {
      turn = await sendTurn(client, line, {
        contextId,
        taskId: asking?.taskId ?? null,
        onText: (t, append) => {
          if (append && midLine) io.write(t);
          else {
            if (midLine) io.write('\n');
            io.write(t);
          }
          midLine = !t.endsWith('\n');
        },
      });
    } catch (e) {
      // one failed message does not end the conversation: say why, keep the context (and the question)
      if (midLine) io.write('\n');
      io.err(`aaas: ${e instanceof Error ? e.message : String(e)}`);
      process.exitCode = 2;
      prompt();
      continue;
    }
    if (midLine) io.write('\n');
    contextId = turn.contextId ?? contextId;
    if (ASKING.has(turn.state) && turn.taskId) {
      asking = { taskId: turn.taskId };
      const opts = turn.interaction?.options?.length ? ` (${turn.interaction.options.map((o) => o.id).join(' / ')})` : '';
      io.err(`aaas: the agent asks${opts}; the next line answers it`);
    } else {
      asking = null;
      if (!ENDED.has(turn.state)) io.err(`aaas: the task is ${turn.state}`);
      else if (turn.state !== 'completed' && turn.state !== 'message') io.err(`aaas: the task ${turn.state}`);
    }
    prompt();
  }
  rl.close();
}
