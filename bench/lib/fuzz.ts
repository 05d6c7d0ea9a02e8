/**
 * Hostile-input fuzzing of every HTTP surface (A2A JSON-RPC, A2A HTTP+JSON, admin API, run archive import) with
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
  /**
   * An admin key of an organization with no runs (and an agent `fuzzed` or `echo`, revision 1): run
   * archive imports (POST /v1/run-archive) are fuzzed with it past the "organization has runs"
   * refusal, into the parser, the limits and the derivation of run columns. Unset: the import is
   * fuzzed with `adminKey` only.
   */
  importKey?: string;
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
  // run archive imports: JSON Lines bodies of archive-shaped lines with hostile fields (forged
  // bookkeeping columns, torn or future logs, deep nesting, long lines, garbage), under a valid,
  // forged or missing key and, mostly, the archive content type
  const uuid = fc.uuid({ version: 7 });
  const event = fc.record({ sequence: fc.oneof(fc.integer({ min: 1, max: 4 }), hostileString), type: fc.constantFrom('run.created', 'run.status_changed', 'message.added', 'interaction.requested', 'interaction.responded', 'artifact.updated', 'x'), payload: fc.oneof(json, fc.record({ status: fc.constantFrom('submitted', 'working', 'completed', 'bogus'), message: json, blocking: fc.boolean(), parts: json })), created_at: fc.oneof(fc.constantFrom('2026-11-28T10:00:00+00:00', '1970-01-01T00:00:00Z', '2999-01-01T00:00:00Z', 'yesterday'), hostileString) });
  const archiveLine = fc.record(
    {
      v: fc.oneof(fc.constant(1), json),
      agent: fc.oneof(fc.record({ slug: fc.constantFrom('fuzzed', 'echo', 'nobody'), revision: fc.constantFrom(1, 2, 0) }), json),
      run: fc.oneof(fc.record({ id: uuid, last_sequence: fc.integer({ min: -1, max: 4 }), thread_id: hostileString, origin_message_id: hostileString, stored_bytes: fc.oneof(fc.constant(-9e15), fc.integer()), status_at: hostileString, status: hostileString, kind: hostileString, metadata: json }, { requiredKeys: ['id', 'last_sequence'] }), json),
      events: fc.oneof(fc.array(event, { maxLength: 4 }), json),
      messages: fc.oneof(fc.constant([]), fc.array(fc.record({ id: uuid, role: hostileString, parts: json, sequence: fc.integer() }), { maxLength: 2 }), json),
      artifacts: fc.oneof(fc.constant([]), json),
      interactions: fc.oneof(fc.constant([]), json),
      links: fc.oneof(fc.constant([]), fc.array(fc.record({ parent_run_id: uuid, child_run_id: uuid }), { maxLength: 1 }), json),
    },
    { requiredKeys: [] },
  );
  const archiveText = fc.oneof(
    { weight: 4, arbitrary: archiveLine.map((l) => JSON.stringify(l)) },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3_000 }).map((n) => `{"v":1,"run":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`) },
    { weight: 1, arbitrary: hostileString },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }).map((n) => `{"v":1,"pad":"${'x'.repeat(n * 64 * 1024)}"}`) },
  );
  const archive = fc
    .record({
      lines: fc.array(archiveText, { minLength: 1, maxLength: 4 }),
      sep: fc.constantFrom('\n', '\r\n', '\n\n'),
      auth: fc.oneof({ weight: 4, arbitrary: fc.constant(`Bearer ${t.importKey ?? t.adminKey}`) }, { weight: 1, arbitrary: credential(t.adminKey) }),
      ct: fc.oneof({ weight: 4, arbitrary: fc.constant('application/x-ndjson') }, { weight: 1, arbitrary: contentType }),
    })
    .map(({ lines, sep, auth, ct }): Req => ({
      method: 'POST',
      path: '/v1/run-archive',
      headers: { ...(auth ? { authorization: auth } : {}), ...(ct ? { 'content-type': ct } : {}) },
      body: lines.join(sep),
    }));
  return fc.oneof(jsonRpc, rest, admin, archive);
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

// ------------------------------------------------------------------------------------- gRPC

export interface GrpcFuzzTarget {
  /** `http://host:port` of the gRPC listener (plaintext HTTP/2). */
  grpcUrl: string;
  /** The fuzzed agent's tenant, `<org>/<agent>`. */
  tenant: string;
  /** A valid API key of its organization (some calls present it, some a forgery). */
  key: string;
}

/** One gRPC call as the fuzzer sends it: any path, any metadata, any bytes (framed or not). */
interface GrpcReq {
  path: string;
  metadata: Record<string, string>;
  /** What goes on the wire after the headers (already framed, or deliberately not). */
  body: Buffer;
  /** What the call is, for the report. */
  label: string;
}

