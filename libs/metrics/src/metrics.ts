import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Latency buckets in seconds, from 1 ms to 30 s. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The process's Prometheus metrics (prom-client), exposed as text at `/metrics` by the API and
 * the worker. Every label has a bounded set of values (surface, operation, method, status class,
 * event type, state): never an id. Series names are `aaas_*`; process metrics come from
 * prom-client's defaults (`aaas_process_*`, `aaas_nodejs_*`).
 *
 * Gauges that need a query (queue depth, outbox backlog) are filled at scrape time through
 * `onCollect` callbacks registered by the libs that own the data.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  /** HTTP requests by surface (a2a | admin | card | other), operation, method and status class. */
  readonly httpRequests = new Counter({
    name: 'aaas_http_requests_total',
    help: 'HTTP requests answered, by surface, A2A/admin operation, method and status class',
    labelNames: ['surface', 'operation', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'aaas_http_request_duration_seconds',
    help: 'Time until an HTTP response ended (an SSE stream: its whole life), seconds',
    labelNames: ['surface', 'operation'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  /** gRPC calls (A2A gRPC binding) by RPC method and gRPC status code name (OK, NOT_FOUND, ...). */
  readonly grpcRequests = new Counter({
    name: 'aaas_grpc_requests_total',
    help: 'A2A gRPC calls answered, by method (a2a.proto RPC name) and gRPC status code name',
    labelNames: ['method', 'code'] as const,
    registers: [this.registry],
  });
  readonly grpcDuration = new Histogram({
    name: 'aaas_grpc_request_duration_seconds',
    help: 'Time until an A2A gRPC call ended (a server stream: its whole life), seconds',
    labelNames: ['method'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  /** Events written by the append path, by event type. */
  readonly eventsAppended = new Counter({
    name: 'aaas_run_events_appended_total',
    help: 'Events appended to run logs, by event type',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  readonly appendDuration = new Histogram({
    name: 'aaas_append_duration_seconds',
    help: 'One append-path statement (create = group-committed creation), seconds',
    labelNames: ['kind'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  /** Runs (with their logs and everything of theirs) removed by retention. */
  readonly retentionRunsRemoved = new Counter({
    name: 'aaas_retention_runs_removed_total',
    help: 'Expired terminal runs removed by the retention job, with their logs, projections, links and push configs',
    registers: [this.registry],
  });
  /** Whole `run_events` partitions retention dropped (every run of their range expired) instead of deleting rows. */
  readonly retentionPartitionsDropped = new Counter({
    name: 'aaas_retention_partitions_dropped_total',
    help: 'run_events partitions dropped whole by the retention job (every run of the range expired)',
    registers: [this.registry],
  });
  /** run_events partitions created ahead by the maintenance step. */
  readonly runEventPartitionsCreated = new Counter({
    name: 'aaas_run_events_partitions_created_total',
    help: 'run_events partitions created ahead by partition maintenance',
    registers: [this.registry],
  });
  /** Retention passes by outcome: done, skipped (another process held the lock), failed. */
  readonly retentionPasses = new Counter({
    name: 'aaas_retention_passes_total',
    help: 'Retention passes, by outcome (done | skipped | failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  /** Retention batches kept because their archive could not be written, by target (dir | s3); the next pass retries. */
  readonly retentionArchiveFailures = new Counter({
    name: 'aaas_retention_archive_failures_total',
    help: 'Retention batches whose run archive could not be written (runs kept, retried next pass), by target (dir | s3)',
    labelNames: ['target'] as const,
    registers: [this.registry],
  });
  /** Runs entering a status (terminal statuses included), from the log. */
  readonly runStatus = new Counter({
    name: 'aaas_run_status_changes_total',
    help: 'Runs entering a status (submitted at creation, then each status change)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  /** Source of `aaas_db_lag_tolerant_reads_total` (set by the API when a read replica is configured). */
  lagTolerantReads: (() => { replica: number; primary: number; fallback: number }) | null = null;
  readonly dbReads = (() => {
    const metrics = this;
    return new Counter({
      name: 'aaas_db_lag_tolerant_reads_total',
      help: 'Lag-tolerant reads (lists, search, archive export) by where they went: replica | primary (no replica, or it had not replayed the caller\'s write) | fallback (the replica failed)',
      labelNames: ['target'] as const,
      registers: [this.registry],
      collect() {
        const stats = metrics.lagTolerantReads?.();
        if (!stats) return;
        this.reset();
        for (const target of ['replica', 'primary', 'fallback'] as const) this.inc({ target }, stats[target]);
      },
    });
  })();
  /**
   * Blocking SendMessage answers of the tasks it created, by where the answer came from: `log`
   * (folded from the envelopes the wake-ups carried, nothing read back) or `read` (RunViews.view:
   * a wake-up came without its envelopes, was lost, or the log held what the fold leaves to SQL).
   */
  readonly blockingAnswers = new Counter({
    name: 'aaas_blocking_answers_total',
    help: 'Blocking SendMessage answers of created tasks, by source: log (folded from the committed envelopes the wake-ups carried) | read (read back from PostgreSQL)',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: 'aaas_open_streams',
    help: 'SSE streams open in this process',
    registers: [this.registry],
  });
  readonly streamLag = new Histogram({
    name: 'aaas_stream_lag_seconds',
    help: 'From an event commit to its SSE frame being written, seconds',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly executions = new Counter({
    name: 'aaas_executions_total',
    help: 'Run executions finished in this worker, by outcome (ok | failed | invalid | deferred)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly slotHandOns = new Counter({
    name: 'aaas_execution_slot_hand_ons_total',
    help: 'Execution slots handed from an ended execution to the next parked one of its organization and agent in this worker, without a round trip to the slot sets',
    registers: [this.registry],
  });
  readonly executionsStopped = new Counter({
    name: 'aaas_executions_stopped_total',
    help: 'Executions that stopped without finishing, by why: fenced (a newer execution took the run over; nothing more was written) | let_go (a database outage outlasted EXECUTION_OUTAGE_RETRY_MS; a resumable run is resumed once it is back)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly operationsDropped = new Counter({
    name: 'aaas_runtime_operations_dropped_total',
    help: 'Runtime operations not appended because the run\'s log holds their operation id already (PostgreSQL refused them: run_events_op_id_key)',
    registers: [this.registry],
  });
  readonly resumptions = new Counter({
    name: 'aaas_run_resumptions_total',
    help: 'Lost or handed-on executions, by what became of their run (resumed | handed_on | exhausted: failed past EXECUTION_MAX_RESUMPTIONS | failed: not resumable)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly executionDuration = new Histogram({
    name: 'aaas_execution_duration_seconds',
    help: 'One execution of a runtime for a trigger, seconds',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly jobWait = new Histogram({
    name: 'aaas_job_wait_seconds',
    help: 'From a run.execute job being enqueued to its execution starting, seconds',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly dispatchesRelayed = new Counter({
    name: 'aaas_outbox_relayed_total',
    help: 'Dispatches moved from the outbox to BullMQ, by path (fast | sweep)',
    labelNames: ['path'] as const,
    registers: [this.registry],
  });
  readonly pushDeliveries = new Counter({
    name: 'aaas_push_deliveries_total',
    help: 'Push delivery attempts, by outcome (delivered | error | the HTTP status of a failure)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly pushLag = new Histogram({
    name: 'aaas_push_lag_seconds',
    help: 'From an event commit to its push delivery being acknowledged (2xx), seconds',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly relayFailures = new Counter({
    name: 'aaas_outbox_relay_failures_total',
    help: 'Relay attempts that left dispatches in the outbox (Redis down or slow)',
    registers: [this.registry],
  });
  readonly queueJobs = new Gauge({
    name: 'aaas_queue_jobs',
    help: 'Jobs of the run-execution queue by state (read at scrape time)',
    labelNames: ['state'] as const,
    registers: [this.registry],
    collect: () => this.runCollectors('queue'),
  });
  readonly outboxPending = new Gauge({
    name: 'aaas_outbox_pending',
    help: 'Dispatches waiting in the outbox (read at scrape time)',
    registers: [this.registry],
    collect: () => this.runCollectors('outbox'),
  });

  private readonly collectors = new Map<string, Array<() => Promise<void>>>();

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'aaas_' });
  }

  /** Register a scrape-time callback for a gauge group ('queue' | 'outbox'); it sets the gauge. */
  onCollect(group: 'queue' | 'outbox', fn: () => Promise<void>): void {
    const list = this.collectors.get(group) ?? [];
    list.push(fn);
    this.collectors.set(group, list);
  }

  private async runCollectors(group: string): Promise<void> {
    // a scrape must answer even when Redis or PostgreSQL does not: the gauge keeps its last value
    await Promise.all((this.collectors.get(group) ?? []).map((fn) => withTimeout(fn(), 2_000).catch(() => undefined)));
  }

  /** The exposition text and its content type. */
  async expose(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** Seconds since `startNs` (a `process.hrtime.bigint()` value). */
  static since(startNs: bigint): number {
    return Number(process.hrtime.bigint() - startNs) / 1e9;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error('timeout')), ms)))]).finally(() => clearTimeout(t));
}
