import { randomBytes } from 'node:crypto';
import { z } from 'zod';

/** OpenTelemetry's rule for its variables: an empty value is the same as unset. */
function emptyAsUnset<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === '' ? undefined : v), schema);
}

/**
 * The process environment, validated once at boot (house style: no `process.env` reads
 * elsewhere). A bad value fails the process with the zod issues.
 */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  /** HTTP port of the API app. */
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  /**
   * Port of the A2A gRPC listener (A2A v1.0 gRPC binding, `lf.a2a.v1.A2AService`) on HOST; unset:
   * no gRPC (and no GRPC interface on cards); 0: a free port (the API logs the one it bound).
   */
  GRPC_PORT: emptyAsUnset(z.coerce.number().int().min(0).max(65535).optional()),
  /** `host:port` written as the GRPC interface's `url` on cards; default: PUBLIC_BASE_URL's host name and the bound GRPC_PORT. */
  GRPC_PUBLIC_ADDRESS: emptyAsUnset(z.string().regex(/^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$/, 'host:port').optional()),
  /**
   * gRPC: calls one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS, per
   * connection): a client queues the others; a stream past it is reset (REFUSED_STREAM).
   */
  GRPC_MAX_CONCURRENT_STREAMS: z.coerce.number().int().min(1).max(100_000).default(100),
  /**
   * gRPC: calls open at once from one client address (an IPv6 address's /64), over all its
   * connections, per API process; past it a new call is RESOURCE_EXHAUSTED before its message is
   * read. 0 = no limit.
   */
  GRPC_MAX_CALLS_PER_ADDRESS: z.coerce.number().int().min(0).default(200),
  /**
   * gRPC: largest request message (bytes) of a call whose metadata carries no valid API key (an
   * anonymous or JWT caller, or a stranger), read before its caller is known; a larger one is
   * RESOURCE_EXHAUSTED at its length prefix, unread. At most REQUEST_BODY_LIMIT_BYTES, the limit of
   * a call whose API key authenticated from its metadata.
   */
  GRPC_PREAUTH_MAX_MESSAGE_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).default(256 * 1024),
  /**
   * gRPC: calls without a valid API key that are still arriving or being admitted, at once per API
   * process; past it a new one is RESOURCE_EXHAUSTED before its message is read (calls whose key
   * authenticated from their metadata are not counted). 0 = no limit.
   */
  GRPC_PREAUTH_MAX_CALLS: z.coerce.number().int().min(0).default(256),
  /** gRPC: the same, per client address (an IPv6 address's /64). 0 = no limit. */
  GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS: z.coerce.number().int().min(0).default(32),
  /**
   * gRPC: longest a call's request may take to arrive (ms), from its start to its message complete
   * and the request half-closed; a slower call is ended DEADLINE_EXCEEDED.
   */
  GRPC_RECEIVE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** gRPC: a connection without a call for this long is closed (GOAWAY) (ms); 0 = never. */
  GRPC_MAX_CONNECTION_IDLE_MS: z.coerce.number().int().min(0).default(300_000),
  /**
   * gRPC: a connection older than this is asked to go (GOAWAY) and its calls get
   * A2A_BLOCKING_TIMEOUT_MS + 5 s to end before it is closed (ms); streams cut so resume on a new
   * connection (`last-event-id`). 0 = never.
   */
  GRPC_MAX_CONNECTION_AGE_MS: z.coerce.number().int().min(0).default(0),
  /** Largest request body accepted (bytes); larger ones are 413 in the surface's error shape. */
  REQUEST_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).default(1024 * 1024),
  /**
   * HTTP: largest body (bytes) of a request whose API key did not authenticate at the edge
   * (anonymous, a JWT, a wrong key): a larger Content-Length is 413 before the body is read, a
   * chunked body is cut with 413. At most REQUEST_BODY_LIMIT_BYTES.
   */
  HTTP_PREAUTH_MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).default(256 * 1024),
  /** HTTP: such requests sending their body at once, per API process; past it 429 before the body is read. 0 = no limit. */
  HTTP_PREAUTH_MAX_BODIES: z.coerce.number().int().min(0).default(256),
  /** HTTP: the same per client address (as TRUST_PROXY yields it). 0 = no limit. */
  HTTP_PREAUTH_MAX_BODIES_PER_ADDRESS: z.coerce.number().int().min(0).default(32),
  /** Longest a request may take to arrive, headers and body (ms); slower ones are cut off (408). */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  /** Longest the request headers may take to arrive (ms). */
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(1000).max(600_000).default(10_000),
  /**
   * Key of the HMAC that signs pagination tokens (ListTasks pageToken, admin cursors). Unset: a
   * random key per process — set it (same value everywhere) when several API instances serve
   * one deployment, or a token from one instance is refused by another.
   */
  PAGE_TOKEN_SECRET: z.string().min(16).default(() => randomBytes(32).toString('base64url')),
  /**
   * Host names (no port) whose Host header may be written into Agent Cards when PUBLIC_BASE_URL
   * is unset; comma-separated. Default: loopback names only.
   */
  TRUSTED_HOSTS: z
    .string()
    .default('localhost,127.0.0.1,[::1]')
    .transform((v) => v.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean)),
  /** Serve the OpenAPI UI and JSON at /docs. */
  DOCS_ENABLED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * Proxies in front of the API whose `X-Forwarded-For` / `-Proto` / `-Host` are believed (Fastify
   * `trustProxy`): empty (none: the client address is the TCP peer), `true` (any), a hop count, or
   * comma-separated addresses / CIDRs (e.g. the ingress controller's pod network). The per-address
   * rate limits and the logs use the client address it yields.
   */
  TRUST_PROXY: z
    .string()
    .default('')
    .transform((v): boolean | number | string[] => {
      const t = v.trim();
      if (t === '' || t === 'false') return false;
      if (t === 'true') return true;
      if (/^\d+$/.test(t)) return Number(t);
      return t.split(',').map((x) => x.trim()).filter((x) => x.length > 0);
    }),
  /** Requests per minute per API key (all instances together, counted in Redis); 0 = off. */
  RATE_LIMIT_PER_KEY: z.coerce.number().int().min(0).default(60_000),
  /** Requests per minute per client address for callers without an API key; 0 = off. */
  RATE_LIMIT_PER_IP: z.coerce.number().int().min(0).default(120_000),
  /**
   * Failed authentications (401) per minute per client address; past it the address's further
   * failed attempts get 429 instead of 401 (valid credentials are still served); 0 = off.
   */
  RATE_LIMIT_AUTH_FAILURES_PER_IP: z.coerce.number().int().min(0).default(30),
  /** Concurrent SSE streams per API key (or client address) per API process; 0 = no limit. */
  MAX_STREAMS_PER_CALLER: z.coerce.number().int().min(0).default(200),
  /**
   * Secret that encrypts Agent Card signing keys at rest (AES-256-GCM); unset: signing is off
   * (no keys can be made, cards are served unsigned). Keep it stable: rotating it makes stored
   * keys unreadable.
   */
  SIGNING_KEY_ENCRYPTION_SECRET: z.string().min(16).optional(),
  /**
   * Encrypts the organizations' runtime secrets at rest (`runtime_secrets`, AES-256-GCM); default:
   * SIGNING_KEY_ENCRYPTION_SECRET. Neither set: runtime secrets cannot be stored (503
   * `runtime_secret.not_configured`) and runs referencing one fail. Keep it stable.
   */
  RUNTIME_SECRET_ENCRYPTION_SECRET: z.string().min(16).optional(),
  /** How long (ms) a process reuses a decrypted runtime secret: a rotation reaches runs within it. */
  RUNTIME_SECRET_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /**
   * Namespaces of worker variables (`secretEnv`) the operator gives organizations explicitly:
   * `<org slug or id>=<TOKEN>,…` — the organization may name `AAAS_RUNTIME_SECRET_<TOKEN>_<NAME>`
   * besides its id's namespace `AAAS_RUNTIME_SECRET_<id, 32 hex digits>_<NAME>`. For keeping the
   * variable names of an older release (`acme-eu=ACME_EU`). Checked at boot so that no variable can
   * have two owners: tokens A-Z0-9 in `_`-separated words, unique, none `<other token>_…`, none
   * beginning with 32 hex digits (an id's namespace), and a one-word token only for the slug it
   * spells (`acme=ACME`: a one-word token is that slug's own namespace). API and workers need the
   * same value. Default: none.
   */
  RUNTIME_SECRET_ENV_NAMESPACES: z.string().default('').transform(parseSecretEnvNamespaces),
  /**
   * Runtime secrets an organization may store (admin API: a create past it is 409
   * `runtime_secret.conflict`). Each value is at most 4096 bytes (printable ASCII, the contract's
   * RuntimeSecretValueSchema), so an organization stores at most this many × 4 KiB of values.
   */
  RUNTIME_SECRETS_MAX_PER_ORG: z.coerce.number().int().min(1).max(100_000).default(100),
  /** Public base URL used in Agent Cards (interfaces' `url`). Defaults to http://localhost:PORT. */
  PUBLIC_BASE_URL: z.string().url().optional(),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/aaas'),
  /**
   * A streaming read replica of DATABASE_URL for lag-tolerant reads (run lists and search, A2A
   * ListTasks, the console's lists, run archive export); unset: every read goes to the primary.
   * A caller that just wrote reads its writes (the replica serves it only once replayed), and a
   * replica that is down or slow is skipped (the primary answers). GetTask, resume, streams and
   * every write stay on the primary.
   */
  DATABASE_READ_URL: emptyAsUnset(z.string().optional()),
  /** Max pg connections per process. */
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  /**
   * Longest wait (ms) for a pg connection, new or from the pool; past it the request answers 503
   * (`service.unavailable`) instead of waiting on a database that does not answer.
   */
  DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /**
   * Longest a statement may run (ms): PostgreSQL's statement_timeout, with a client-side backstop
   * 5 s later for a connection that went silent. Transactions idle this long are ended by the server.
   */
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /**
   * Group commit: run creation statements (and, separately, append statements) in flight at once
   * per process; creations (appends) arriving meanwhile wait and go out together in the next
   * statement (fewer, larger commits under load).
   */
  DATABASE_GROUP_COMMIT_IN_FLIGHT: z.coerce.number().int().min(1).max(100).default(2),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  /** Prefix for BullMQ queues and pub/sub channels (lets tests share one Redis). */
  REDIS_PREFIX: z.string().default('aaas'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Bootstrap: create this organization and admin API key at boot when set (idempotent). */
  BOOTSTRAP_ORG_SLUG: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/).optional(),
  BOOTSTRAP_ORG_NAME: z.string().optional(),
  /** Bootstrap admin key, form `aaas_<prefix>_<secret>` (see ApiKeyService). */
  BOOTSTRAP_ADMIN_KEY: z.string().regex(/^aaas_[A-Za-z0-9]{8}_[A-Za-z0-9]{24,}$/).optional(),
  /**
   * A2A message operations may use an agent resolution (org/agent → active revision + binding)
   * this old (ms); another API instance sees a publish within this time. 0 disables the cache.
   * Agent Cards are always resolved fresh.
   */
  AGENT_CACHE_TTL_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  /** Blocking SendMessage waits at most this long (ms) before returning the task as it is. */
  A2A_BLOCKING_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  /** Streams: how often (ms) each followed run is re-read in case a wake-up was lost. */
  STREAM_POLL_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  /** Streams: newest events kept in memory per followed run (shared by its subscribers). */
  STREAM_RING_SIZE: z.coerce.number().int().min(16).max(100_000).default(256),
  /** Streams: SSE heartbeat comment interval (ms) that keeps idle connections alive. */
  SSE_HEARTBEAT_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
  /**
   * Worker: run executions one worker process holds at once. An execution spends nearly all its
   * time waiting on its backend or upstream (an LLM streaming tokens), which costs memory, not CPU:
   * the default lets one worker hold 4,000 of them, and one agent half of them (a few tens of KB each; `npm run bench:tokens`
   * measures it), and WORKER_HEAP_HIGH_WATER_PCT holds new ones back before memory runs out.
   * Per-org and per-agent shares (EXECUTION_MAX_PER_ORG, EXECUTION_MAX_PER_AGENT) are taken from it.
   */
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(100_000).default(4_000),
  /**
   * Worker: above this share (percent) of its V8 heap limit in use, a worker starts no new
   * execution: dispatches wait parked (and past the parking's size, in the queue) until running
   * ones end and memory falls back under it — back-pressure, not failure. 100 = off.
   */
  WORKER_HEAP_HIGH_WATER_PCT: z.coerce.number().int().min(1).max(100).default(75),
  /**
   * Worker: on shutdown, how long (ms) it waits for its executions to return once aborted; past
   * it the process stops anyway and the runs they held are left to the lease sweeper (resumable
   * ones are resumed). Keep it below the orchestrator's grace period (30 s in deploy/k8s).
   */
  WORKER_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(20_000),
  /**
   * API: on shutdown, how long (ms) in-flight responses may take to finish once the server stops
   * accepting connections; past it every connection left (e.g. a client that stopped reading a
   * large response) is destroyed, so a stop always completes. Keep it below the orchestrator's
   * grace period (30 s in deploy/k8s).
   */
  API_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** Outbox relay: run it in this process (every API process should). */
  OUTBOX_RELAY_ENABLED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /** Outbox relay: how often (ms) it looks for dispatches left by other or earlier processes. */
  OUTBOX_RELAY_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(1_000),
  /** Outbox relay: dispatches moved to BullMQ per batch (one addBulk). */
  OUTBOX_RELAY_BATCH: z.coerce.number().int().min(1).max(10_000).default(500),
  /**
   * Outbox relay: a dispatch still unclaimed this long (ms) after it was enqueued is enqueued again
   * (the worker's claim makes the copy harmless). Sooner when the queue has nothing waiting.
   */
  OUTBOX_REDELIVER_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /**
   * Outbox relay, fast path: at most one `addBulk` per this many ms per process; dispatches
   * committed meanwhile go out together, as fuller jobs (0: as soon as the previous one returned).
   * A process that has not enqueued for this long sends at once, so an idle one adds no delay.
   */
  DISPATCH_COALESCE_MS: z.coerce.number().int().min(0).max(1_000).default(10),
  /** Dispatches per BullMQ job (`run.execute-batch`): a worker takes them together. */
  DISPATCH_BATCH_MAX: z.coerce.number().int().min(1).max(1000).default(32),
  /**
   * Completed `run-execution` jobs BullMQ keeps (the newest N; 0: removed at once). Keeping them
   * costs Redis commands per job; the run's log already says what each execution did.
   */
  QUEUE_KEEP_COMPLETED_JOBS: z.coerce.number().int().min(0).max(1_000_000).default(0),
  /** Worker: serve Prometheus metrics at http://WORKER_METRICS_HOST:<port>/metrics (unset: off). */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  WORKER_METRICS_HOST: z.string().default('127.0.0.1'),
  /**
   * Executions running longer than a quarter of this renew a lease on their run every this many
   * ms; a run whose lease expired (its executor died) is failed within 2 heartbeats by a sweeper
   * (the API's or a worker's).
   */
  EXECUTION_HEARTBEAT_MS: z.coerce.number().int().min(200).max(600_000).default(10_000),
  /**
   * Executions: how many times a run whose execution was lost (its worker died, its lease expired)
   * is given a new execution when its runtime is resumable; past that the run fails with the
   * reason. Hand-offs by a gracefully stopping worker do not count. 0 = never resume.
   */
  EXECUTION_MAX_RESUMPTIONS: z.coerce.number().int().min(0).max(100).default(3),
  /**
   * Executions: how long (ms) an execution keeps retrying, with backoff, a database call that
   * failed because the database was unreachable (event appends, its lease, its reads) before it
   * gives up and its run fails; 0 = no retry.
   */
  EXECUTION_OUTAGE_RETRY_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /**
   * Executions of one organization running at once across all workers, at most (0 = no per-org
   * limit). Below it, each organization's share adapts to the organizations active now:
   * max(1, floor(slots / active organizations)), slots being the live workers' concurrency (unset: that share only).
   */
  EXECUTION_MAX_PER_ORG: z.coerce.number().int().min(0).optional(),
  /** Executions of one agent running at once across all workers (default: half of WORKER_CONCURRENCY; 0 = no limit). */
  EXECUTION_MAX_PER_AGENT: z.coerce.number().int().min(0).optional(),
  /**
   * Executions: how long (ms) the slot of an execution that ended, with nothing parked in its
   * worker, is kept there for the next dispatch of its organization and agent (taken without a
   * round trip to Redis; docs/architecture.md "Slots handed on"). 0 = given back at once.
   */
  EXECUTION_SPARE_SLOT_MS: z.coerce.number().int().min(0).max(10_000).default(50),
  /**
   * Default storage quota of an organization in bytes (messages and artifacts of its runs), for
   * organizations whose own quota (organizations.storage_quota_bytes, set by a platform key) is
   * unset. 0 or unset = unlimited. New tasks and messages past it: `org.storage_quota_exceeded`;
   * an agent's write past it fails its run ("the organization's storage quota is exhausted").
   */
  ORG_STORAGE_QUOTA_BYTES: z.coerce.number().int().min(0).default(0),
  /**
   * Worker: how often (ms) the delta rows of `org_storage` (an organization's stored bytes, which
   * the append statement sums to check a runtime's writes against the quota) are folded into one
   * row per organization; 0 = never (the sums stay exact, each check reads more rows).
   */
  ORG_STORAGE_FOLD_MS: z.coerce.number().int().min(0).default(250),
  /** Worker: a non-terminal, unblocked run with no live job for this long (ms) is failed. */
  RUN_STALE_AFTER_MS: z.coerce.number().int().min(1000).default(60_000),
  /** Worker: how often (ms) the sweeper looks for lost runs. */
  RUN_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).default(5_000),
  /** Worker: how often (ms) the retention job removes expired runs (docs/architecture.md "Retention"); 0 = never. */
  RETENTION_INTERVAL_MS: z.coerce.number().int().min(0).default(300_000),
  /**
   * Worker: how often (ms) the delta rows of `run_counts` (ListTasks' totalSize, docs/architecture.md
   * "Counting runs") are folded; 0 = never (counts stay exact, the sum reads more rows).
   */
  RUN_COUNTS_FOLD_MS: z.coerce.number().int().min(0).default(1_000),
  /** Worker: runs removed per retention statement (one transaction each). */
  RETENTION_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  /**
   * Worker: when set, the retention job writes each batch's runs as a run archive (JSON Lines,
   * `<dir>/<org id>/runs-<time>-<id>.jsonl`, fsynced) before it removes them; unset = no archive.
   */
  RETENTION_ARCHIVE_DIR: z.string().min(1).optional(),
  /**
   * Worker: when set (`s3://bucket[/prefix]`), the retention job writes each batch's runs as a run
   * archive object `<prefix>/<org id>/runs-<time>-<batch id>.jsonl` in that S3-compatible bucket
   * (checked: size and ETag) before it removes them. Not with RETENTION_ARCHIVE_DIR. Credentials
   * come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, roles).
   */
  RETENTION_ARCHIVE_S3_URL: z
    .string()
    .regex(/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/, 's3://bucket[/prefix]')
    .optional(),
  /** Worker: the S3 endpoint of a non-AWS server (MinIO, Ceph, R2…), e.g. `http://minio:9000`; unset = AWS. */
  RETENTION_ARCHIVE_S3_ENDPOINT: z.string().url().optional(),
  /** Worker: the bucket's region; unset = the SDK's (AWS_REGION, profile). */
  RETENTION_ARCHIVE_S3_REGION: z.string().min(1).optional(),
  /** Worker: path-style addressing (`<endpoint>/<bucket>/<key>`), as MinIO-style servers need. */
  RETENTION_ARCHIVE_S3_FORCE_PATH_STYLE: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  /** Worker: one S3 request's timeout (ms; connecting: at most 5000 of it). */
  RETENTION_ARCHIVE_S3_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /**
   * API: bytes of one run archive import's body (POST /v1/run-archive, JSON Lines). A larger body is
   * refused with 413 `archive.too_large` as the byte past the limit arrives (or at once, from its
   * Content-Length), nothing imported. The body is spooled to ARCHIVE_IMPORT_SPOOL_DIR while it is
   * read, so this is also the most disk one import takes. Default 512 MiB.
   */
  ARCHIVE_IMPORT_MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(64 * 1024 ** 3).default(512 * 1024 * 1024),
  /**
   * API: bytes of one line (one run) of an archive import. A longer line is refused with 413
   * `archive.line_too_long` (details: line, maxLineBytes) before more of it is read, nothing
   * imported: what one line can cost in memory and parse time. Default 16 MiB.
   */
  ARCHIVE_IMPORT_MAX_LINE_BYTES: z.coerce.number().int().min(1024).max(1024 ** 3).default(16 * 1024 * 1024),
  /**
   * API: deepest nesting (objects and arrays) of one archive line, the line object itself counted
   * as 1. Deeper: 422 `archive.too_deep` (details: line, maxDepth), found by a linear scan before
   * the line is parsed, nothing imported. Default 64 (request bodies: 64 too, MAX_JSON_DEPTH).
   */
  ARCHIVE_IMPORT_MAX_DEPTH: z.coerce.number().int().min(8).max(1000).default(64),
  /**
   * API: statement_timeout (ms) of each statement of an import's write transaction (one batch of at
   * most 100 runs or 4 MiB of lines each). Past it the import rolls back whole and answers 503
   * `service.unavailable`. The transaction opens only once the whole body was read, checked and
   * spooled, so a slow client never holds a connection. Default 60 s.
   */
  ARCHIVE_IMPORT_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  /**
   * API: import write transactions one process runs at once (each holds one pg connection of
   * DATABASE_POOL_MAX); more wait their turn. Default 2.
   */
  ARCHIVE_IMPORT_MAX_CONCURRENT_WRITES: z.coerce.number().int().min(1).max(50).default(2),
  /** API: directory where an import's checked lines are spooled until its write (unset: the OS temp directory). */
  ARCHIVE_IMPORT_SPOOL_DIR: emptyAsUnset(z.string().min(1).optional()),
  /**
   * Worker: the period of one `run_events` partition (docs/architecture.md "The log's partitions"):
   * `month` (UTC calendar months), `week` (ISO weeks, Monday 00:00 UTC) or `day` (UTC days).
   */
  RUN_EVENTS_PARTITION_INTERVAL: z.enum(['month', 'week', 'day']).default('month'),
  /** Worker: periods kept created ahead of the current one (the current one included: at least 1). */
  RUN_EVENTS_PARTITIONS_AHEAD: z.coerce.number().int().min(1).max(120).default(3),
  /** Worker: how often (ms) partition maintenance runs (it also runs at boot); 0 = at boot only. */
  RUN_EVENTS_PARTITION_MAINTENANCE_MS: z.coerce.number().int().min(0).default(3_600_000),

  // ---------------------------------------------------------------- tenant patterns, schemas and rules
  // Budgets of what a tenant's revision may make a process do (docs/deploy.md "Budgets of tenant
  // patterns, schemas and rules"): checked when a revision is drafted or published (422 naming the
  // field and the limit), and per message. Every pattern runs on RE2 (linear time) besides.
  /** Structured-input extension: largest `params.schema`, as JSON (UTF-8 bytes). */
  STRUCTURED_INPUT_SCHEMA_MAX_BYTES: z.coerce.number().int().min(256).max(1024 * 1024).default(16_384),
  /** Structured-input extension: deepest nesting of the schema's JSON (objects and arrays). */
  STRUCTURED_INPUT_SCHEMA_MAX_DEPTH: z.coerce.number().int().min(2).max(64).default(16),
  /**
   * Structured-input extension: the schema's JSON values with every `$ref` expanded, each pattern
   * counting its RE2 program size besides (what compiling it and validating one value cost).
   */
  STRUCTURED_INPUT_SCHEMA_MAX_NODES: z.coerce.number().int().min(16).max(100_000).default(256),
  /** Structured-input extension: longest `pattern` / `patternProperties` key (characters). */
  STRUCTURED_INPUT_PATTERN_MAX_CHARS: z.coerce.number().int().min(16).max(10_000).default(256),
  /**
   * Structured-input extension: a message's DataParts, their `data` as JSON text (characters, a
   * string counting its length and quotes, escapes not counted); more is refused.
   */
  STRUCTURED_INPUT_DATA_MAX_CHARS: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).default(65_536),
  /**
   * Structured-input extension: a message's DataParts may hold at most this divided by the
   * schema's nodes JSON values (each value is checked against at most every node); more is refused.
   */
  STRUCTURED_INPUT_VALIDATION_BUDGET: z.coerce.number().int().min(1024).default(131_072),
  /**
   * Structured-input extension: pattern matching one message may cost, in character-instructions
   * (a string tested costs its length + 8 times the pattern's RE2 program size); past it the message is refused.
   */
  STRUCTURED_INPUT_PATTERN_BUDGET: z.coerce.number().int().min(1024).default(262_144),
  /** Scripted runtime: rules per revision. */
  SCRIPTED_MAX_RULES: z.coerce.number().int().min(1).max(100_000).default(64),
  /** Scripted runtime: longest `match.text` (characters). */
  SCRIPTED_PATTERN_MAX_CHARS: z.coerce.number().int().min(16).max(100_000).default(256),
  /** Scripted runtime: the RE2 program sizes of all `match.text` patterns of a revision together (instructions). */
  SCRIPTED_RULES_MAX_PROGRAM_SIZE: z.coerce.number().int().min(64).max(10_000_000).default(2_048),
  /**
   * Scripted runtime: what matching the rules against one message may cost, in
   * character-instructions: the rules see the first ⌊budget / (their program sizes + 8 per rule)⌋
   * characters of the message text (at most SCRIPTED_MATCH_TEXT_MAX_CHARS).
   */
  SCRIPTED_MATCH_BUDGET: z.coerce.number().int().min(1024).default(262_144),
  /** Scripted runtime: most characters of a message's text the rules are matched against. */
  SCRIPTED_MATCH_TEXT_MAX_CHARS: z.coerce.number().int().min(16).default(4_096),
  /**
   * `http` and `a2a` runtimes: the largest answer a worker reads whole from a tenant's backend or
   * upstream (bytes): an `http` backend's `application/json` answer; an `a2a` upstream's JSON-RPC /
   * HTTP+JSON answers (SendMessage, GetTask, CancelTask, error bodies). Refused from its
   * Content-Length before it is read, else once that many bytes arrived; the run fails ("… answer
   * exceeds N bytes"). What one execution can make its worker hold is a few times this.
   */
  RUNTIME_MAX_ANSWER_BYTES: z.coerce.number().int().min(64 * 1024).max(64 * 1024 * 1024).default(4 * 1024 * 1024),
  /**
   * `http` and `a2a` runtimes: the largest event of a streamed answer (bytes): an `http` backend's
   * NDJSON line or SSE event, an `a2a` upstream's SSE event (from the last blank line, comments
   * included). At most 4 MiB: `@a2a-js/sdk`'s SSE parser refuses larger events itself.
   */
  RUNTIME_MAX_EVENT_BYTES: z.coerce.number().int().min(64 * 1024).max(4 * 1024 * 1024).default(4 * 1024 * 1024),

  // ---------------------------------------------------------------- push notifications
  /**
   * Encrypts push configs' secrets at rest (authentication credentials, the Standard Webhooks
   * signing secret); default: SIGNING_KEY_ENCRYPTION_SECRET. Neither set: push is not served.
   */
  PUSH_ENCRYPTION_SECRET: z.string().min(16).optional(),
  /**
   * Networks push deliveries may reach although they are not public unicast (CIDRs, comma
   * separated), e.g. `127.0.0.0/8,::1/128` for local development and tests. Default: none.
   */
  PUSH_ALLOWED_CIDRS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x.length > 0)),
  /** One delivery attempt's timeout (ms): connect, send and response. */
  PUSH_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(60_000).default(15_000),
  /** First retry delay (ms); doubles per failure with full jitter, capped by PUSH_RETRY_MAX_DELAY_MS. */
  PUSH_RETRY_BASE_MS: z.coerce.number().int().min(10).default(1_000),
  PUSH_RETRY_MAX_DELAY_MS: z.coerce.number().int().min(100).default(300_000),
  /** After failing this long (ms) without a success a config is marked failing and no longer delivered. */
  PUSH_RETRY_BUDGET_MS: z.coerce.number().int().min(1_000).default(6 * 3600 * 1000),
  /** Worker: how often (ms) configs that are behind (lost signal, retry due) are picked up. */
  PUSH_SWEEP_INTERVAL_MS: z.coerce.number().int().min(50).default(1_000),
  /** Worker: configs delivered at once (each config's events go out one by one, in order). */
  PUSH_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(64),
  /** Networks the `http` runtime may reach although not public unicast (CIDRs, comma separated). Default: none. */
  HTTP_RUNTIME_ALLOWED_CIDRS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x.length > 0)),
  /**
   * Networks a `jwt` binding's issuer (OIDC discovery, JWKS) may be fetched from although they are
   * not public unicast (CIDRs, comma separated), e.g. an in-cluster identity provider. Default: none.
   */
  JWT_ISSUER_ALLOWED_CIDRS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x.length > 0)),
  /**
   * How long (ms) a JWT issuer's discovery document or key set that could not be read (or did not
   * match) is answered from that failure without fetching it again, so bogus tokens cannot make the
   * service hammer a failing issuer; 0 = fetch on every call.
   */
  JWT_ISSUER_FAILURE_TTL_MS: z.coerce.number().int().min(0).max(300_000).default(5_000),
  /** Push configs one task may have. */
  PUSH_MAX_CONFIGS_PER_TASK: z.coerce.number().int().min(1).max(100).default(10),
  /**
   * Push configs an organization may have in delivery at once (not deleted, status active: the
   * ones the workers deliver, until their task ends or they give up); a set past it:
   * `push.too_many_configs`.
   */
  PUSH_MAX_ACTIVE_CONFIGS_PER_ORG: z.coerce.number().int().min(1).max(1_000_000).default(1_000),
  /**
   * Bytes one push config may hold: its URL, token, authentication scheme and credentials (UTF-8),
   * stored with it and sent with each delivery; a set past it: `request.invalid` (A2A InvalidParams).
   */
  PUSH_CONFIG_MAX_BYTES: z.coerce.number().int().min(256).max(1_048_576).default(4_096),

  // ---------------------------------------------------------------- traces (OpenTelemetry)
  // The standard OTel variables; tracing is on when an exporter is named or an OTLP endpoint is
  // set (libs/telemetry `tracingConfigured`). The SDK reads the others it knows itself
  // (OTEL_EXPORTER_OTLP_PROTOCOL, _HEADERS, OTEL_TRACES_SAMPLER, OTEL_BSP_*, ...).
  /** Trace exporters, comma separated: `otlp`, `console`, `none`. Unset: `otlp` when an endpoint is set, else off. */
  OTEL_TRACES_EXPORTER: emptyAsUnset(z.string().optional()),
  /** OTLP endpoint (base URL; traces go to `<endpoint>/v1/traces`). Setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: emptyAsUnset(z.string().url().optional()),
  /** OTLP endpoint for traces only (the full URL). Setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: emptyAsUnset(z.string().url().optional()),
  /** `service.name` of this process's spans; default `aaas-api` / `aaas-worker`. */
  OTEL_SERVICE_NAME: emptyAsUnset(z.string().optional()),
  /** `true`: no tracing whatever else is set. */
  OTEL_SDK_DISABLED: z
    .enum(['true', 'false', ''])
    .default('false')
    .transform((v) => v === 'true'),
}).refine((c) => !(c.RETENTION_ARCHIVE_DIR && c.RETENTION_ARCHIVE_S3_URL), {
  path: ['RETENTION_ARCHIVE_S3_URL'],
  message: 'set RETENTION_ARCHIVE_DIR or RETENTION_ARCHIVE_S3_URL, not both (one archive target)',
});
export type AppConfig = z.infer<typeof ConfigSchema>;

