import { describe, expect, it } from 'vitest';
import {
  ScriptedRuntimeConfigSchema,
  RuntimeConfigSchema,
  type ArtifactChunkInput,
  type CanonicalMessage,
  type Part,
} from '#libs/contracts';
import type { RuntimeContext } from '../runtime.js';
import { ScriptedRuntime, selectRule } from './scripted.runtime.js';

const runtime = new ScriptedRuntime();
const config = (rules: unknown[]) => runtime.parseConfig({ kind: 'scripted', rules });
const rule = (match: object, steps: unknown[] = [{ type: 'message', text: 'x' }], name?: string) => ({
  name,
  match,
  steps,
});

function input(text: string | Part[], messageId = 'msg-1'): CanonicalMessage {
  return { messageId, role: 'user', parts: typeof text === 'string' ? [{ text }] : text };
}

interface Call {
  method: keyof Omit<RuntimeContext, 'run' | 'input' | 'signal'>;
  args: unknown[];
}

/**
 * In-memory RuntimeContext recording every call. `reject` makes the n-th call (0-based) reject
 * with `error`; `abortOn` aborts the signal while that method runs (a cancel arriving meanwhile).
 */
function fakeCtx(msg: CanonicalMessage, opts: { reject?: { at: number; error: unknown }; abortOn?: Call['method'] } = {}) {
  const calls: Call[] = [];
  /** The operation ids given, in call order (they are stripped from `calls`). */
  const opIds: string[] = [];
  const controller = new AbortController();
  const isOp = (x: unknown) => typeof x === 'object' && x !== null && Object.keys(x).length === 1 && typeof (x as { id?: unknown }).id === 'string';
  const isEmpty = (x: unknown) => (typeof x === 'object' && x !== null && Object.keys(x).length === 0);
  const record =
    (method: Call['method']) =>
    async (...given: unknown[]): Promise<void> => {
      const args = [...given];
      if (args.length > 1 && isOp(args.at(-1))) opIds.push((args.pop() as { id: string }).id);
      // the closing `completed` the runtime adds itself has no message
      if (opIds.at(-1)?.endsWith('/end') && args.length === 2 && args[1] === undefined) args.pop();
      while (args.length > 1 && isEmpty(args.at(-1))) args.pop();
      const index = calls.push({ method, args }) - 1;
      if (opts.abortOn === method) controller.abort();
      if (opts.reject?.at === index) throw opts.reject.error;
    };
  const ctx: RuntimeContext = {
    run: { orgId: 'o', runId: 'r', threadId: 't', agentId: 'a', revisionId: 'v' },
    input: msg,
    history: async () => [msg],
    signal: controller.signal,
    setStatus: record('setStatus'),
    trigger: { kind: 'created' },
    resumed: false,
    requestInteraction: async (...args: unknown[]) => {
      await record('requestInteraction')(...args);
      return 'interaction-id';
    },
    delegate: async (...args: unknown[]) => {
      await record('delegate' as Call['method'])(...args);
      return { linkId: 'l', childRunId: 'c', childContextId: 'x' };
    },
    childResult: async () => null,
    emitMessage: record('emitMessage'),
    emitArtifact: record('emitArtifact'),
    saveState: record('saveState'),
    savedState: async () => null,
    extensions: async () => [],
    recorded: async () => ({ status: 'working', blockedReason: null, messageIds: [msg.messageId], artifacts: [], operationIds: [], lastSequence: 3 }),
    sleep: record('sleep'),
    waitUntilCanceled: record('waitUntilCanceled'),
  };
  return { ctx, calls, opIds, controller, artifacts: () => calls.filter((c) => c.method === 'emitArtifact').map((c) => c.args[0] as ArtifactChunkInput) };
}

const issues = (raw: unknown) => {
  const r = ScriptedRuntimeConfigSchema.safeParse(raw);
  expect(r.success).toBe(false);
  return r.error!.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
};

