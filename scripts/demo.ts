/**
 * `npm run demo`: start the API and a worker, publish a demo agent through the admin API, hold a
 * short A2A conversation with the official @a2a-js/sdk client, print it, and keep serving (the
 * demo agent is the host's default agent) until Ctrl-C.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { ClientFactory } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { SendMessageRequest } from '@a2a-js/sdk';
import { loadConfig } from '#libs/config';
import { listenFailure } from '#libs/common';
import { importJWK, type JWK } from 'jose';
import { verifyAgentCard } from '#libs/trust';
import { createApiApp } from '../apps/api/src/app.factory.js';
import { createWorkerApp } from '../apps/worker/src/worker.factory.js';

const DEMO_KEY = process.env.DEMO_ADMIN_KEY ?? 'aaas_demokey0_localdevelopmentonlykey000000';

const DEMO_RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'weather',
      match: { text: '\\bweather\\b', flags: 'i' },
      steps: [
        { type: 'status', status: 'working', message: 'Looking into the weather…' },
        { type: 'status', status: 'input-required', message: 'Which city?' },
      ],
    },
    {
      name: 'city',
      match: { text: '^(Paris|London|Berlin|Tokyo|[A-Z][a-z]+)$' },
      steps: [
        { type: 'wait', ms: 200 },
        { type: 'artifact', name: 'forecast.txt', content: { text: 'Forecast for {{input}}: sunny, 21°C, light breeze.' }, chunks: 3 },
        { type: 'message', text: 'Here is the forecast for {{input}}.' },
        { type: 'status', status: 'completed' },
      ],
    },
    { name: 'ping', match: { text: '^ping$', flags: 'i' }, steps: [{ type: 'reply', text: 'pong' }] },
    {
      name: 'deploy',
      match: { text: '\\bdeploy\\b', flags: 'i' },
      steps: [
        {
          type: 'interaction',
          kind: 'confirmation',
          title: 'Deploy release 2.0 to production?',
          options: [
            { id: 'approve', label: 'Ship it', kind: 'approve' },
            { id: 'reject', label: 'Not now', kind: 'reject' },
          ],
          branches: {
            approve: [{ type: 'message', text: 'Deploying…' }, { type: 'status', status: 'completed', message: 'Release 2.0 is live.' }],
            reject: [{ type: 'status', status: 'rejected', message: 'Deployment called off.' }],
          },
        },
      ],
    },
    {
      name: 'research',
      match: { text: '^research\\b', flags: 'i' },
      steps: [
        { type: 'status', status: 'working', message: 'Handing this to the researcher agent…' },
        { type: 'delegate', agent: 'researcher', text: '{{input}}' },
        { type: 'message', text: 'The researcher says: {{result}}' },
      ],
    },
  ],
};

/** A second agent the demo agent delegates to (RunLink). */
const RESEARCHER_RUNTIME = {
  kind: 'scripted',
  rules: [
    {
      name: 'research',
      match: { text: '.' },
      steps: [
        { type: 'status', status: 'working' },
        { type: 'wait', ms: 200 },
        { type: 'artifact', name: 'notes.txt', content: { text: 'Notes for "{{input}}": A2A lets agents hand each other tasks.' } },
        { type: 'status', status: 'completed', message: 'Agents can delegate to agents, and every step is in the log.' },
      ],
    },
  ],
};

const DEMO_PROFILE = {
  a2a: {
    identityProjection: { name: 'Demo Echo Agent', version: '1.0.0' },
    skillsProjection: [
      { id: 'echo', name: 'Echo', description: 'Repeats what you say.', tags: ['demo'], examples: ['Hello!'] },
      { id: 'weather', name: 'Weather', description: 'Asks for a city, then returns a forecast artifact.', tags: ['demo', 'multi-turn'], examples: ["What's the weather?"] },
    ],
    // signed (A2A v1.0 §8.4) because the profile says so: the org's signing key is made first
    capabilities: { streaming: true, signedAgentCard: true },
  },
};

async function checkServices(databaseUrl: string, redisUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl.replace(/\/[^/?]+(\?|$)/, '/postgres$1'), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
  } catch (e) {
    console.error(`PostgreSQL is not reachable (${(e as Error).message}).`);
    console.error('Start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start   (or: docker compose up -d postgres)');
    process.exit(2);
  }
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    console.error(`Redis is not reachable at ${redisUrl} (${(e as Error).message}).`);
    console.error('Start it: redis-server --daemonize yes   (or: docker compose up -d redis)');
    process.exit(2);
  } finally {
    redis.disconnect();
  }
}

