import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from './support/stack.js';
import { sendMessageRpc } from './support/a2a-rpc.js';

/**
 * The `aaas` commands a person lives in, compiled, each run as its own process against a running
 * service: `login` / `context` (saved URL + key, mode 0600), `runs get`, `interactions list` (and its
 * admin route), `runs tail` naming the interaction to answer, `send` / `chat` over A2A with the
 * official SDK client (streaming; answering input-required and a confirmation inline), `--version`,
 * `completion`, and the open-binding warning (admin API and `aaas publish`).
 */
const execFileP = promisify(execFile);
const CLI = 'dist/apps/cli/src/main.js';
let stack: Stack;
let dir: string;
/** XDG_CONFIG_HOME of every CLI process here: never the real ~/.config. */
let xdg: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI with exactly these arguments (no --url / --key added), `input` on stdin, `env` added. */
async function raw(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<Result> {
  const env: Record<string, string | undefined> = { ...process.env, XDG_CONFIG_HOME: xdg, AAAS_URL: undefined, AAAS_API_KEY: undefined, AAAS_CONTEXT: undefined, ...opts.env };
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: env as NodeJS.ProcessEnv });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  child.stdin!.end(opts.input ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = await once(child, 'exit');
  clearTimeout(timer);
  return { code: code as number, ...out };
}

/** The CLI with the stack's URL and admin key as flags. */
const aaas = (...args: string[]) => raw(['--url', stack.baseUrl, '--key', stack.adminKey, ...args]);

async function admin(method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${stack.baseUrl}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.adminKey}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function publish(manifest: Record<string, unknown>): Promise<Result> {
  const file = path.join(dir, `${String(manifest.slug)}.json`);
  await writeFile(file, JSON.stringify(manifest));
  return aaas('publish', file);
}

/** A task asking for input over JSON-RPC (blocking SendMessage: returns at input-required). */
async function ask(agent: string, text: string): Promise<{ id: string; contextId: string; interactionId: string }> {
  const { body } = await sendMessageRpc(`${stack.baseUrl}/a2a/${stack.orgSlug}/${agent}`, text);
  const task = body.result?.task;
  expect(task?.status?.state, JSON.stringify(body)).toBe('TASK_STATE_INPUT_REQUIRED');
  return { id: task.id, contextId: task.contextId, interactionId: task.status.message.metadata.interaction.id };
}

const SKILLS = { a2a: { skillsProjection: [{ id: 'talk', name: 'Talk', description: 'talks', tags: ['cli'] }] } };
/** `ask…` asks which colour; `book…` asks for a confirmation; `drip` streams three messages; anything else: hello. */
const TALKER = {
  kind: 'scripted',
  rules: [
    { match: { text: '^ask' }, steps: [{ type: 'interaction', kind: 'input', text: 'Which colour?' }, { type: 'message', text: 'Got {{input}}' }] },
    {
      match: { text: '^book' },
      steps: [{ type: 'interaction', kind: 'confirmation', text: 'Book it?', branches: { approve: [{ type: 'message', text: 'Booked' }] } }],
    },
    { match: { text: '^drip' }, steps: [{ type: 'message', text: 'drop 1' }, { type: 'wait', ms: 1_500 }, { type: 'message', text: 'drop 2' }, { type: 'wait', ms: 1_500 }, { type: 'message', text: 'drop 3' }] },
    { match: { text: '.' }, steps: [{ type: 'message', text: 'hello {{input}}' }] },
  ],
};

beforeAll(async () => {
  stack = await startStack({ env: { A2A_BLOCKING_TIMEOUT_MS: '10000' } });
  dir = await mkdtemp(path.join(tmpdir(), 'aaas-cli-more-'));
  xdg = await mkdtemp(path.join(tmpdir(), 'aaas-xdg-'));
  // open (security none) and key-secured agents, the streaming one secured too
  expect((await publish({ slug: 'talker', name: 'Talker', description: 'talks', protocolProfiles: SKILLS, runtime: TALKER })).code).toBe(0);
  const secured = await publish({
    slug: 'streamer',
    name: 'Streamer',
    description: 'streams',
    protocolProfiles: { a2a: { ...SKILLS.a2a, capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false } } },
    runtime: TALKER,
    binding: { transports: ['JSONRPC'], security: { scheme: 'apiKey' } },
  });
  expect(secured.code, secured.stderr).toBe(0);
});