/** Issues of the runtime's own validation (schema + RE2 patterns). */
const runtimeIssues = (raw: unknown) => {
  try {
    runtime.parseConfig(raw);
  } catch (e) {
    return (e as { issues: Array<{ path: PropertyKey[]; message: string }> }).issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  }
  throw new Error('expected the config to be refused');
};

describe('ScriptedRuntimeConfigSchema', () => {
  it('defaults rules to [] and defaultRule to echo', () => {
    expect(runtime.parseConfig({ kind: 'scripted' })).toEqual({ kind: 'scripted', rules: [], defaultRule: 'echo' });
  });

  it('rejects a regex that does not compile, RE2-unsupported syntax, and flags it does not know', () => {
    expect(runtimeIssues({ kind: 'scripted', rules: [rule({ text: '(unclosed' })] })).toEqual([
      { path: 'rules.0.match.text', message: expect.stringContaining('not a supported (RE2) regular expression') },
    ]);
    expect(runtimeIssues({ kind: 'scripted', rules: [rule({ text: '(a)\\1' })] })[0]!.message).toContain('backreferences and lookaround are not available');
    expect(runtimeIssues({ kind: 'scripted', rules: [rule({ text: 'a(?=b)' })] })[0]!.path).toBe('rules.0.match.text');
    expect(runtimeIssues({ kind: 'scripted', rules: [rule({ text: 'a', flags: 'q' })] })[0]!.path).toBe('rules.0.match.text');
  });

  it('matches in linear time: a catastrophic-backtracking pattern answers in milliseconds', () => {
    const config = runtime.parseConfig({ kind: 'scripted', rules: [rule({ text: '^(a+)+$' }, [{ type: 'reply', text: 'matched' }])] });
    for (const text of ['a'.repeat(30) + 'b', 'a'.repeat(4_000) + '!']) {
      const t0 = performance.now();
      expect(runtime.directReply(config, { messageId: 'm', role: 'user', parts: [{ text }] })).toBeNull();
      expect(performance.now() - t0).toBeLessThan(200);
    }
    expect(runtime.directReply(config, { messageId: 'm', role: 'user', parts: [{ text: 'aaa' }] })).toMatchObject({ parts: [{ text: 'matched' }] });
  });

  it('rejects a match with neither text nor messageIdPrefix', () => {
    expect(issues({ kind: 'scripted', rules: [rule({})] })[0]!.message).toMatch(/at least one of text, messageIdPrefix/);
  });

  it('rejects a reply step mixed with other steps, and accepts it alone', () => {
    const mixed = rule({ text: 'hi' }, [{ type: 'status', status: 'working' }, { type: 'reply', text: 'hello' }]);
    expect(issues({ kind: 'scripted', rules: [mixed] })).toEqual([
      { path: 'rules.0.steps', message: expect.stringContaining('a rule with a reply step must have only that step') },
    ]);
    expect(() => config([rule({ text: 'hi' }, [{ type: 'reply', text: 'hello' }])])).not.toThrow();
  });

  it('rejects chunked data and url content but allows chunked text and bytes', () => {
    const art = (content: object, chunks?: number) => rule({ text: 'a' }, [{ type: 'artifact', content, chunks }]);
    for (const content of [{ data: { a: 1 } }, { url: 'https://example.com/f' }]) {
      expect(issues({ kind: 'scripted', rules: [art(content, 2)] })).toEqual([
        { path: 'rules.0.steps.0.chunks', message: 'only text and bytesBase64 content can be chunked' },
      ]);
      expect(() => config([art(content, 1)])).not.toThrow();
    }
    expect(() => config([art({ text: 'abc' }, 3), art({ bytesBase64: 'AAEC' }, 3)])).not.toThrow();
    expect(issues({ kind: 'scripted', rules: [art({ text: 'abc' }, 0)] })[0]!.path).toBe('rules.0.steps.0.chunks');
  });

  it('rejects artifact content that is none or several of the shapes', () => {
    const art = (content: object) => ({ kind: 'scripted', rules: [rule({ text: 'a' }, [{ type: 'artifact', content }])] });
    expect(issues(art({}))[0]!.path).toBe('rules.0.steps.0.content');
    expect(issues(art({ text: 'a', data: 1 }))[0]!.path).toBe('rules.0.steps.0.content');
    expect(issues(art({ bytesBase64: 'not base64!' }))[0]!.path).toBe('rules.0.steps.0.content.bytesBase64');
  });

  it('rejects steps after one that ends the execution', () => {
    const steps = [{ type: 'status', status: 'input-required' }, { type: 'message', text: 'never' }];
    expect(issues({ kind: 'scripted', rules: [rule({ text: 'a' }, steps)] })).toEqual([
      { path: 'rules.0.steps.1', message: 'unreachable step: step 0 (status) ends the execution' },
    ]);
  });

  it('rejects messages with both or neither of text and parts, and out-of-range waits', () => {
    const one = (step: object) => ({ kind: 'scripted', rules: [rule({ text: 'a' }, [step])] });
    expect(issues(one({ type: 'message' }))[0]!.message).toBe('give exactly one of text, parts');
    expect(issues(one({ type: 'message', text: 'a', parts: [{ text: 'b' }] }))[0]!.message).toBe('give exactly one of text, parts');
    expect(issues(one({ type: 'wait', ms: 600_001 }))[0]!.path).toBe('rules.0.steps.0.ms');
    expect(issues(one({ type: 'wait', ms: 1.5 }))[0]!.path).toBe('rules.0.steps.0.ms');
    expect(issues(one({ type: 'nap' }))[0]!.path).toBe('rules.0.steps.0.type');
  });

  it('RuntimeConfigSchema discriminates on kind', () => {
    expect(RuntimeConfigSchema.parse({ kind: 'scripted' }).kind).toBe('scripted');
    expect(RuntimeConfigSchema.safeParse({ kind: 'llm' }).success).toBe(false);
  });
});