const GRPC_METHODS = [
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'ListTasks',
  'CancelTask',
  'SubscribeToTask',
  'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'GetExtendedAgentCard',
  'DeleteTaskPushNotificationConfig',
] as const;
type GrpcMethod = (typeof GRPC_METHODS)[number];

/** The SDK's codecs of each method's request (ProtoJSON → message) and its binary encoder. */
async function grpcCodecs(): Promise<Record<GrpcMethod, { fromJSON(o: unknown): unknown; serialize(m: unknown): Buffer }>> {
  const sdk = (await import('@a2a-js/sdk')) as unknown as Record<string, { fromJSON(o: unknown): unknown }>;
  const { A2AService } = (await import('@a2a-js/sdk/server/grpc')) as unknown as { A2AService: Record<string, { requestSerialize(m: unknown): Buffer }> };
  const types: Record<GrpcMethod, string> = {
    SendMessage: 'SendMessageRequest',
    SendStreamingMessage: 'SendMessageRequest',
    GetTask: 'GetTaskRequest',
    ListTasks: 'ListTasksRequest',
    CancelTask: 'CancelTaskRequest',
    SubscribeToTask: 'SubscribeToTaskRequest',
    CreateTaskPushNotificationConfig: 'TaskPushNotificationConfig',
    GetTaskPushNotificationConfig: 'GetTaskPushNotificationConfigRequest',
    ListTaskPushNotificationConfigs: 'ListTaskPushNotificationConfigsRequest',
    GetExtendedAgentCard: 'GetExtendedAgentCardRequest',
    DeleteTaskPushNotificationConfig: 'DeleteTaskPushNotificationConfigRequest',
  };
  const out = {} as Record<GrpcMethod, { fromJSON(o: unknown): unknown; serialize(m: unknown): Buffer }>;
  for (const m of GRPC_METHODS) {
    const def = A2AService[m.charAt(0).toLowerCase() + m.slice(1)]!;
    out[m] = { fromJSON: (o) => sdk[types[m]]!.fromJSON(o), serialize: (v) => Buffer.from(def.requestSerialize(v)) };
  }
  return out;
}

function frame(payload: Buffer, declared = payload.length, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(compressed ? 1 : 0, 0);
  head.writeUInt32BE(declared, 1);
  return Buffer.concat([head, payload]);
}

/** A header value HTTP/2 can carry (visible ASCII and spaces; what else a client cannot send). */
const headerValue = hostileString.map((s) => s.replace(/[^\x20-\x7e]/g, '').slice(0, 300));