async function admin(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${DEMO_KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function must(p: Promise<{ status: number; body: any }>, what: string): Promise<any> {
  const r = await p;
  if (r.status >= 300) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function publishDemoAgent(base: string): Promise<void> {
  // a profile declaring signedAgentCard is published only when the organization has an active key
  const keys = await must(admin(base, 'GET', '/v1/signing-keys'), 'list signing keys');
  if (!keys.signingKeys.some((k: { status: string }) => k.status === 'active')) await must(admin(base, 'POST', '/v1/signing-keys', { alg: 'ES256' }), 'create signing key');
  const existing = await admin(base, 'GET', '/v1/agents/echo');
  if (existing.status === 404) {
    await must(admin(base, 'POST', '/v1/agents', { slug: 'echo', name: 'Demo Echo Agent', description: 'Echoes, and forecasts the weather in two turns.', isDefault: true }), 'create agent');
  }
  const revision = await must(admin(base, 'POST', '/v1/agents/echo/revisions', { protocolProfiles: DEMO_PROFILE, runtime: DEMO_RUNTIME }), 'create revision');
  await must(admin(base, 'POST', `/v1/agents/echo/revisions/${revision.id}/publish`), 'publish revision');
  await must(admin(base, 'PUT', '/v1/agents/echo/active-revision', { revisionId: revision.id }), 'activate revision');
  await must(admin(base, 'PATCH', '/v1/agents/echo', { isDefault: true }), 'make default');
  await must(admin(base, 'PUT', '/v1/agents/echo/bindings/a2a', { transports: ['JSONRPC', 'HTTP+JSON', 'GRPC'], security: { scheme: 'none' } }), 'bind A2A');
  console.log(`published agent "echo", revision ${revision.number} (${revision.id})`);
  if ((await admin(base, 'GET', '/v1/agents/researcher')).status === 404) {
    await must(admin(base, 'POST', '/v1/agents', { slug: 'researcher', name: 'Demo Researcher', description: 'Takes delegated research tasks.' }), 'create researcher');
  }
  const researcher = await must(
    admin(base, 'POST', '/v1/agents/researcher/revisions', {
      protocolProfiles: { a2a: { identityProjection: { name: 'Demo Researcher', version: '1.0.0' }, skillsProjection: [{ id: 'research', name: 'Research', description: 'Writes notes on a topic.', tags: ['demo'] }] } },
      runtime: RESEARCHER_RUNTIME,
    }),
    'create researcher revision',
  );
  await must(admin(base, 'POST', `/v1/agents/researcher/revisions/${researcher.id}/publish`), 'publish researcher');
  await must(admin(base, 'PUT', '/v1/agents/researcher/active-revision', { revisionId: researcher.id }), 'activate researcher');
  await must(admin(base, 'PUT', '/v1/agents/researcher/bindings/a2a', { transports: ['JSONRPC'], security: { scheme: 'none' } }), 'bind researcher');
  console.log(`published agent "researcher", revision ${researcher.number} (${researcher.id})`);
}

/** Fetch the default agent's card and verify its signatures against the org's JWKS (libs/trust). */
async function verifyCard(base: string): Promise<void> {
  const card = (await (await fetch(`${base}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
  // the org's JWKS sits beside its agents: /a2a/<org>/.well-known/jwks.json
  const iface = (card.supportedInterfaces as Array<{ url: string }>)[0]!.url;
  const org = new URL(iface).pathname.split('/')[2];
  const jwks = (await (await fetch(`${base}/a2a/${org}/.well-known/jwks.json`)).json()) as { keys: JWK[] };
  const result = await verifyAgentCard(
    card,
    async (kid, _jku, alg) => {
      const jwk = jwks.keys.find((k) => k.kid === kid);
      return jwk ? ((await importJWK(jwk, alg)) as never) : null;
    },
    { trustedJku: [`${base}/a2a/`] },
  );
  for (const c of result.checks) console.log(`  card signature ${c.alg} kid=${c.kid}: ${c.valid ? 'verified against the JWKS' : `NOT verified (${c.reason})`}`);
}

async function conversation(base: string): Promise<void> {
  const client = await new ClientFactory().createFromUrl(base);
  const card = await client.getAgentCard();
  console.log(`\nA2A client resolved ${base}/.well-known/agent-card.json: "${card.name}"`);
  for (const i of card.supportedInterfaces ?? []) console.log(`  interface ${i.protocolBinding} ${i.protocolVersion} ${i.url}`);
  await verifyCard(base);

  const say = async (text: string, taskId?: string, contextId?: string) => {
    console.log(`\n> user: ${text}`);
    const result: any = await client.sendMessage(request(text, taskId, contextId));
    console.log(`< ${describeSdk(result)}`);
    return result;
  };

  await say('Hello, A2A!');
  await say('ping');
  const asked = await say("What's the weather?");
  const done = await say('Paris', asked.id, asked.contextId);
  for (const a of done.artifacts ?? []) console.log(`  artifact ${a.name}: "${sdkText(a.parts)}"`);

  // the same conversation, streamed: every event is one entry of the task's event log
  console.log('\n> user (streaming): weather in Tokyo?');
  let task: any;
  for await (const ev of client.sendMessageStream(request("What's the weather in Tokyo?"))) {
    const p: any = ev.payload;
    if (p.$case === 'task') task = p.value;
    console.log(`< ${describeEvent(p)}`);
  }
  console.log('> user (streaming): Tokyo');
  for await (const ev of client.sendMessageStream(request('Tokyo', task.id, task.contextId))) console.log(`< ${describeEvent(ev.payload)}`);

  // a confirmation: an InteractionRequest with options; the answer picks a branch
  const confirm = await say('Please deploy the new release');
  const prompt = confirm.status?.message?.metadata?.interaction;
  if (prompt) console.log(`  interaction ${String(prompt.id).slice(0, 8)}… (${prompt.kind}) options: ${prompt.options.map((o: any) => `${o.id} = "${o.label}"`).join(', ')}`);
  await say('approve', confirm.id, confirm.contextId);

  // a delegation: the demo agent hands the work to "researcher" (a child run, linked)
  const researched = await say('Research how agents talk to each other');
  const detail = (await admin(`http://127.0.0.1:${new URL(base).port || 80}`, 'GET', `/v1/runs/${researched.id}`)).body;
  for (const l of detail?.links?.children ?? []) console.log(`  ${l.kind} → child task ${l.childRunId.slice(0, 8)}… (agent researcher): ${l.other.status}`);
  for (const a of researched.artifacts ?? []) console.log(`  artifact ${a.name}: "${sdkText(a.parts)}"`);
}

/**
 * One call over the gRPC binding (A2A v1.0 §10): the SDK client picks the card's GRPC interface
 * (`host:port`, tenant `<org>/<agent>`) and sends one message there.
 */
async function grpcCall(base: string): Promise<void> {
  const card: any = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
  const iface = (card.supportedInterfaces as Array<{ url: string; protocolBinding: string; tenant?: string }>).find((i) => i.protocolBinding === 'GRPC');
  if (!iface) {
    console.log('\n(gRPC: the card lists no GRPC interface; skipped)');
    return;
  }
  const client = await new ClientFactory({ transports: [new GrpcTransportFactory()], preferredTransports: ['GRPC'] }).createFromAgentCard(card);
  console.log(`\nA2A over gRPC: ${iface.url}, tenant ${iface.tenant}`);
  console.log('> user (gRPC): Hello over gRPC!');
  // the gRPC codec needs every field of the proto message: build it with the SDK's fromJSON
  const req = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'Hello over gRPC!' }] } });
  console.log(`< ${describeSdk(await client.sendMessage(req))}`);
}

/**
 * Start the example agent written with @a2a-js/sdk's server (examples/upstream-agent, its own
 * process), put it behind the control plane with the `a2a` runtime, and talk to it through us.
 */
async function upstreamConversation(base: string, adminBase: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['examples/upstream-agent/agent.mjs'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const ready = await new Promise<{ cardUrl: string }>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the upstream agent exited (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line)));
  });
  console.log(`
started an @a2a-js/sdk agent (DefaultRequestHandler, in-memory store) at ${ready.cardUrl}`);
  if ((await admin(adminBase, 'GET', '/v1/agents/weather')).status === 404) {
    await must(admin(adminBase, 'POST', '/v1/agents', { slug: 'weather', name: 'Weather', description: 'An upstream A2A agent behind the control plane.' }), 'create weather agent');
  }
  // no skills given: publishing reads the upstream card and takes its skills and name
  const rev = await must(
    admin(adminBase, 'POST', '/v1/agents/weather/revisions', { protocolProfiles: { a2a: { capabilities: { streaming: true } } }, runtime: { kind: 'a2a', cardUrl: ready.cardUrl } }),
    'create weather revision',
  );
  const published = await must(admin(adminBase, 'POST', `/v1/agents/weather/revisions/${rev.id}/publish`), 'publish weather');
  await must(admin(adminBase, 'PUT', '/v1/agents/weather/active-revision', { revisionId: rev.id }), 'activate weather');
  await must(admin(adminBase, 'PUT', '/v1/agents/weather/bindings/a2a', { transports: ['JSONRPC', 'HTTP+JSON'], security: { scheme: 'none' } }), 'bind weather');
  const org = (await must(admin(adminBase, 'GET', '/v1/organization'), 'organization')).slug;
  const agentBase = `${base}/a2a/${org}/weather`;
  console.log(`published agent "weather" with the a2a runtime; skills from the upstream card: ${published.protocolProfiles.a2a.skillsProjection.map((s: { id: string }) => s.id).join(', ')}`);

  // a streamed task through us; the connection drops after three events and resumes with Last-Event-ID
  console.log('\n> user (streaming, through us to the upstream): stream 6 150');
  const ac = new AbortController();
  const res = await fetch(agentBase, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'stream 6 150' }] } } }),
    signal: ac.signal,
  });
  let taskId = '';
  let lastId = '0';
  let n = 0;
  for await (const f of sseFrames(res.body!)) {
    const r = JSON.parse(f.data).result;
    taskId ||= r.task?.id ?? r.statusUpdate?.taskId ?? r.artifactUpdate?.taskId ?? '';
    lastId = f.id ?? lastId;
    console.log(`< [id ${f.id}] ${describeJson(r)}`);
    if (++n === 3) break;
  }
  ac.abort();
  console.log(`  (connection dropped after event ${lastId}; resuming with Last-Event-ID: ${lastId} over HTTP+JSON)`);
  const resumed = await fetch(`${agentBase}/tasks/${taskId}:subscribe`, { headers: { 'a2a-version': '1.0', 'last-event-id': lastId } });
  for await (const f of sseFrames(resumed.body!)) console.log(`< [id ${f.id}] ${describeJson(JSON.parse(f.data))}`);

  // input-required upstream: an interaction here, answered through us on the same upstream task
  const client = await new ClientFactory().createFromUrl(`${agentBase}/`);
  console.log('\n> user (through us to the upstream): weather');
  const asked: any = await client.sendMessage(request('weather'));
  console.log(`< ${describeSdk(asked)}`);
  console.log('> user: Lisbon');
  const done: any = await client.sendMessage(request('Lisbon', asked.id, asked.contextId));
  console.log(`< ${describeSdk(done)}`);
  for (const a of done.artifacts ?? []) console.log(`  artifact ${a.name}: "${sdkText(a.parts)}"`);
  return child;
}