describe('selectRule', () => {
  it('matches the regex against the input text, with flags', () => {
    const c = config([rule({ text: '^hello', flags: 'i' }, undefined, 'greet')]);
    expect(selectRule(c, input('HELLO there')).name).toBe('greet');
    expect(selectRule(c, input('say hello')).name).toBe('echo');
  });

  it('matches messageIdPrefix with startsWith, and needs every matcher to match', () => {
    const c = config([rule({ messageIdPrefix: 'test-' }, undefined, 'prefix'), rule({ text: 'x', messageIdPrefix: 'zz' }, undefined, 'both')]);
    expect(selectRule(c, input('anything', 'test-42')).name).toBe('prefix');
    expect(selectRule(c, input('anything', 'my-test-42')).name).toBe('echo');
    expect(selectRule(c, input('x', 'other')).name).toBe('echo');
  });

  it('picks the longest match, summing regex and prefix lengths', () => {
    const c = config([
      rule({ text: 'hi' }, undefined, 'short'),
      rule({ text: 'hi there' }, undefined, 'long'),
      rule({ text: 'hi', messageIdPrefix: 'abcdefg' }, undefined, 'sum'),
    ]);
    expect(selectRule(c, input('hi there', 'x')).name).toBe('long'); // 8 > 2
    expect(selectRule(c, input('hi there', 'abcdefg-1')).name).toBe('sum'); // 2 + 7 > 8
  });

  it('breaks ties by rule order, and counts an empty match', () => {
    const c = config([rule({ text: 'b.' }, undefined, 'first'), rule({ text: '.c' }, undefined, 'second')]);
    expect(selectRule(c, input('abc')).name).toBe('first');
    expect(selectRule(config([rule({ text: '^' }, undefined, 'any')]), input('abc')).name).toBe('any');
  });

  it('falls back to echo: the text, or the parts as they are when there is no text', () => {
    expect(selectRule(config([]), input('hi')).steps).toEqual([
      { type: 'status', status: 'working' },
      { type: 'message', text: '{{input}}' },
      { type: 'status', status: 'completed' },
    ]);
    const parts: Part[] = [{ data: { a: 1 } }, { raw: 'AAE=', mediaType: 'application/octet-stream' }];
    expect(selectRule(config([]), input(parts)).steps[1]).toEqual({ type: 'message', parts });
  });
});