/** Parse an environment (defaults to process.env). Throws an Error listing every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

/** Prefix of the operator-declared runtime secret variables `AAAS_RUNTIME_SECRET_<ORG>_<NAME>` (which organization owns which: libs/runtimes secretEnvOwner). */
export const RUNTIME_SECRET_ENV_PREFIX = 'AAAS_RUNTIME_SECRET_';

/** One entry of RUNTIME_SECRET_ENV_NAMESPACES: the organization (its id, or its slug) owns `AAAS_RUNTIME_SECRET_<token>_*`. */
export interface SecretEnvNamespace {
  org: string;
  token: string;
}

const UUID_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SLUG_KEY = /^[a-z0-9][a-z0-9-]{0,62}$/;
const TOKEN = /^[A-Z0-9]+(?:_[A-Z0-9]+)*$/;

/**
 * RUNTIME_SECRET_ENV_NAMESPACES parsed, or an issue per rule broken (see the variable): every
 * variable name then has at most one owner, whatever organizations exist.
 */
function parseSecretEnvNamespaces(raw: string, ctx: z.RefinementCtx<string>): SecretEnvNamespace[] {
  const out: SecretEnvNamespace[] = [];
  const issue = (message: string) => ctx.addIssue({ code: 'custom', message, input: raw });
  for (const entry of raw.split(',').map((x) => x.trim()).filter((x) => x.length > 0)) {
    const [key = '', token = '', extra] = entry.split('=').map((x) => x.trim());
    if (extra !== undefined || !(UUID_KEY.test(key) || SLUG_KEY.test(key))) {
      issue(`"${entry}": give <org slug or id>=<TOKEN>`);
      continue;
    }
    const org = UUID_KEY.test(key) ? key.toLowerCase() : key;
    if (!TOKEN.test(token) || token.length > 64) issue(`"${entry}": a token is 1..64 characters A-Z, 0-9 in words separated by single _`);
    else if (/^[0-9A-F]{32}(_|$)/.test(token)) issue(`"${entry}": a token beginning with 32 hex digits reads as an organization id's namespace`);
    else if (!token.includes('_') && token !== org.toUpperCase()) {
      issue(`"${entry}": the one-word token ${token} is the namespace of the organization with slug ${token.toLowerCase()}; give a token with _ (e.g. ${token}_X) or map ${token.toLowerCase()}=${token}`);
    } else if (out.some((o) => o.org === org)) issue(`"${entry}": ${org} is mapped twice`);
    else {
      const clash = out.find((o) => o.token === token || o.token.startsWith(`${token}_`) || token.startsWith(`${o.token}_`));
      if (clash) issue(`"${entry}": AAAS_RUNTIME_SECRET_${token}_… and AAAS_RUNTIME_SECRET_${clash.token}_… (${clash.org}) overlap: a variable could belong to both; rename one`);
      else out.push({ org, token });
    }
  }
  return out;
}

/**
 * The value of an operator-declared runtime secret variable (read when asked, not at boot);
 * undefined for any name outside `AAAS_RUNTIME_SECRET_*`, whatever the environment holds: the only
 * variables a runtime may ever read. Which organization may read which is the caller's check.
 */
export function runtimeSecretEnv(name: string, env: Record<string, string | undefined> = process.env): string | undefined {
  if (!name.startsWith(RUNTIME_SECRET_ENV_PREFIX) || name.length === RUNTIME_SECRET_ENV_PREFIX.length) return undefined;
  return env[name] || undefined;
}

/** Nest injection token for AppConfig. */
export const APP_CONFIG = Symbol('APP_CONFIG');