/** SSE frames of a response body (enough for our own frames). */
async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data: string }> {
  let buf = '';
  let frame: { id?: string; data: string } = { data: '' };
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (frame.data) yield frame;
        frame = { data: '' };
      } else if (line.startsWith('id:')) frame.id = line.slice(3).trim();
      else if (line.startsWith('data:')) frame.data += line.slice(5).trim();
    }
  }
}

/** One v1.0 StreamResponse (proto JSON), in a line. */
function describeJson(r: any): string {
  if (r.task) return `task ${r.task.id.slice(0, 8)}… ${r.task.status.state}`;
  if (r.statusUpdate) {
    const m = r.statusUpdate.status.message;
    return `status ${r.statusUpdate.status.state}${m ? ` — agent: "${m.parts.map((p: any) => p.text ?? '').join('')}"` : ''}`;
  }
  if (r.artifactUpdate) return `artifact ${r.artifactUpdate.artifact.name} chunk "${r.artifactUpdate.artifact.parts.map((p: any) => p.text ?? '').join('')}"${r.artifactUpdate.lastChunk ? ' (last)' : ''}`;
  return JSON.stringify(r).slice(0, 120);
}

function request(text: string, taskId?: string, contextId?: string): never {
  return { message: { messageId: randomUUID(), role: 1 /* ROLE_USER */, parts: [{ content: { $case: 'text', value: text } }], taskId: taskId ?? '', contextId: contextId ?? '' } } as never;
}