describe('ScriptedRuntime.execute', () => {
  it('echoes by default: working, the input text, completed', async () => {
    const { ctx, calls } = fakeCtx(input('ping'));
    await runtime.execute(config([]), ctx);
    expect(calls).toEqual([
      { method: 'setStatus', args: ['working', undefined] },
      { method: 'emitMessage', args: [{ parts: [{ text: 'ping' }] }] },
      { method: 'setStatus', args: ['completed', undefined] },
    ]);
  });

  it('fills {{input}} literally (no $-patterns) in messages and status messages', async () => {
    const c = config([rule({ text: '.' }, [{ type: 'status', status: 'working', message: 'on {{input}}' }, { type: 'message', text: '[{{input}}|{{input}}]' }])]);
    const { ctx, calls } = fakeCtx(input("$& $' x"));
    await runtime.execute(c, ctx);
    expect(calls.map((c) => c.args)).toEqual([
      ['working', { parts: [{ text: "on $& $' x" }] }],
      [{ parts: [{ text: "[$& $' x|$& $' x]" }] }],
      ['completed'],
    ]);
  });

  it('chunks text by code points: same id, append after the first, lastChunk on the last', async () => {
    const text = 'héllo wörld 😀😀!';
    const c = config([rule({ text: 'go' }, [{ type: 'artifact', name: 'out', content: { text }, chunks: 4 }])]);
    const { ctx, artifacts } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    const chunks = artifacts();
    expect(chunks).toHaveLength(4);
    expect(new Set(chunks.map((a) => a.artifactId)).size).toBe(1);
    expect(chunks[0]!.artifactId).toMatch(/^[0-9a-f-]{36}$/);
    expect(chunks.map((a) => [a.append, a.lastChunk, a.name])).toEqual([
      [false, false, 'out'],
      [true, false, 'out'],
      [true, false, 'out'],
      [true, true, 'out'],
    ]);
    expect(chunks.map((a) => a.parts[0]!.text).join('')).toBe(text);
    expect(chunks.every((a) => !a.parts[0]!.text!.includes('\uFFFD') && a.parts[0]!.text!.length > 0)).toBe(true);
  });

  it('fills {{input}} in text artifact content before chunking', async () => {
    const c = config([rule({ text: '^[A-Z]' }, [{ type: 'artifact', content: { text: 'Forecast for {{input}}.' }, chunks: 2 }])]);
    const { ctx, artifacts } = fakeCtx(input('Paris'));
    await runtime.execute(c, ctx);
    expect(artifacts().map((a) => a.parts[0]!.text).join('')).toBe('Forecast for Paris.');
  });

  it('chunks decoded bytes, keeping mediaType and filename on each part', async () => {
    const bytes = Buffer.from(Array.from({ length: 10 }, (_, i) => i * 25));
    const content = { bytesBase64: bytes.toString('base64'), mediaType: 'application/octet-stream', filename: 'b.bin' };
    const c = config([rule({ text: 'go' }, [{ type: 'artifact', artifactId: 'art-1', content, chunks: 3 }])]);
    const { ctx, artifacts } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    const chunks = artifacts();
    expect(chunks.map((a) => [a.artifactId, a.append, a.lastChunk])).toEqual([
      ['art-1', false, false],
      ['art-1', true, false],
      ['art-1', true, true],
    ]);
    expect(Buffer.concat(chunks.map((a) => Buffer.from(a.parts[0]!.raw!, 'base64')))).toEqual(bytes);
    expect(chunks.every((a) => a.parts[0]!.mediaType === content.mediaType && a.parts[0]!.filename === 'b.bin')).toBe(true);
  });

  it('emits no empty chunks when asked for more chunks than there is content', async () => {
    const c = config([rule({ text: 'go' }, [{ type: 'artifact', content: { text: 'ab' }, chunks: 5 }])]);
    const { ctx, artifacts } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    expect(artifacts().map((a) => [a.parts[0]!.text, a.append, a.lastChunk])).toEqual([
      ['a', false, false],
      ['b', true, true],
    ]);
  });

  it('emits an unchunked artifact as one complete chunk', async () => {
    const c = config([rule({ text: 'go' }, [{ type: 'artifact', artifactId: 'd', content: { data: { ok: true } } }])]);
    const { ctx, calls } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    expect(calls).toEqual([
      { method: 'emitArtifact', args: [{ artifactId: 'd', parts: [{ data: { ok: true } }], append: false, lastChunk: true }] },
      { method: 'setStatus', args: ['completed'] },
    ]);
  });

  it('waits with ctx.sleep(ms) and completes when the steps end without a terminal status', async () => {
    const c = config([rule({ text: 'go' }, [{ type: 'status', status: 'working' }, { type: 'wait', ms: 250 }, { type: 'message', text: 'done' }])]);
    const { ctx, calls } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    expect(calls.map((c) => [c.method, c.args[0]])).toEqual([
      ['setStatus', 'working'],
      ['sleep', 250],
      ['emitMessage', { parts: [{ text: 'done' }] }],
      ['setStatus', 'completed'],
    ]);
  });

  it('does not add completed after a terminal status', async () => {
    const c = config([rule({ text: 'go' }, [{ type: 'status', status: 'failed', message: 'nope' }])]);
    const { ctx, calls } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    expect(calls).toEqual([{ method: 'setStatus', args: ['failed', { parts: [{ text: 'nope' }] }] }]);
  });

  it('stops after input-required / auth-required; the follow-up selects its own rule', async () => {
    const c = config([
      rule({ text: '^book' }, [{ type: 'status', status: 'working' }, { type: 'status', status: 'input-required', message: 'Which day?' }]),
      rule({ text: '^(mon|tue)day$' }, [{ type: 'message', text: 'Booked {{input}}' }, { type: 'status', status: 'completed' }]),
      rule({ text: '^secret' }, [{ type: 'status', status: 'auth-required' }]),
    ]);
    const first = fakeCtx(input('book a room'));
    await runtime.execute(c, first.ctx);
    expect(first.calls).toEqual([
      { method: 'setStatus', args: ['working', undefined] },
      { method: 'requestInteraction', args: ['input', { parts: [{ text: 'Which day?' }] }] },
    ]);
    const followUp = fakeCtx(input('monday', 'msg-2'));
    await runtime.execute(c, followUp.ctx);
    expect(followUp.calls.map((c) => c.args)).toEqual([[{ parts: [{ text: 'Booked monday' }] }], ['completed', undefined]]);
    const auth = fakeCtx(input('secret'));
    await runtime.execute(c, auth.ctx);
    expect(auth.calls).toEqual([{ method: 'requestInteraction', args: ['auth', undefined] }]);
  });

  it('holds until canceled, then returns without completing', async () => {
    const c = config([rule({ text: 'go' }, [{ type: 'status', status: 'working' }, { type: 'holdUntilCanceled' }])]);
    const { ctx, calls } = fakeCtx(input('go'));
    await runtime.execute(c, ctx);
    expect(calls.map((c) => c.method)).toEqual(['setStatus', 'waitUntilCanceled']);
  });

  it('does nothing when the signal is already aborted', async () => {
    const { ctx, calls, controller } = fakeCtx(input('go'));
    controller.abort();
    await runtime.execute(config([]), ctx);
    expect(calls).toEqual([]);
  });

  it('stops at the next step (and between chunks) once aborted, without completing', async () => {
    const waiting = config([rule({ text: 'go' }, [{ type: 'wait', ms: 60_000 }, { type: 'message', text: 'late' }])]);
    const a = fakeCtx(input('go'), { abortOn: 'sleep' });
    await runtime.execute(waiting, a.ctx);
    expect(a.calls.map((c) => c.method)).toEqual(['sleep']);

    const chunked = config([rule({ text: 'go' }, [{ type: 'artifact', content: { text: 'abcdef' }, chunks: 3 }])]);
    const b = fakeCtx(input('go'), { abortOn: 'emitArtifact' });
    await runtime.execute(chunked, b.ctx);
    expect(b.calls.map((c) => c.method)).toEqual(['emitArtifact']);
  });

  it('stops quietly when a ctx call rejects with run.terminal', async () => {
    const terminal = Object.assign(new Error('run is terminal'), { code: 'run.terminal' });
    const { ctx, calls } = fakeCtx(input('go'), { reject: { at: 1, error: terminal } });
    await expect(runtime.execute(config([]), ctx)).resolves.toBeUndefined();
    expect(calls.map((c) => c.method)).toEqual(['setStatus', 'emitMessage']);
  });

  it('rethrows any other ctx error', async () => {
    const boom = Object.assign(new Error('db down'), { code: 'internal' });
    const { ctx, calls } = fakeCtx(input('go'), { reject: { at: 0, error: boom } });
    await expect(runtime.execute(config([]), ctx)).rejects.toBe(boom);
    expect(calls).toHaveLength(1);
  });
});