afterAll(async () => {
  await stack?.close();
});

describe('aaas login and contexts', () => {
  it('saves URL + key (file 0600, directory 0700) without printing the key; later commands use the context', async () => {
    const login = await raw(['--url', stack.baseUrl, 'login', '--key-stdin'], { input: `${stack.adminKey}\n` });
    expect(login.code, login.stderr).toBe(0);
    const file = path.join(xdg, 'aaas', 'config.json');
    expect(login.stdout.trim()).toBe(`logged in to ${stack.baseUrl} as organization ${stack.orgSlug}; context "default" saved (current) in ${file}`);
    expect(login.stdout + login.stderr).not.toContain(stack.adminKey);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ current: 'default', contexts: { default: { url: stack.baseUrl, key: stack.adminKey, orgSlug: stack.orgSlug } } });

    // no --url, no --key: the saved context
    const agents = await raw(['agents', 'list']);
    expect(agents.code, agents.stderr).toBe(0);
    expect(agents.stdout).toMatch(/^talker\s+Talker/m);

    // flags win over the context: a wrong --key fails
    const wrong = await raw(['--key', 'aaas_nope_nope', 'agents', 'list']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/HTTP 401/);
    // … and env too
    const envKey = await raw(['agents', 'list'], { env: { AAAS_API_KEY: 'aaas_nope_nope' } });
    expect(envKey.stderr).toMatch(/HTTP 401/);
    // the context's key never goes to another URL
    const elsewhere = await raw(['--url', 'http://127.0.0.1:9', 'agents', 'list']);
    expect(elsewhere).toMatchObject({ code: 2, stderr: 'aaas: an API key is needed: --key or AAAS_API_KEY\n' });
  });

  it('named contexts: login --context, context list (no keys), context use, --context; refuses a bad key and unknown contexts', async () => {
    const prod = await raw(['--url', stack.baseUrl, '--context', 'prod', 'login', '--key-stdin'], { input: stack.adminKey });
    expect(prod.code, prod.stderr).toBe(0);
    const listed = await raw(['context', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^CURRENT\s+NAME\s+URL\s+ORGANIZATION$/);
    expect(lines.find((l) => /\bprod\b/.test(l))).toMatch(new RegExp(`^\\*\\s+prod\\s+${stack.baseUrl.replace(/[.]/g, '\\.')}\\s+${stack.orgSlug}$`));
    expect(lines.find((l) => /\bdefault\b/.test(l))).toMatch(/^—\s+default\s/);
    expect(listed.stdout).not.toContain(stack.adminKey);
    expect(JSON.stringify(JSON.parse((await raw(['--json', 'context', 'list'])).stdout))).not.toContain(stack.adminKey);

    expect(await raw(['context', 'use', 'default'])).toMatchObject({ code: 0, stdout: `current context: default (${stack.baseUrl})\n` });
    expect(JSON.parse((await raw(['--json', 'context', 'list'])).stdout).current).toBe('default');
    expect((await raw(['--context', 'prod', 'agents', 'list'])).code).toBe(0);

    const unknown = await raw(['--context', 'staging', 'agents', 'list']);
    expect(unknown).toMatchObject({ code: 2, stderr: 'aaas: no context "staging" (aaas context list)\n' });
    expect((await raw(['context', 'use', 'staging'])).code).toBe(2);
    expect((await raw(['--context', '../evil', 'login', '--key-stdin'], { input: 'x' })).stderr).toMatch(/^aaas: a context name is/);

    // a key the service refuses is not saved
    const before = await readFile(path.join(xdg, 'aaas', 'config.json'), 'utf8');
    const bad = await raw(['--url', stack.baseUrl, '--context', 'bad', 'login', '--key-stdin'], { input: 'aaas_nope_nope' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^aaas: GET \/v1\/organization: HTTP 401/);
    expect(await readFile(path.join(xdg, 'aaas', 'config.json'), 'utf8')).toBe(before);
    expect((await raw(['--url', stack.baseUrl, 'login', '--key-stdin'], { input: '' })).stderr).toMatch(/^aaas: no API key/);
  });
});