function describeEvent(p: any): string {
  switch (p.$case) {
    case 'task':
      return `task ${p.value.id.slice(0, 8)}… ${STATES[p.value.status?.state]}`;
    case 'statusUpdate': {
      const m = p.value.status?.message;
      return `status ${STATES[p.value.status?.state]}${m ? ` — agent: "${sdkText(m.parts)}"` : ''}`;
    }
    case 'artifactUpdate':
      return `artifact ${p.value.artifact?.name ?? p.value.artifact?.artifactId} chunk "${sdkText(p.value.artifact?.parts)}"${p.value.lastChunk ? ' (last)' : ''}`;
    default:
      return p.$case;
  }
}

function sdkText(parts: any[] | undefined): string {
  return (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : JSON.stringify(p.content?.value))).join('');
}

const STATES = ['unspecified', 'submitted', 'working', 'completed', 'failed', 'canceled', 'input-required', 'rejected', 'auth-required'];

function describeSdk(result: any): string {
  if ('messageId' in result) return `message (no task): "${sdkText(result.parts)}"`;
  const state = STATES[result.status?.state] ?? String(result.status?.state);
  // the agent's last word: the status message, else the newest agent message in the history
  const agentMsg = result.status?.message ?? [...(result.history ?? [])].reverse().find((m: any) => m.role === 2 /* ROLE_AGENT */);
  const msg = agentMsg ? ` — agent: "${sdkText(agentMsg.parts)}"` : '';
  return `task ${result.id.slice(0, 8)}… ${state}${msg}`;
}