describe('ScriptedRuntime.directReply', () => {
  const c = config([
    rule({ text: '^ping' }, [{ type: 'reply', text: 'pong: {{input}}' }]),
    rule({ messageIdPrefix: 'card-' }, [{ type: 'reply', parts: [{ data: { card: true } }] }]),
    rule({ text: '^task' }, [{ type: 'message', text: 'working on it' }]),
  ]);

  it('returns the message of a reply rule, with {{input}} filled', () => {
    expect(runtime.directReply(c, input('ping!'))).toEqual({ parts: [{ text: 'pong: ping!' }] });
    expect(runtime.directReply(c, input('x', 'card-1'))).toEqual({ parts: [{ data: { card: true } }] });
  });

  it('returns null when the selected rule needs a run (including the default echo)', () => {
    expect(runtime.directReply(c, input('task please'))).toBeNull();
    expect(runtime.directReply(c, input('unmatched'))).toBeNull();
  });

  it('emits the reply and completes when a reply rule is reached by execute (a continuation)', async () => {
    const { ctx, calls } = fakeCtx(input('ping'));
    await runtime.execute(c, ctx);
    expect(calls).toEqual([
      { method: 'emitMessage', args: [{ parts: [{ text: 'pong: ping' }] }] },
      { method: 'setStatus', args: ['completed'] },
    ]);
  });
});