describe('aaas runs get, interactions list, runs tail', () => {
  it('runs get: state, agent, ages, the blocked reason, the open interaction with its answer command, the last events (and --json)', async () => {
    const t = await ask('talker', 'ask me');
    const got = await aaas('runs', 'get', t.id);
    expect(got.code, got.stderr).toBe(0);
    const text = got.stdout;
    expect(text).toMatch(new RegExp(`^run ${t.id}\\n  agent:    talker\\n  status:   working \\(input required\\) \\(since (now|\\d+ seconds? ago)\\)`));
    expect(text).toMatch(/^ {2}created: {2}(now|\d+ seconds? ago)$/m);
    expect(text).toMatch(/^ {2}blocked: {2}input required — waiting for an answer$/m);
    expect(text).toContain(`    ${t.interactionId}  input  "Which colour?"  asked `);
    expect(text).toContain(`      answer: aaas interactions answer ${t.id} ${t.interactionId} --text '<answer>'`);
    expect(text).toMatch(/^ {4}#1 run\.created submitted$/m);
    expect(text).not.toMatch(/\d{4}-\d{2}-\d{2}[T ]\d{2}:/);

    const asJson = JSON.parse((await aaas('--json', 'runs', 'get', t.id)).stdout);
    expect(asJson).toMatchObject({ run: { id: t.id, status: 'working', blockedReason: 'input_required' }, agent: { slug: 'talker' }, openInteractions: [t.interactionId] });
    expect(asJson.lastEvents.at(-1).sequence).toBe(asJson.run.lastSequence);

    const missing = await aaas('runs', 'get', randomUUID());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^aaas: GET \/v1\/runs\/[0-9a-f-]+: HTTP 404 run\.not_found/);
    expect((await aaas('runs', 'get', t.id, '--events', '0')).code).toBe(2);
  });

  it('GET /v1/interactions: across runs, newest first, filtered by run and status, scoped by organization; hostile queries are 422', async () => {
    const a = await ask('talker', 'ask one');
    const b = await ask('talker', 'ask two');
    const open = await admin('GET', '/v1/interactions?status=open');
    expect(open.status).toBe(200);
    const ids = open.body.interactions.map((i: { id: string }) => i.id);
    expect(ids.indexOf(b.interactionId)).toBeLessThan(ids.indexOf(a.interactionId));
    expect(ids.indexOf(a.interactionId)).toBeGreaterThanOrEqual(0);
    expect(open.body.interactions.find((i: { id: string }) => i.id === a.interactionId)).toMatchObject({ runId: a.id, kind: 'input', status: 'open', blocking: true, closedAt: null });
    const ofRun = await admin('GET', `/v1/interactions?runId=${a.id}`);
    expect(ofRun.body.interactions.map((i: { id: string }) => i.id)).toEqual([a.interactionId]);
    expect((await admin('GET', `/v1/interactions?runId=${randomUUID()}`)).body).toEqual({ interactions: [] });
    expect((await admin('GET', '/v1/interactions?limit=1')).body.interactions).toHaveLength(1);
    for (const q of ['status=bogus', 'runId=not-a-uuid', 'limit=0', 'limit=201', 'runId=1%27%20OR%201=1', 'extra=1']) {
      const r = await admin('GET', `/v1/interactions?${q}`);
      expect(r.status, q).toBe(422);
      expect(r.body.error.code, q).toBe('request.invalid');
    }
    expect((await fetch(`${stack.baseUrl}/v1/interactions`)).status).toBe(401);
    // another organization sees none of them (the bootstrap key has the platform scope)
    const org = await fetch(`${stack.baseUrl}/v1/organizations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ slug: `other-${randomUUID().slice(0, 8)}`, name: 'Other' }),
    });
    expect(org.status).toBe(201);
    const otherKey = ((await org.json()) as { adminKey: { key: string } }).adminKey.key;
    const theirs = await fetch(`${stack.baseUrl}/v1/interactions?runId=${a.id}`, { headers: { authorization: `Bearer ${otherKey}` } });
    expect(await theirs.json()).toEqual({ interactions: [] });
  });

  it('interactions list [--run] [--open]: ids, run, kind, status, prompt, age and the answer command; runs tail names the interaction and the command', async () => {
    const t = await ask('talker', 'ask list');
    const listed = await aaas('interactions', 'list', '--open');
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID\s+RUN\s+KIND\s+STATUS\s+PROMPT\s+ASKED$/);
    expect(lines[1]).toMatch(new RegExp(`^${t.interactionId}\\s+${t.id}\\s+input\\s+open\\s+Which colour\\?\\s+(now|\\d+ seconds? ago)$`));
    expect(lines.at(-1)).toBe(`answer: aaas interactions answer ${t.id} ${t.interactionId} --text '<answer>'`);

    const ofRun = JSON.parse((await aaas('--json', 'interactions', 'list', '--run', t.id)).stdout);
    expect(ofRun.interactions.map((i: { id: string }) => i.id)).toEqual([t.interactionId]);

    // answer it with the printed command, then it is no longer open
    const answered = await aaas('interactions', 'answer', t.id, t.interactionId, '--text', 'green');
    expect(answered.code, answered.stderr).toBe(0);
    const after = JSON.parse((await aaas('--json', 'interactions', 'list', '--run', t.id)).stdout).interactions[0];
    expect(after).toMatchObject({ id: t.interactionId, status: 'resolved' });
    expect((await aaas('interactions', 'list', '--open', '--run', t.id)).stdout).toBe('no open interactions\n');
    expect((await aaas('interactions', 'list', '--run', 'nope')).stderr).toMatch(/^aaas: GET \/v1\/interactions\?.*HTTP 422/);

    const tail = await aaas('runs', 'tail', t.id);
    expect(tail.code, tail.stderr).toBe(0);
    expect(tail.stdout).toMatch(
      new RegExp(`^#\\d+ interaction\\.requested input "Which colour\\?" \\[id ${t.interactionId}\\] — answer: aaas interactions answer ${t.id} ${t.interactionId} --text '<answer>'$`, 'm'),
    );
  });
});