async function main(): Promise<void> {
  const config = loadConfig();
  await checkServices(config.DATABASE_URL, config.REDIS_URL);
  execFileSync(process.execPath, ['scripts/migrate.mjs'], { stdio: 'inherit' });

  const port = config.PORT;
  const base = config.PUBLIC_BASE_URL ?? `http://localhost:${port}`;
  const env = {
    BOOTSTRAP_ORG_SLUG: config.BOOTSTRAP_ORG_SLUG ?? 'demo',
    BOOTSTRAP_ORG_NAME: config.BOOTSTRAP_ORG_NAME ?? 'Demo organization',
    BOOTSTRAP_ADMIN_KEY: config.BOOTSTRAP_ADMIN_KEY ?? DEMO_KEY,
    PUBLIC_BASE_URL: base,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    // local demo only: encrypts the demo organization's card-signing key at rest
    SIGNING_KEY_ENCRYPTION_SECRET: config.SIGNING_KEY_ENCRYPTION_SECRET ?? 'demo-only-signing-key-secret',
    // local demo only: the upstream example agent listens on loopback, which runtimes may not reach by default
    HTTP_RUNTIME_ALLOWED_CIDRS: process.env.HTTP_RUNTIME_ALLOWED_CIDRS ?? '127.0.0.0/8',
    // the gRPC binding: GRPC_PORT if set, else a free port (the card lists the bound one)
    GRPC_PORT: String(config.GRPC_PORT ?? 0),
  };
  const api = await createApiApp(env);
  try {
    await api.listen(port, config.HOST);
  } catch (e) {
    const line = listenFailure(e, port, config.HOST, 'PORT');
    if (!line) throw e;
    console.error(`demo: ${line}`);
    process.exit(1);
  }
  const worker = await createWorkerApp(env);
  console.log(`API on ${base} (admin API docs: ${base}/docs), worker started`);

  await publishDemoAgent(`http://127.0.0.1:${port}`);
  await conversation(base);
  await grpcCall(base);
  const upstream = await upstreamConversation(base, `http://127.0.0.1:${port}`);

  console.log(`\nServing on ${base} until Ctrl-C.`);
  console.log(`  Agent Card:  ${base}/.well-known/agent-card.json`);
  console.log(`  Admin key:   ${env.BOOTSTRAP_ADMIN_KEY} (local demo only)`);
  console.log(`  Console:     ${base}/console  (sign in with the admin key above)`);
  console.log(`  Try:         curl -s ${base}/v1/runs -H "authorization: Bearer ${env.BOOTSTRAP_ADMIN_KEY}"`);
  const stop = async () => {
    upstream.kill('SIGTERM');
    await worker.close();
    await api.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack ?? e.message : e);
  process.exit(1);
});