describe('interaction and delegate steps', () => {
  const confirm = {
    type: 'interaction',
    kind: 'confirmation',
    text: 'Go ahead with {{input}}?',
    branches: {
      approve: [{ type: 'interaction', kind: 'input', text: 'Why?', branches: { answered: [{ type: 'message', text: 'noted: {{input}}' }] } }],
      rejected: [{ type: 'status', status: 'rejected', message: 'stopped' }],
    },
  };
  const c = config([
    rule({ text: '^go' }, [confirm, { type: 'message', text: 'after the confirmation' }]),
    rule({ text: '^ask' }, [{ type: 'delegate', agent: 'helper', text: 'please {{input}}', onFailure: 'continue' }, { type: 'message', text: 'got: {{result}}' }]),
  ]);

  it('validates: no branches on a non-blocking interaction, no reply in a branch, unreachable steps inside branches', () => {
    const bad = (step: object) => issues({ kind: 'scripted', rules: [rule({ text: 'a' }, [step])] });
    expect(bad({ type: 'interaction', kind: 'input', blocking: false, branches: { answered: [{ type: 'message', text: 'x' }] } })[0]!.message).toMatch(/non-blocking interaction cannot branch/);
    expect(bad({ type: 'interaction', kind: 'input', branches: { answered: [{ type: 'reply', text: 'x' }] } })[0]!.message).toMatch(/reply step cannot be in a branch/);
    expect(bad({ type: 'interaction', kind: 'input', branches: { answered: [{ type: 'status', status: 'completed' }, { type: 'message', text: 'x' }] } })[0]!.path).toBe(
      'rules.0.steps.0.branches.answered.1',
    );
    expect(bad({ type: 'interaction', kind: 'input', expiresInMs: 0 })[0]!.path).toBe('rules.0.steps.0.expiresInMs');
    expect(bad({ type: 'delegate', agent: '' })[0]!.path).toBe('rules.0.steps.0.agent');
  });

  it('an interaction step opens the request with its path as state and ends the execution', async () => {
    const { ctx, calls } = fakeCtx(input('go live'));
    await runtime.execute(c, ctx);
    expect(calls).toEqual([
      { method: 'requestInteraction', args: ['confirmation', { parts: [{ text: 'Go ahead with go live?' }] }, { state: { scripted: { path: [0, 0] } } }] },
    ]);
  });

  it('the answer resumes there: the matching branch (nested too), then the steps after the interaction', async () => {
    const answered = (path: Array<string | number>, extra: object) => {
      const f = fakeCtx(input('because'));
      const ctx = { ...f.ctx, trigger: { kind: 'interaction_responded' as const, interaction: { id: 'i', kind: 'confirmation' as const, blocking: true, status: 'resolved', state: { scripted: { path } }, ...extra } } };
      return { ctx, calls: f.calls };
    };
    const approve = answered([0, 0], { decision: 'approved', optionId: 'approve' });
    await runtime.execute(c, approve.ctx);
    expect(approve.calls.map((x) => x.method)).toEqual(['requestInteraction']);
    expect(approve.calls[0]!.args[2]).toEqual({ state: { scripted: { path: [0, 0, 'approve', 0] } } });

    const why = answered([0, 0, 'approve', 0], { decision: 'answered' });
    await runtime.execute(c, why.ctx);
    expect(why.calls).toEqual([
      { method: 'emitMessage', args: [{ parts: [{ text: 'noted: because' }] }] },
      { method: 'emitMessage', args: [{ parts: [{ text: 'after the confirmation' }] }] },
      { method: 'setStatus', args: ['completed'] },
    ]);

    const reject = answered([0, 0], { decision: 'rejected', optionId: 'reject' });
    await runtime.execute(c, reject.ctx);
    expect(reject.calls).toEqual([{ method: 'setStatus', args: ['rejected', { parts: [{ text: 'stopped' }] }] }]);
  });

  it('a delegate step delegates and ends; the settled child resumes it with the result (or goes on after a failure when told to)', async () => {
    const first = fakeCtx(input('ask the moon'));
    await runtime.execute(c, first.ctx);
    expect(first.calls).toEqual([
      { method: 'delegate', args: [{ agent: 'helper', kind: 'delegation', message: { parts: [{ text: 'please ask the moon' }] }, state: { scripted: { path: [1, 0] } } }] },
    ]);
    const settled = (status: 'completed' | 'failed') => {
      const f = fakeCtx(input('ask the moon'));
      const ctx = {
        ...f.ctx,
        trigger: { kind: 'link_settled' as const, link: { linkId: 'l', childRunId: 'c', kind: 'delegation' as const, status, state: { scripted: { path: [1, 0] } } } },
        childResult: async () => ({
          runId: 'c',
          status,
          blockedReason: null,
          statusMessage: { messageId: 's', role: 'agent' as const, parts: [{ text: 'cheese' }] },
          messages: [],
          artifacts: [{ artifactId: 'a1', name: 'n', parts: [{ text: 'notes' }] }],
        }),
      };
      return { ctx, calls: f.calls };
    };
    const ok = settled('completed');
    await runtime.execute(c, ok.ctx);
    expect(ok.calls).toEqual([
      { method: 'emitArtifact', args: [{ artifactId: 'a1', name: 'n', parts: [{ text: 'notes' }], metadata: { fromTaskId: 'c' }, append: false, lastChunk: true }] },
      { method: 'emitMessage', args: [{ parts: [{ text: 'got: cheese' }] }] },
      { method: 'setStatus', args: ['completed'] },
    ]);
    const failed = settled('failed');
    await runtime.execute(c, failed.ctx);
    expect(failed.calls).toEqual([
      { method: 'emitMessage', args: [{ parts: [{ text: 'got: ' }] }] },
      { method: 'setStatus', args: ['completed'] },
    ]);
  });
});