function grpcRequests(t: GrpcFuzzTarget, codecs: Awaited<ReturnType<typeof grpcCodecs>>): fc.Arbitrary<GrpcReq> {
  const [org] = t.tenant.split('/');
  const tenant = fc.oneof({ weight: 4, arbitrary: fc.constant(t.tenant) }, { weight: 1, arbitrary: hostileString }, { weight: 1, arbitrary: hostileString.map((a) => `${org}/${a}`) }, { weight: 1, arbitrary: fc.constant('') });
  const id = fc.oneof(fc.uuid(), hostileString, fc.constant('i'.repeat(100_000)));
  const part = fc.oneof(
    fc.record({ text: hostileString }),
    fc.record({ data: fc.jsonValue({ maxDepth: 3 }) }),
    fc.record({ url: hostileString, mediaType: hostileString }),
    fc.record({ raw: fc.base64String({ maxLength: 40 }), filename: hostileString }),
  );
  const message = fc.record(
    {
      messageId: fc.oneof(fc.uuid(), hostileString),
      role: fc.constantFrom('ROLE_USER', 'ROLE_AGENT', 'ROLE_UNSPECIFIED'),
      parts: fc.array(part, { maxLength: 3 }),
      taskId: id,
      contextId: fc.oneof(fc.uuid(), hostileString),
      metadata: fc.oneof(fc.dictionary(hostileString, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 3 }), deep.map((d) => ({ deep: JSON.parse(d) }))),
      extensions: fc.array(hostileString, { maxLength: 2 }),
    },
    { requiredKeys: ['messageId', 'parts'] },
  );
  const params: Record<GrpcMethod, fc.Arbitrary<Record<string, unknown>>> = {
    SendMessage: fc.record({ tenant, message, configuration: fc.record({ returnImmediately: fc.boolean(), historyLength: fc.integer({ min: -5, max: 100 }), acceptedOutputModes: fc.array(hostileString, { maxLength: 2 }) }, { requiredKeys: [] }) }, { requiredKeys: ['tenant'] }),
    SendStreamingMessage: fc.record({ tenant, message }, { requiredKeys: ['tenant'] }),
    GetTask: fc.record({ tenant, id, historyLength: fc.integer({ min: -5, max: 1_000 }) }, { requiredKeys: ['tenant'] }),
    ListTasks: fc.record({ tenant, contextId: hostileString, status: fc.constantFrom('TASK_STATE_WORKING', 'TASK_STATE_COMPLETED'), pageSize: fc.integer({ min: -5, max: 1_000 }), pageToken: hostileString, historyLength: fc.integer({ min: -5, max: 100 }) }, { requiredKeys: ['tenant'] }),
    CancelTask: fc.record({ tenant, id }, { requiredKeys: ['tenant'] }),
    SubscribeToTask: fc.record({ tenant, id }, { requiredKeys: ['tenant'] }),
    CreateTaskPushNotificationConfig: fc.record({ tenant, taskId: id, id: hostileString, url: hostileString, token: hostileString }, { requiredKeys: ['tenant'] }),
    GetTaskPushNotificationConfig: fc.record({ tenant, taskId: id, id: hostileString }, { requiredKeys: ['tenant'] }),
    ListTaskPushNotificationConfigs: fc.record({ tenant, taskId: id, pageSize: fc.integer({ min: -5, max: 100 }), pageToken: hostileString }, { requiredKeys: ['tenant'] }),
    GetExtendedAgentCard: fc.record({ tenant }, { requiredKeys: [] }),
    DeleteTaskPushNotificationConfig: fc.record({ tenant, taskId: id, id: hostileString }, { requiredKeys: ['tenant'] }),
  };
  const metadata = fc.record(
    {
      'a2a-version': fc.oneof(fc.constantFrom('1.0', '0.3', '2.0', ''), headerValue),
      'a2a-extensions': headerValue,
      'last-event-id': fc.oneof(fc.constantFrom('0', '1', '-1', '99999999999999999999'), headerValue),
      'x-api-key': fc.constantFrom(t.key, `${t.key.slice(0, 14)}forgedforgedforgedforged00`, 'aaas_AAAAAAAA_forgedforgedforgedforged00', 'x'),
      authorization: fc.constantFrom(`Bearer ${t.key}`, 'Bearer x.y.z', 'Bearer eyJhbGciOiJub25lIn0.e30.', 'Basic Zm9vOmJhcg=='),
      'grpc-timeout': fc.constantFrom('5S', '100m', '1n', 'xyz', '99999999S', '5'),
    },
    { requiredKeys: [] },
  );
  const method = fc.constantFrom(...GRPC_METHODS);
  const structured = fc.record({ method, md: metadata }).chain(({ method: m, md }) =>
    params[m].map((p): GrpcReq => {
      let bytes: Buffer;
      try {
        bytes = codecs[m].serialize(codecs[m].fromJSON(p));
      } catch {
        bytes = Buffer.from(JSON.stringify(p));
      }
      return { path: `/lf.a2a.v1.A2AService/${m}`, metadata: md, body: frame(bytes), label: `${m} ${JSON.stringify(p).slice(0, 200)}` };
    }),
  );
  const raw = fc
    .record({
      path: fc.oneof({ weight: 6, arbitrary: method.map((m) => `/lf.a2a.v1.A2AService/${m}`) }, { weight: 1, arbitrary: fc.constantFrom('/lf.a2a.v1.A2AService/Nope', '/grpc.health.v1.Health/Check', '/x', '/lf.a2a.v1.A2AService/') }),
      md: metadata,
      bytes: fc.uint8Array({ maxLength: 200 }),
      shape: fc.constantFrom('plain', 'gzip', 'deflate', 'unknown-encoding', 'compressed-identity', 'truncated', 'two', 'empty', 'none', 'huge-prefix'),
    })
    .map(({ path, md, bytes, shape }): GrpcReq => {
      const b = Buffer.from(bytes);
      const metadata = { ...md, ...(shape === 'gzip' ? { 'grpc-encoding': 'gzip' } : shape === 'deflate' ? { 'grpc-encoding': 'deflate' } : shape === 'unknown-encoding' ? { 'grpc-encoding': 'br' } : {}) };
      const body =
        shape === 'plain' ? frame(b)
        : shape === 'gzip' || shape === 'deflate' || shape === 'unknown-encoding' || shape === 'compressed-identity' ? frame(b, b.length, true)
        : shape === 'truncated' ? frame(b, b.length + 10)
        : shape === 'two' ? Buffer.concat([frame(b), frame(b)])
        : shape === 'empty' ? frame(Buffer.alloc(0))
        : shape === 'huge-prefix' ? frame(b, 0xffffffff)
        : Buffer.alloc(0);
      return { path, metadata, body, label: `${path} raw ${shape} ${b.toString('hex').slice(0, 80)}` };
    });
  return fc.oneof({ weight: 3, arbitrary: structured }, { weight: 2, arbitrary: raw });
}

