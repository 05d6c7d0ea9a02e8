/**
 * The commands a person lives in: `login` and `context …` (saved URL + key, see cli-config.ts),
 * `runs get`, `interactions list`, `send` / `chat` (A2A, see a2a-chat.ts) and `completion`.
 * Registered on the program by main.ts; they share its global options and output helpers.
 */
import { Command, InvalidArgumentError } from 'commander';
import { AdminClient, UsageError } from './admin-client.js';
import { ASKING, chatLoop, connectAgent, sendTurn } from './a2a-chat.js';
import { checkContextName, configPath, DEFAULT_CONTEXT, loadConfig, resolveTarget, saveConfig, type CliConfig } from './cli-config.js';
import { completionScript } from './completion.js';
import { ago, answerCommand, eventLine, partsText, short, statusText, table } from './output.js';

export interface SessionDeps {
  /** The global options: --json, --url, --key, --context. */
  globals: () => { json?: boolean; url?: string; key?: string; context?: string };
  out: (line: string) => void;
  err: (line: string) => void;
  emit: (value: unknown, readable: () => string) => void;
}

const seg = (s: string) => encodeURIComponent(s);

/** The service URL and key for this invocation (flags > env > context). */
export function target(d: SessionDeps) {
  const g = d.globals();
  const env = process.env;
  // URL and key both given (flags or env) and no --context: the config file is not read (a broken one does not matter)
  const given = (g.url ?? (env.AAAS_URL || undefined)) !== undefined && (g.key ?? (env.AAAS_API_KEY || undefined)) !== undefined && g.context === undefined && !env.AAAS_CONTEXT;
  return resolveTarget({ url: g.url, key: g.key, contextName: g.context }, env, given ? { current: null, contexts: {} } : loadConfig());
}

/** The admin API client for this invocation. */
export function adminClient(d: SessionDeps): AdminClient {
  const t = target(d);
  return new AdminClient({ baseUrl: t.url, key: t.key });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

function positiveInt(name: string, max: number) {
  return (v: string): string => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1 || n > max) throw new InvalidArgumentError(`${name} is a whole number 1..${max}`);
    return v;
  };
}

interface InteractionView {
  id: string;
  runId?: string;
  kind: string;
  status: string;
  blocking: boolean;
  request: { title?: string; message?: { parts?: Array<{ text?: string }> }; options?: Array<{ id: string }> };
  createdAt: string;
  expiresAt: string | null;
}

const prompt = (i: InteractionView) => (i.request.title ? short(i.request.title, 60) : partsText(i.request.message?.parts, 60).replace(/^"|"$/g, ''));