describe('resuming a lost execution', () => {
  const c = config([
    rule({ text: '^go' }, [
      { type: 'status', status: 'working' },
      { type: 'wait', ms: 50 },
      { type: 'artifact', content: { text: 'abcdef' }, chunks: 3 },
      { type: 'wait', ms: 50 },
      { type: 'message', text: 'done' },
    ]),
  ]);

  it('names every operation by its step (stable across executions of the same trigger), artifacts included', async () => {
    const a = fakeCtx(input('go'));
    await runtime.execute(c, a.ctx);
    expect(a.opIds).toEqual(['m:msg-1/0.0', 'm:msg-1/0.2#0', 'm:msg-1/0.2#1', 'm:msg-1/0.2#2', 'm:msg-1/0.4', 'm:msg-1/end']);
    const b = fakeCtx(input('go'));
    await runtime.execute(c, b.ctx);
    expect(b.opIds).toEqual(a.opIds);
    // the artifact's id is derived from the run and the step (a replay continues the same artifact)
    expect(new Set([...a.artifacts(), ...b.artifacts()].map((x) => x.artifactId)).size).toBe(1);
    // another trigger (another user message) names its steps apart
    const other = fakeCtx(input('go', 'msg-2'));
    await runtime.execute(c, other.ctx);
    expect(other.opIds[0]).toBe('m:msg-2/0.0');
  });

  it("replays the lost trigger from the last step the log holds: earlier steps (and their waits) are skipped", async () => {
    const r = fakeCtx(input('go'));
    Object.assign(r.ctx, {
      trigger: { kind: 'resumed', attempt: 1, lost: { kind: 'created' } },
      resumed: true,
      recorded: async () => ({ status: 'working', blockedReason: null, messageIds: ['msg-1'], artifacts: [], operationIds: ['m:msg-1/0.0', 'm:msg-1/0.2#0'], lastSequence: 5 }),
    });
    await runtime.execute(c, r.ctx);
    // from the artifact step on (the context drops chunk 0, recorded already): no wait before it
    expect(r.calls.map((x) => x.method)).toEqual(['emitArtifact', 'emitArtifact', 'emitArtifact', 'sleep', 'emitMessage', 'setStatus']);
    expect(r.opIds).toEqual(['m:msg-1/0.2#0', 'm:msg-1/0.2#1', 'm:msg-1/0.2#2', 'm:msg-1/0.4', 'm:msg-1/end']);
  });

  it('replays everything when the log holds nothing of the lost execution', async () => {
    const r = fakeCtx(input('go'));
    Object.assign(r.ctx, { trigger: { kind: 'resumed', attempt: 2, lost: { kind: 'created' } }, resumed: true });
    await runtime.execute(c, r.ctx);
    expect(r.opIds[0]).toBe('m:msg-1/0.0');
    expect(r.calls.filter((x) => x.method === 'sleep')).toHaveLength(2);
  });
});