describe('aaas send and chat (A2A with the official SDK client)', () => {
  it('send: prints the answer; --json; input-required says how to answer, and --task answers it', async () => {
    const hi = await aaas('send', 'talker', 'hi there');
    expect(hi).toMatchObject({ code: 0, stdout: 'hello hi there\n', stderr: '' });
    const asJson = JSON.parse((await aaas('--json', 'send', 'talker', 'json please')).stdout);
    expect(asJson).toMatchObject({ state: 'completed', text: ['hello json please'], interaction: null, taskId: expect.stringMatching(/^[0-9a-f-]{36}$/) });

    const asked = await aaas('--json', 'send', 'talker', 'ask me');
    const turn = JSON.parse(asked.stdout);
    expect(turn).toMatchObject({ state: 'input-required', text: ['Which colour?'], interaction: { id: expect.stringMatching(/^[0-9a-f-]{36}$/), kind: 'input' } });
    const readable = await aaas('send', 'talker', 'ask again');
    expect(readable.stdout).toBe('Which colour?\n');
    const [, taskId, contextId] = /--task (\S+) --context-id (\S+) '<answer>'/.exec(readable.stderr) ?? [];
    expect(readable.stderr).toMatch(/^aaas: the agent asks \(task [0-9a-f-]+ is input-required\); answer: aaas send talker --task /);
    const answer = await aaas('send', 'talker', '--task', taskId!, '--context-id', contextId!, 'blue');
    expect(answer).toMatchObject({ code: 0, stdout: 'Got blue\n' });

    // the key-secured agent works with the key (sent to the service only), and not without
    expect((await aaas('send', 'streamer', 'hi')).stdout).toBe('hello hi\n');
    const keyless = await raw(['--url', stack.baseUrl, '--key', 'aaas_nope_nope', 'send', 'streamer', 'hi']);
    expect(keyless.code).toBe(2);
    expect(keyless.stderr).toMatch(/^aaas: /);
    const noAgent = await aaas('send', 'no-such-agent', 'hi');
    expect(noAgent.code).toBe(2);
    expect(noAgent.stderr).toMatch(/^aaas: cannot load the agent card .*\/no-such-agent\/\.well-known\/agent-card\.json/);
  });

  it('send streams the answer as it comes (a streaming agent: the first message before the last is produced)', { timeout: 30_000 }, async () => {
    const env = { ...process.env, XDG_CONFIG_HOME: xdg };
    const child = spawn(process.execPath, [CLI, '--url', stack.baseUrl, '--key', stack.adminKey, 'send', 'streamer', 'drip'], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = once(child, 'exit');
    const end = Date.now() + 15_000;
    while (!stdout.includes('drop 1') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(stdout).toContain('drop 1');
    expect(stdout).not.toContain('drop 3');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(stdout).toBe('drop 1\ndrop 2\ndrop 3\n');
  });

  it('chat: one conversation (contextId) over stdin; answers input-required and a confirmation inline with the next line', { timeout: 60_000 }, async () => {
    for (const agent of ['talker', 'streamer']) {
      const r = await raw(['--url', stack.baseUrl, '--key', stack.adminKey, 'chat', agent], { input: 'hi\nask me\nred\nbook a room\napprove\n\n/quit\nnever sent\n' });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe('hello hi\nWhich colour?\nGot red\nBook it?\nBooked\n');
      expect(r.stderr).toBe('aaas: the agent asks; the next line answers it\naaas: the agent asks (approve / reject); the next line answers it\n');
    }
    // every run of the last chat is in one context, the answers did not start new runs
    const runs = (await admin('GET', '/v1/runs?limit=3')).body.runs as Array<{ contextId: string; status: string }>;
    expect(runs.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    expect(new Set(runs.map((r) => r.contextId)).size).toBe(1);
    const runsOfContext = (await admin('GET', `/v1/runs?contextId=${runs[0]!.contextId}&limit=10`)).body.runs;
    expect(runsOfContext).toHaveLength(3);
    expect(JSON.stringify(await admin('GET', '/v1/runs?limit=10'))).not.toContain('never sent');
    const noAgent = await raw(['--url', stack.baseUrl, '--key', stack.adminKey, 'chat', 'no-such-agent'], { input: 'hi\n' });
    expect(noAgent.code).toBe(2);
    expect(noAgent.stderr).toMatch(/^aaas: cannot load the agent card .*no-such-agent.*HTTP 404/);
  });
});

describe('aaas --version, completion and the open-binding warning', () => {
  it('--version prints the package version; completion bash|zsh covers every command', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8')) as { version: string };
    expect(await raw(['--version'])).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
    for (const shell of ['bash', 'zsh']) {
      const r = await raw(['completion', shell]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/complete -F _aaas_complete aaas/);
      for (const cmd of ['runs get', 'runs tail', 'interactions list', 'interactions answer', 'context use', 'login', 'send', 'chat', 'completion', 'secrets rotate']) expect(r.stdout, cmd).toContain(`'${cmd}')`);
      expect(r.stdout).toMatch(/'runs get'\) words='[^']*--events/);
    }
    expect(await raw(['completion', 'fish'])).toMatchObject({ code: 2, stderr: 'aaas: no completion for "fish" (bash or zsh)\n' });
    // the generated bash script completes: `aaas runs g<TAB>` -> get
    const complete = (words: string) =>
      execFileP('bash', ['-c', `eval "$('${process.execPath}' ${CLI} completion bash)"; COMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _aaas_complete; echo "\${COMPREPLY[*]}"`]).then((r) => r.stdout.trim());
    expect(await complete('aaas runs g')).toBe('get');
    expect(await complete('aaas --json interactions l')).toBe('list');
    expect(await complete('aaas runs get --ev')).toBe('--events');
  });

  it('an open binding (security none) comes back with a warning, and aaas publish prints it; a key-secured one has none', async () => {
    const open = await admin('PUT', '/v1/agents/talker/bindings/a2a', { security: { scheme: 'none' } });
    expect(open.status).toBe(200);
    expect(open.body.warnings).toEqual([expect.stringMatching(/anyone who can reach the service can call this agent/)]);
    const closed = await admin('PUT', '/v1/agents/talker/bindings/a2a', { security: { scheme: 'apiKey' } });
    expect(closed.body.warnings).toEqual([]);
    const disabled = await admin('PUT', '/v1/agents/talker/bindings/a2a', { security: { scheme: 'none' }, enabled: false });
    expect(disabled.body.warnings).toEqual([]);

    const manifest = { slug: 'open-agent', name: 'Open', description: 'open', protocolProfiles: SKILLS, runtime: TALKER };
    const published = await publish(manifest);
    expect(published.code, published.stderr).toBe(0);
    expect(published.stderr).toMatch(/^aaas: warning: security is "none": anyone who can reach the service can call this agent/);
    const asJson = await aaas('--json', 'publish', path.join(dir, 'open-agent.json'), '--force');
    expect(JSON.parse(asJson.stdout).warnings).toEqual([expect.stringMatching(/anyone who can reach the service/)]);
    const secured = await publish({ ...manifest, binding: { security: { scheme: 'apiKey' } } });
    expect(secured.code, secured.stderr).toBe(0);
    expect(secured.stderr).toBe('');
  });
});