export function registerSessionCommands(program: Command, d: SessionDeps): void {
  const json = () => d.globals().json === true;

  // ---------------------------------------------------------------- login / context
  program
    .command('login')
    .description(`check an API key against the service and save URL + key as a named context (${configPath()}, mode 0600); it becomes the current context`)
    .option('--key-stdin', 'read the API key from stdin (else --key or AAAS_API_KEY)')
    .action(async (o: { keyStdin?: boolean }) => {
      const g = d.globals();
      const name = checkContextName(g.context ?? DEFAULT_CONTEXT);
      const url = (g.url ?? process.env.AAAS_URL ?? loadConfig().contexts[name]?.url ?? 'http://localhost:3000').replace(/\/+$/, '');
      const key = o.keyStdin ? await readStdin() : (g.key ?? process.env.AAAS_API_KEY);
      if (!key) throw new UsageError('no API key: pipe it in with --key-stdin (or give --key / AAAS_API_KEY)');
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw new UsageError(`not a URL: ${url}`);
      }
      if (!/^https?:$/.test(parsed.protocol)) throw new UsageError(`the URL must be http(s): ${url}`);
      const org = await new AdminClient({ baseUrl: url, key }).call<{ slug: string; name: string }>('GET', '/v1/organization');
      const config: CliConfig = loadConfig();
      config.contexts[name] = { url, key, orgSlug: org.slug };
      config.current = name;
      saveConfig(config);
      d.emit({ context: name, url, organization: org.slug, current: true, file: configPath() }, () => `logged in to ${url} as organization ${org.slug}; context "${name}" saved (current) in ${configPath()}`);
    });

  const context = program.command('context').description('saved logins (aaas login): list them, pick the current one');
  context
    .command('list', { isDefault: true })
    .description('name, URL, organization, current (never the keys)')
    .action(() => {
      const c = loadConfig();
      const rows = Object.entries(c.contexts).map(([name, x]) => ({ name, url: x.url, organization: x.orgSlug ?? null, current: name === c.current }));
      if (json()) return d.out(JSON.stringify({ current: c.current, contexts: rows }, null, 2));
      if (rows.length === 0) return d.out('no contexts (aaas login)');
      d.out(table(['CURRENT', 'NAME', 'URL', 'ORGANIZATION'], rows.map((r) => [r.current ? '*' : '', r.name, r.url, r.organization])));
    });
  context
    .command('use')
    .description('make a saved context the current one')
    .argument('<name>')
    .action((name: string) => {
      const c = loadConfig();
      if (!c.contexts[name]) throw new UsageError(`no context "${name}" (aaas context list)`);
      c.current = name;
      saveConfig(c);
      d.emit({ current: name }, () => `current context: ${name} (${c.contexts[name]!.url})`);
    });

  // ---------------------------------------------------------------- runs get
  const runs = program.commands.find((c) => c.name() === 'runs')!;
  runs
    .command('get')
    .description('a run: state, agent, ages, why it is blocked and the open interactions (with the command answering each), its last events')
    .argument('<run-id>')
    .option('--events <n>', 'how many of the last events to show', positiveInt('--events', 100), '10')
    .action(async (runId: string, o: { events: string }) => {
      const c = adminClient(d);
      const detail = await c.call<{ run: { id: string; agentId: string; contextId: string; status: string; blockedReason: string | null; lastSequence: number; createdAt: string; updatedAt: string; statusAt: string }; interactions: InteractionView[] }>(
        'GET',
        `/v1/runs/${seg(runId)}`,
      );
      const r = detail.run;
      const n = Number(o.events);
      const [agent, page] = await Promise.all([
        c.call<{ slug: string }>('GET', `/v1/agents/${seg(r.agentId)}`).catch(() => null),
        c.call<{ events: Array<{ sequence: number; event: { type: string; payload: unknown } }> }>('GET', `/v1/runs/${seg(runId)}/events?after=${Math.max(0, r.lastSequence - n)}&limit=${n}`),
      ]);
      const open = detail.interactions.filter((i) => i.status === 'open');
      if (json()) return d.out(JSON.stringify({ ...detail, agent: agent ? { id: r.agentId, slug: agent.slug } : { id: r.agentId }, openInteractions: open.map((i) => i.id), lastEvents: page.events }, null, 2));
      const lines = [
        `run ${r.id}`,
        `  agent:    ${agent?.slug ?? r.agentId}`,
        `  status:   ${statusText(r.status, r.blockedReason)} (since ${ago(r.statusAt)})`,
        `  context:  ${r.contextId}`,
        `  created:  ${ago(r.createdAt)}`,
        `  updated:  ${ago(r.updatedAt)}`,
      ];
      if (r.blockedReason) lines.push(`  blocked:  ${r.blockedReason.replace(/_/g, ' ')} — waiting for an answer`);
      if (open.length > 0) {
        lines.push('  open interactions:');
        for (const i of open) {
          lines.push(`    ${i.id}  ${i.kind}${i.blocking ? '' : ' (non-blocking)'}  "${prompt(i)}"  asked ${ago(i.createdAt)}${i.expiresAt ? `, expires ${ago(i.expiresAt)}` : ''}`);
          lines.push(`      answer: ${answerCommand(r.id, i.id, i.request.options)}`);
        }
      }
      lines.push(`  last events (${page.events.length} of ${r.lastSequence}):`);
      for (const e of page.events) lines.push(`    ${eventLine(e)}`);
      d.out(lines.join('\n'));
    });

  // ---------------------------------------------------------------- interactions list
  const interactions = program.commands.find((c) => c.name() === 'interactions')!;
  interactions
    .command('list')
    .description("the organization's interactions, newest first: id, run, kind, status, prompt, age")
    .option('--run <run-id>', "only this run's")
    .option('--open', 'only those waiting for an answer')
    .option('--limit <n>', 'at most this many (1..200)', positiveInt('--limit', 200), '50')
    .action(async (o: { run?: string; open?: boolean; limit: string }) => {
      const q = new URLSearchParams({ limit: o.limit, ...(o.run ? { runId: o.run } : {}), ...(o.open ? { status: 'open' } : {}) });
      const r = await adminClient(d).call<{ interactions: Array<InteractionView & { runId: string }> }>('GET', `/v1/interactions?${q}`);
      if (json()) return d.out(JSON.stringify(r, null, 2));
      if (r.interactions.length === 0) return d.out(o.open ? 'no open interactions' : 'no interactions');
      d.out(table(['ID', 'RUN', 'KIND', 'STATUS', 'PROMPT', 'ASKED'], r.interactions.map((i) => [i.id, i.runId, i.kind, i.status, prompt(i), ago(i.createdAt)])));
      const first = r.interactions.find((i) => i.status === 'open');
      if (first) d.out(`answer: ${answerCommand(first.runId, first.id, first.request.options)}`);
    });

  // ---------------------------------------------------------------- send / chat
  /** The org slug for A2A paths: the context's (saved at login) when the key is the context's, else the API's answer for the key. */
  async function agentClient(agent: string) {
    const t = target(d);
    if (!t.key) throw new UsageError('an API key is needed: aaas login, --key or AAAS_API_KEY');
    const saved = t.context && t.context.value.key === t.key ? t.context.value.orgSlug : undefined;
    const org = saved ?? (await new AdminClient({ baseUrl: t.url, key: t.key }).call<{ slug: string }>('GET', '/v1/organization')).slug;
    return connectAgent(t.url, org, agent, t.key);
  }

  program
    .command('send')
    .description("send one message to an agent over A2A and print its answer as it streams in (continue a task with --task, a conversation with --context-id)")
    .argument('<agent>', "the agent's slug")
    .argument('<text>')
    .option('--context-id <id>', 'the A2A contextId to continue')
    .option('--task <id>', 'answer this task (when it asks: input-required)')
    .action(async (agent: string, text: string, o: { contextId?: string; task?: string }) => {
      const a2a = await agentClient(agent);
      const turn = await sendTurn(a2a, text, { contextId: o.contextId, taskId: o.task, onText: (t) => (json() ? undefined : d.out(t)) });
      if (json()) return d.out(JSON.stringify(turn, null, 2));
      if (ASKING.has(turn.state) && turn.taskId) {
        d.err(`aaas: the agent asks (task ${turn.taskId} is ${turn.state}); answer: aaas send ${agent} --task ${turn.taskId} --context-id ${turn.contextId} '<answer>'`);
      } else if (turn.state !== 'completed' && turn.state !== 'message') {
        d.err(`aaas: task ${turn.taskId} is ${turn.state}`);
        if (['failed', 'rejected', 'canceled'].includes(turn.state)) process.exitCode = 1;
      }
    });

  program
    .command('chat')
    .description('talk with an agent line by line in one conversation (contextId); when it asks, the next line answers; /quit or Ctrl-D ends')
    .argument('<agent>', "the agent's slug")
    .action(async (agent: string) => {
      const a2a = await agentClient(agent);
      const interactive = process.stdin.isTTY === true;
      if (interactive) d.err(`aaas: talking to ${agent} (/quit or Ctrl-D to end)`);
      await chatLoop(a2a, { input: process.stdin, interactive, out: d.out, write: (s) => process.stdout.write(s), err: d.err });
    });

  // ---------------------------------------------------------------- completion
  program
    .command('completion')
    .description('print a shell completion script (bash: eval "$(aaas completion bash)"; zsh: eval "$(aaas completion zsh)")')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`no completion for "${shell}" (bash or zsh)`);
      d.out(completionScript(program, shell));
    });
}