/** gRPC statuses that fail the run: the server's fault (INTERNAL, UNKNOWN, DATA_LOSS) or "not now" (UNAVAILABLE). */
const GRPC_FAULTS = new Set([2, 13, 14, 15]);
const GRPC_NAMES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'];

/**
 * gRPC fuzzing of the A2A listener, raw and structured, over real HTTP/2: every RPC's request built
 * from hostile values (strings with NUL and lone surrogates, 100k-character ids, deep Structs, odd
 * enums and numbers) and encoded with the SDK's codecs, and raw frames (random bytes, compressed
 * flags with bad or unknown encodings, truncated, doubled, empty, missing, a 4 GiB length prefix),
 * under hostile metadata (versions, extensions, cursors, forged keys and tokens, bad grpc-timeout).
 * A call fails the run when it ends INTERNAL, UNKNOWN, DATA_LOSS or UNAVAILABLE, ends without a
 * status (reset), or is not answered within `timeoutMs` (default 5 s; a stream counts as answered
 * at its first message, then is cancelled). Never throws.
 */
export async function runGrpcFuzz(t: GrpcFuzzTarget, opts: { count: number; seed: number; concurrency?: number; timeoutMs?: number }): Promise<FuzzReport> {
  const http2 = await import('node:http2');
  const codecs = await grpcCodecs();
  const reqs = fc.sample(grpcRequests(t, codecs), { numRuns: opts.count, seed: opts.seed });
  const report: FuzzReport = { requests: 0, histogram: {}, failures: [] };
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const concurrency = opts.concurrency ?? 8;
  // a few connections, replaced when the server closes one
  const sessions: Array<import('node:http2').ClientHttp2Session | null> = Array.from({ length: Math.max(1, Math.ceil(concurrency / 8)) }, () => null);
  const sessionFor = (i: number) => {
    let s = sessions[i];
    if (!s || s.closed || s.destroyed) {
      s = http2.connect(t.grpcUrl);
      s.on('error', () => undefined);
      sessions[i] = s;
    }
    return s;
  };
  const one = (r: GrpcReq, w: number) =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let status: string | null = null;
      let message = '';
      let settled = false;
      let stream: import('node:http2').ClientHttp2Stream;
      const finish = (outcome?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const s = outcome ?? (status === null ? 'reset' : (GRPC_NAMES[Number(status)] ?? status));
        report.requests++;
        report.histogram[s] = (report.histogram[s] ?? 0) + 1;
        const failed = s === 'timeout' || s === 'reset' || (status !== null && GRPC_FAULTS.has(Number(status)) && outcome === undefined);
        if (failed && report.failures.length < 20) report.failures.push({ request: `${r.label} ${JSON.stringify(r.metadata).slice(0, 200)}`, status: s, body: `${message.slice(0, 200)} (${(performance.now() - t0).toFixed(0)} ms)` });
        // a stream the server is still writing is cancelled; one it ended closes by itself (a
        // RST_STREAM after the server's END_STREAM counts as an invalid frame against the connection)
        if (stream && !stream.closed && (outcome === 'OK(message)' || outcome === 'timeout')) stream.close(http2.constants.NGHTTP2_CANCEL);
        resolve();
      };
      const timer = setTimeout(() => finish('timeout'), timeoutMs);
      try {
        stream = sessionFor(w % sessions.length).request({ ':method': 'POST', ':path': r.path, 'content-type': 'application/grpc', te: 'trailers', ...r.metadata });
      } catch (e) {
        // a header this client cannot send is no request at all
        clearTimeout(timer);
        settled = true;
        report.histogram['client-refused'] = (report.histogram['client-refused'] ?? 0) + 1;
        return resolve();
      }
      stream.on('error', () => undefined);
      const take = (h: Record<string, unknown>) => {
        if (h['grpc-status'] !== undefined) {
          status = String(h['grpc-status']);
          try {
            message = decodeURIComponent(String(h['grpc-message'] ?? ''));
          } catch {
            message = String(h['grpc-message'] ?? '');
          }
        }
      };
      stream.on('response', (h) => {
        take(h);
        if (status !== null) finish();
      });
      // a stream's first message is its answer
      stream.on('data', () => finish(status === null ? 'OK(message)' : undefined));
      stream.on('trailers', (h) => {
        take(h);
        finish();
      });
      stream.on('close', () => finish());
      stream.end(r.body);
    });
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (next < reqs.length) await one(reqs[next++]!, w);
    }),
  );
  for (const s of sessions) s?.destroy();
  return report;
}
