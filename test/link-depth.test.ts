import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, Task, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { MAX_LINK_DEPTH } from '#libs/runs';
import { adminRequest, publishAgent, type PublishedAgent } from './support/admin-client.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * RunLink nesting is capped at MAX_LINK_DEPTH (8): a run that is already eight delegations below
 * the run its caller created may not delegate again (`run.link_too_deep`, raised by
 * RuntimeOperations.delegate before anything is written). The scripted runtime turns that refusal
 * into a failed run whose status message says why; the runs above settle as their `delegate` step
 * declares (`onFailure: fail` cascades the failure up, `continue` completes them). The caller sees
 * it through the official `@a2a-js/sdk` client, the operator through the admin API's links.
 */

/** `hop-0` → `hop-1` → … → `hop-9`: each hands its input to the next; `hop-9` answers. */
const HOPS = 10;
const hopRuntime = (i: number) =>
  i === HOPS - 1
    ? { kind: 'scripted', rules: [{ match: { text: '.' }, steps: [{ type: 'status', status: 'completed', message: 'bottom reached' }] }] }
    : {
        kind: 'scripted',
        rules: [{ match: { text: '.' }, steps: [{ type: 'delegate', agent: `hop-${i + 1}`, text: '{{input}}' }, { type: 'status', status: 'completed', message: `hop-${i} got: {{result}}` }] }],
      };

/** One agent delegating to itself for ever; a refused delegation lets each level carry on. */
const NEST = {
  kind: 'scripted',
  rules: [{ match: { text: '.' }, steps: [{ type: 'delegate', agent: 'nest', text: '{{input}}', onFailure: 'continue' }, { type: 'message', text: 'level done' }] }],
};

let stack: Stack;
let client: (a: PublishedAgent) => Promise<A2AClient>;
const hops: PublishedAgent[] = [];
let nest: PublishedAgent;

const admin = <T = any>(method: string, path: string) => adminRequest<T>(stack.baseUrl, stack.adminKey, method, path);
const state = (t: Task) => taskStateToJSON(t.status!.state);
const statusText = (t: Task) => (t.status?.message?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const send = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });

async function settled(c: A2AClient, id: string): Promise<Task> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const t = await c.getTask({ tenant: '', id, historyLength: undefined });
    if (['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'].includes(state(t))) return t;
    if (Date.now() > deadline) throw new Error(`task ${id} is still ${state(t)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Level {
  runId: string;
  detail: any;
}

/** Follow `links.children` down from `rootId` through the admin API, one run per level. */
async function chain(rootId: string): Promise<Level[]> {
  const levels: Level[] = [];
  for (let runId: string | undefined = rootId; runId; ) {
    const res: { status: number; body: any } = await admin(`GET`, `/v1/runs/${runId}`);
    expect(res.status).toBe(200);
    levels.push({ runId, detail: res.body });
    expect(res.body.links.children.length, `run ${runId} has at most one child`).toBeLessThanOrEqual(1);
    runId = res.body.links.children[0]?.childRunId;
    expect(levels.length, 'the chain ends').toBeLessThanOrEqual(MAX_LINK_DEPTH + 2);
  }
  return levels;
}

const runsOfAgent = async (agentId: string) => (await admin('GET', `/v1/runs?agentId=${agentId}&limit=100`)).body.runs as Array<{ id: string; status: string }>;

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '20000' } });
  for (let i = HOPS - 1; i >= 0; i--) hops[i] = await publishAgent(stack.baseUrl, stack.adminKey, { slug: `hop-${i}`, runtime: hopRuntime(i) });
  nest = await publishAgent(stack.baseUrl, stack.adminKey, { slug: 'nest', runtime: NEST });
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory()] });
  client = (a) => factory.createFromUrl(`${stack.baseUrl}${a.basePath}/`);
});

afterAll(async () => {
  await stack?.close();
});

describe('RunLink depth', () => {
  it('the cap is 8', () => {
    expect(MAX_LINK_DEPTH).toBe(8);
  });

  it(`${MAX_LINK_DEPTH} nested delegations are allowed: every level completes with the result of the one below`, async () => {
    const c = await client(hops[1]!);
    const sent = (await c.sendMessage(send('go deep'))) as Task;
    const root = await settled(c, sent.id);
    expect(state(root)).toBe('TASK_STATE_COMPLETED');
    expect(statusText(root)).toBe(`hop-1 got: ${Array.from({ length: 7 }, (_, k) => `hop-${k + 2} got: `).join('')}bottom reached`);

    const levels = await chain(root.id);
    expect(levels).toHaveLength(MAX_LINK_DEPTH + 1);
    levels.forEach(({ detail }, depth) => {
      expect(detail.run).toMatchObject({ agentId: hops[depth + 1]!.agentId, status: 'completed' });
      expect(detail.links.parents).toHaveLength(depth === 0 ? 0 : 1);
      if (depth > 0) expect(detail.links.parents[0]).toMatchObject({ parentRunId: levels[depth - 1]!.runId, kind: 'delegation', awaiting: true, other: { agentId: hops[depth]!.agentId, status: 'completed' } });
    });
    // the bottom run (depth 8) did not need to delegate
    expect(levels.at(-1)!.detail.links.children).toEqual([]);
  });

  it('the 9th delegation is refused: the run that tried fails with the reason, nothing is created below it, and the failure climbs back up to the caller', async () => {
    const bottomRunsBefore = await runsOfAgent(hops[HOPS - 1]!.agentId);
    const c = await client(hops[0]!);
    const sent = (await c.sendMessage(send('go deeper'))) as Task;
    const root = await settled(c, sent.id);
    expect(state(root)).toBe('TASK_STATE_FAILED');

    const levels = await chain(root.id);
    // hop-0 (depth 0) … hop-8 (depth 8): nine runs, eight links, and no run for hop-9
    expect(levels).toHaveLength(MAX_LINK_DEPTH + 1);
    expect(levels.map((l) => l.detail.run.agentId)).toEqual(hops.slice(0, MAX_LINK_DEPTH + 1).map((h) => h.agentId));
    expect(await runsOfAgent(hops[HOPS - 1]!.agentId)).toEqual(bottomRunsBefore);

    const deepest = levels.at(-1)!;
    expect(deepest.detail.run.status).toBe('failed');
    expect(deepest.detail.links.children).toEqual([]);
    expect(deepest.detail.statusMessage.parts[0].text).toBe(`Cannot delegate to hop-9: run ${deepest.runId} is ${MAX_LINK_DEPTH} delegations deep; at most ${MAX_LINK_DEPTH} are allowed`);
    const deepestEvents = (await admin('GET', `/v1/runs/${deepest.runId}/events?limit=1000`)).body.events as Array<{ event: { type: string } }>;
    expect(deepestEvents.map((e) => e.event.type)).not.toContain('run.linked');

    // every level above fails because its child did (onFailure: fail, the default), naming the child
    for (let depth = 0; depth < MAX_LINK_DEPTH; depth++) {
      const { detail } = levels[depth]!;
      const childId = levels[depth + 1]!.runId;
      expect(detail.run.status, `depth ${depth}`).toBe('failed');
      expect(detail.links.children).toMatchObject([{ childRunId: childId, awaiting: true, other: { status: 'failed' } }]);
      expect(detail.statusMessage.parts[0].text).toBe(`The delegated task ${childId} (hop-${depth + 1}) ended failed`);
    }

    // the caller reads the same through A2A: its task failed because its child did, and the
    // deepest task (on hop-8's endpoint) says why
    expect(statusText(root)).toBe(`The delegated task ${levels[1]!.runId} (hop-1) ended failed`);
    const deepestTask = await (await client(hops[MAX_LINK_DEPTH]!)).getTask({ tenant: '', id: deepest.runId, historyLength: undefined });
    expect(state(deepestTask)).toBe('TASK_STATE_FAILED');
    expect(statusText(deepestTask)).toMatch(/8 delegations deep; at most 8 are allowed/);
  });

  it('an agent delegating to itself stops at depth 8; with onFailure: continue every level above completes', async () => {
    const c = await client(nest);
    const sent = (await c.sendMessage(send('recurse'))) as Task;
    const root = await settled(c, sent.id);
    expect(state(root)).toBe('TASK_STATE_COMPLETED');

    const levels = await chain(root.id);
    expect(levels).toHaveLength(MAX_LINK_DEPTH + 1);
    expect(levels.map((l) => l.detail.run.status)).toEqual([...Array(MAX_LINK_DEPTH).fill('completed'), 'failed']);
    expect(levels.at(-1)!.detail.statusMessage.parts[0].text).toMatch(/^Cannot delegate to nest: run \S+ is 8 delegations deep; at most 8 are allowed$/);
    for (const { detail } of levels.slice(0, -1)) expect(detail.history.at(-1).parts).toEqual([{ text: 'level done' }]);
    // exactly nine runs of this agent exist: nothing was created past the cap
    const all = await runsOfAgent(nest.agentId);
    expect(all.map((r) => r.id).sort()).toEqual(levels.map((l) => l.runId).sort());
  });
});
