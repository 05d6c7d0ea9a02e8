/**
 * Hostile-input fuzzing of every HTTP surface (A2A JSON-RPC, A2A HTTP+JSON, admin API) with
 * fast-check: malformed and hostile JSON (NUL, lone surrogates, deep nesting, huge strings, wrong
 * types), hostile path segments and query values (NUL, bad percent-encoding, traversal), odd
 * headers, forged credentials and tokens. A request fails the run when it gets a 5xx (other than
 * the spec's 501 UNIMPLEMENTED answer), a JSON-RPC
 * InternalError (-32603), or no answer in time. Used by the bounded test (test/fuzz.test.ts) and
 * by `npm run fuzz` (bench/fuzz.ts), which runs longer and prints the status histogram.
 */
import fc from 'fast-check';

export interface FuzzTarget {
  baseUrl: string;
  adminKey: string;
  /** `/a2a/<org>/<agent>` of an agent serving JSON-RPC and HTTP+JSON. */
  agentPath: string;
}

export interface FuzzReport {
  requests: number;
  /** status → count (`timeout` for no answer). */
  histogram: Record<string, number>;
  /** The requests that failed (5xx, -32603, timeout), first 20. */
  failures: Array<{ request: string; status: string; body: string }>;
}

const HOSTILE = ['\u0000', 'a\u0000b', '\ud800', '\udc00x', '%00', '%ZZ', '../../etc/passwd', '\u202e', '😀', '"', '\\', '{}', '[]', 'null', ' ', '', 'a'.repeat(5_000), '\r\nX-Injected: 1'];
const METHODS_V1 = ['SendMessage', 'SendStreamingMessage', 'GetTask', 'ListTasks', 'CancelTask', 'SubscribeToTask', 'GetExtendedAgentCard', 'CreateTaskPushNotificationConfig'];
const METHODS_V03 = ['message/send', 'message/stream', 'tasks/get', 'tasks/cancel', 'tasks/resubscribe', 'tasks/pushNotificationConfig/set'];

const hostileString = fc.oneof(fc.string(), fc.string({ unit: 'binary', maxLength: 40 }), fc.constantFrom(...HOSTILE));
const json = fc.oneof(
  { depthSize: 'small' },
  fc.jsonValue({ maxDepth: 4 }),
  hostileString,
  fc.record({ text: hostileString }),
  fc.array(fc.record({ text: hostileString, mediaType: fc.option(hostileString), metadata: fc.option(fc.jsonValue({ maxDepth: 2 })) }), { maxLength: 3 }),
);
const deep = fc.integer({ min: 50, max: 3_000 }).map((n) => '['.repeat(n) + ']'.repeat(n));
const message = fc.record(
  {
    messageId: fc.oneof(fc.uuid(), hostileString),
    role: fc.oneof(fc.constantFrom('ROLE_USER', 'ROLE_AGENT', 'user', 'agent'), hostileString),
    parts: fc.oneof(fc.array(fc.record({ text: hostileString }), { maxLength: 3 }), json),
    taskId: fc.oneof(fc.uuid(), hostileString),
    contextId: fc.oneof(fc.uuid(), hostileString),
    metadata: json,
    extensions: fc.array(hostileString, { maxLength: 2 }),
  },
  { requiredKeys: ['messageId', 'parts'] },
);
const params = fc.oneof(
  fc.record({ message, configuration: fc.option(fc.record({ returnImmediately: fc.boolean(), historyLength: fc.oneof(fc.integer(), hostileString) }, { requiredKeys: [] })) }, { requiredKeys: ['message'] }),
  fc.record({ id: fc.oneof(fc.uuid(), hostileString), historyLength: fc.oneof(fc.integer(), hostileString), pageToken: hostileString, pageSize: fc.oneof(fc.integer(), hostileString), contextId: hostileString, status: hostileString }, { requiredKeys: [] }),
  json,
);

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** Percent-encode any string (a lone surrogate becomes the UTF-8 of U+FFFD, as Buffer writes it). */
function encodeSegment(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
}

const seg = fc.oneof(fc.uuid(), hostileString.map(encodeSegment), fc.constantFrom('%00', '%ZZ', '..', '%2e%2e', 'a%00b', '%E0%A4%A'));
const contentType = fc.constantFrom('application/json', 'application/a2a+json', 'text/plain', 'application/json; charset=utf-16', 'multipart/form-data', '');
const a2aVersion = fc.oneof(fc.constantFrom('1.0', '0.3', '2.0', ''), hostileString.filter((s) => /^[\x20-\x7e]*$/.test(s)));
const credential = (adminKey: string) => fc.constantFrom(`Bearer ${adminKey}`, 'Bearer aaas_AAAAAAAA_forgedforgedforgedforged00', 'Bearer x', 'Basic Zm9vOmJhcg==', '');

function requests(t: FuzzTarget): fc.Arbitrary<Req> {
  const body = fc.oneof(params.map((p) => JSON.stringify(p)), json.map((j) => JSON.stringify(j)), deep, hostileString);
  const jsonRpc = fc
    .record({
      id: fc.oneof(fc.integer(), hostileString, fc.constant(null), fc.jsonValue({ maxDepth: 1 })),
      method: fc.oneof(fc.constantFrom(...METHODS_V1, ...METHODS_V03), hostileString),
      params,
      jsonrpc: fc.oneof(fc.constant('2.0'), hostileString),
      ct: contentType,
      v: a2aVersion,
      raw: fc.option(fc.oneof(deep, hostileString), { freq: 4 }),
    })
    .map(({ raw, ct, v, ...rpc }): Req => ({
      method: 'POST',
      path: t.agentPath,
      headers: { ...(ct ? { 'content-type': ct } : {}), ...(v ? { 'a2a-version': v } : {}) },
      body: raw ?? JSON.stringify(rpc),
    }));
  const rest = fc
    .record({
      route: fc.constantFrom('message:send', 'message:stream', 'tasks', 'tasks/{id}', 'tasks/{id}:cancel', 'tasks/{id}:subscribe', 'extendedAgentCard', '.well-known/agent-card.json', '{id}/tasks'),
      method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT'),
      id: seg,
      q: fc.array(fc.tuple(fc.constantFrom('pageToken', 'pageSize', 'contextId', 'status', 'historyLength', 'statusTimestampAfter', 'includeArtifacts', 'cursor'), seg), { maxLength: 3 }),
      body,
      ct: contentType,
      v: a2aVersion,
    })
    .map(({ route, method, id, q, body, ct, v }): Req => ({
      method,
      path: `${t.agentPath}/${route.replace('{id}', id)}${q.length ? `?${q.map(([k, val]) => `${k}=${val}`).join('&')}` : ''}`,
      headers: { ...(ct ? { 'content-type': ct } : {}), ...(v ? { 'a2a-version': v } : {}) },
      body: method === 'GET' || method === 'DELETE' ? undefined : body,
    }));
  const admin = fc
    .record({
      route: fc.constantFrom('/v1/agents', '/v1/agents/{id}', '/v1/agents/{id}/revisions', '/v1/agents/{id}/revisions/{id}/publish', '/v1/agents/{id}/bindings/a2a', '/v1/runs', '/v1/runs/{id}', '/v1/runs/{id}/events', '/v1/api-keys', '/v1/organization', '/v1/organizations'),
      method: fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE'),
      id: seg,
      q: fc.array(fc.tuple(fc.constantFrom('cursor', 'limit', 'after', 'agentId', 'contextId', 'status'), seg), { maxLength: 3 }),
      body,
      auth: credential(t.adminKey),
      ct: contentType,
      idem: fc.option(hostileString.filter((s) => /^[\x20-\x7e]*$/.test(s) && s.length < 200)),
    })
    .map(({ route, method, id, q, body, auth, ct, idem }): Req => ({
      method,
      path: `${route.replaceAll('{id}', id)}${q.length ? `?${q.map(([k, val]) => `${k}=${val}`).join('&')}` : ''}`,
      headers: { ...(auth ? { authorization: auth } : {}), ...(ct ? { 'content-type': ct } : {}), ...(idem ? { 'idempotency-key': idem } : {}) },
      body: method === 'GET' || method === 'DELETE' ? undefined : body,
    }));
  return fc.oneof(jsonRpc, rest, admin);
}

/** Send `count` generated requests (fixed `seed`), `concurrency` at a time; never throws. */
export async function runFuzz(t: FuzzTarget, opts: { count: number; seed: number; concurrency?: number; timeoutMs?: number }): Promise<FuzzReport> {
  const reqs = fc.sample(requests(t), { numRuns: opts.count, seed: opts.seed });
  const report: FuzzReport = { requests: 0, histogram: {}, failures: [] };
  let next = 0;
  const one = async (r: Req) => {
    let status = 'timeout';
    let text = '';
    try {
      const res = await fetch(`${t.baseUrl}${r.path}`, { method: r.method, headers: r.headers, body: r.body, signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000) });
      status = String(res.status);
      // streams: the first bytes are enough to judge the answer
      text = res.headers.get('content-type')?.includes('event-stream') ? '' : await res.text();
      if (res.headers.get('content-type')?.includes('event-stream')) await res.body?.cancel();
    } catch (e) {
      status = (e as Error).name === 'TimeoutError' ? 'timeout' : `error:${(e as Error).name}`;
    }
    report.requests++;
    report.histogram[status] = (report.histogram[status] ?? 0) + 1;
    const internal = /"code"\s*:\s*-32603/.test(text);
    // 501 is a protocol answer (A2A v1.0 §5.4: UNIMPLEMENTED for unsupported operations / versions), not a fault
    const serverError = Number(status) >= 500 && !(status === '501' && text.includes('"UNIMPLEMENTED"'));
    if (status === 'timeout' || status.startsWith('error') || serverError || internal) {
      if (report.failures.length < 20) report.failures.push({ request: `${r.method} ${r.path.slice(0, 200)} ${JSON.stringify(r.headers)} ${(r.body ?? '').slice(0, 300)}`, status, body: text.slice(0, 300) });
    }
  };
  await Promise.all(
    Array.from({ length: opts.concurrency ?? 8 }, async () => {
      while (next < reqs.length) await one(reqs[next++]!);
    }),
  );
  return report;
}
