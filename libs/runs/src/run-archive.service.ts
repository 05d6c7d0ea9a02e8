import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { RunArchiveLineSchema, type ImportRunsResult, type RunArchiveLine } from '#libs/contracts';
import { archiveLines, jsonDeeperThan, type ArchiveLineLimits } from './archive-lines.js';
import { EventLogRepository, type RestoreBatch } from './event-log.repository.js';
import { deriveRunColumns, type DerivedRunColumns } from './run-archive-derive.js';
import { RunArchiveRepository, type ArchiveFilter, type ArchivePosition } from './run-archive.repository.js';
import { StorageQuotas } from './storage-quotas.service.js';

/** Runs per export page (one statement each). */
const EXPORT_PAGE = 100;
/** An import statement carries at most this many runs, or about this many bytes of lines. */
const IMPORT_BATCH_RUNS = 100;
const IMPORT_BATCH_BYTES = 4 * 1024 * 1024;

const CURSOR_RE = /^[0-9]{13}\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Opaque resume token of an export: base64url of `<created_at in epoch ms>.<run id>` of the last
 * run written (the keyset (created_at, id); created_at has millisecond precision).
 */
export function encodeArchiveCursor(p: ArchivePosition): string {
  return Buffer.from(`${String(p.createdAt.getTime()).padStart(13, '0')}.${p.id}`, 'utf8').toString('base64url');
}

/** Throws 422 `request.invalid` (path `cursor`) for anything `encodeArchiveCursor` did not make. */
export function decodeArchiveCursor(cursor: string): ArchivePosition {
  const raw = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!CURSOR_RE.test(raw)) {
    throw new AppError('request.invalid', 'invalid cursor', { details: { issues: [{ path: 'cursor', message: 'not a cursor of a run archive' }] } });
  }
  const [ms, id] = raw.split('.') as [string, string];
  return { createdAt: new Date(Number(ms)), id };
}

/** Bytes a projection row may carry beyond the log content it copies (ids, names, times, metadata keys). */
const PROJECTION_ROW_OVERHEAD_BYTES = 4096;

/**
 * Messages, artifacts and interactions are projections of the run's log: each copies content that
 * the log's events carry (a message its event's, an artifact the sum of its chunks, an interaction
 * its request), so together they cannot outweigh the log's events by more than a bounded overhead
 * per row. An archive whose projections do (content no event carries, which the quota, counting the
 * log, would never see) is refused: 422 `archive.invalid` naming the line.
 */
function checkProjections(line: RunArchiveLine, n: number): void {
  const logBytes = Buffer.byteLength(JSON.stringify(line.events));
  const rows = line.messages.length + line.artifacts.length + line.interactions.length;
  const bytes = Buffer.byteLength(JSON.stringify(line.messages)) + Buffer.byteLength(JSON.stringify(line.artifacts)) + Buffer.byteLength(JSON.stringify(line.interactions));
  const allowed = logBytes + rows * PROJECTION_ROW_OVERHEAD_BYTES;
  if (bytes > allowed) {
    throw invalidLine(n, `its messages, artifacts and interactions weigh ${bytes} bytes, more than the log they project allows (${allowed}): a projection carries no content its log does not`);
  }
}

function invalidLine(n: number, message: string): AppError {
  return new AppError('archive.invalid', `archive line ${n}: ${message}`, { details: { line: n } });
}

/**
 * Run archives (docs/architecture.md "Archives"): an organization's runs with their whole log as
 * JSON Lines (`RunArchiveLineSchema`), and their import into an organization that has no runs.
 *
 * An import is hostile input (issue 43): its body, each line and each line's nesting are bounded
 * (ARCHIVE_IMPORT_MAX_BODY_BYTES, _MAX_LINE_BYTES, _MAX_DEPTH), read in linear time; every
 * bookkeeping column of a run is derived from its log (`deriveRunColumns`), never taken from the
 * archive; the import counts against the storage quota; one import per organization at a time; and
 * the write transaction opens only once the whole body was read and checked (spooled to disk), so
 * a slow client holds a socket and a file, never a database connection.
 */
@Injectable()
export class RunArchives {
  private readonly limits: ArchiveLineLimits;
  private readonly maxDepth: number;
  private readonly statementTimeoutMs: number;
  private readonly spoolDir: string;
  private readonly maxWrites: number;
  /** Organizations with an import running in this process (the transaction's advisory lock covers the others). */
  private readonly importing = new Set<string>();
  private writing = 0;
  private readonly writeQueue: Array<() => void> = [];

  constructor(
    private readonly repo: RunArchiveRepository,
    private readonly log: EventLogRepository,
    private readonly quotas: StorageQuotas,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.limits = { maxBodyBytes: config.ARCHIVE_IMPORT_MAX_BODY_BYTES, maxLineBytes: config.ARCHIVE_IMPORT_MAX_LINE_BYTES };
    this.maxDepth = config.ARCHIVE_IMPORT_MAX_DEPTH;
    this.statementTimeoutMs = config.ARCHIVE_IMPORT_STATEMENT_TIMEOUT_MS;
    this.spoolDir = config.ARCHIVE_IMPORT_SPOOL_DIR ?? tmpdir();
    this.maxWrites = config.ARCHIVE_IMPORT_MAX_CONCURRENT_WRITES;
  }

  /** The body limit in force (bytes): the edge refuses a larger declared Content-Length before reading. */
  get maxBodyBytes(): number {
    return this.limits.maxBodyBytes;
  }

  /**
   * The archive lines (each a JSON object without the trailing newline) of the organization's runs
   * matching `filter`, oldest first by (created_at, id), after `cursor` when given, at most `limit`.
   * Pulls one page of 100 runs at a time, only when the consumer asks: a slow reader holds one page.
   * Each line's `cursor` resumes after that run. Errors: 422 `request.invalid` (a bad cursor).
   */
  async *export(orgId: string, filter: ArchiveFilter, cursor?: string, limit?: number): AsyncGenerator<string> {
    let after = cursor !== undefined ? decodeArchiveCursor(cursor) : null;
    let left = limit ?? Infinity;
    while (left > 0) {
      const want = Math.min(EXPORT_PAGE, left);
      const page = await this.repo.page(orgId, filter, after, want);
      for (const row of page) {
        // the line is a JSON object built by PostgreSQL: the cursor goes in as its first member
        yield `{"cursor":${JSON.stringify(encodeArchiveCursor(row))},${row.line.slice(1)}`;
      }
      left -= page.length;
      if (page.length < want) return;
      after = page.at(-1)!;
    }
  }

  /**
   * Import a JSON Lines body (`body`: its chunks as they arrive) into `orgId`, all or nothing.
   * Agents and revisions are mapped by slug and number to the organization's own.
   * 1. Read: each line is bounded, depth-checked, parsed, validated, its run's bookkeeping columns
   *    derived from its log, and spooled to disk ready to write; no database connection is held.
   * 2. Quota: the runs' stored bytes (derived) plus what the organization stores must fit its quota.
   * 3. Write: one transaction (`EventLogRepository.restore`), batches of up to 100 runs or 4 MiB,
   *    at most ARCHIVE_IMPORT_MAX_CONCURRENT_WRITES per process at once.
   * Errors: 409 `archive.import_in_progress` (another import into the organization runs),
   * 409 `archive.org_not_empty`, 409 `archive.conflict` (a run id exists already), 413
   * `archive.too_large` / `archive.line_too_long`, 422 `archive.too_deep`, 422 `archive.invalid`
   * (a line that is not JSON, not of this format, a log that is not 1..last_sequence or not a run's
   * log, an agent revision the organization lacks, a row refused), 403 `org.storage_quota_exceeded`.
   */
  async import(orgId: string, body: AsyncIterable<Buffer | string>): Promise<ImportRunsResult> {
    if (this.importing.has(orgId)) throw new AppError('archive.import_in_progress', 'another archive import into this organization is running; retry once it has answered');
    this.importing.add(orgId);
    let dir: string | undefined;
    try {
      // refused before the body is read: an organization that has runs
      if (await this.repo.hasRuns(orgId)) throw new AppError('archive.org_not_empty', 'an archive imports only into an organization that has no runs');
      const revisions = await this.repo.revisions(orgId);
      dir = await mkdtemp(path.join(this.spoolDir, 'aaas-import-'));
      const spool = path.join(dir, 'lines.jsonl');
      const storedBytes = await this.spool(orgId, body, revisions, spool);
      const usage = await this.quotas.usage(orgId);
      if (usage.quotaBytes !== null && usage.storedBytes + storedBytes > usage.quotaBytes) {
        throw new AppError(
          'org.storage_quota_exceeded',
          `the archive's runs store ${storedBytes} bytes; the organization stores ${usage.storedBytes} of its ${usage.quotaBytes}-byte storage quota; nothing was imported`,
          { details: { quotaBytes: usage.quotaBytes, storedBytes: usage.storedBytes, importBytes: storedBytes } },
        );
      }
      return await this.whenWriteSlot(() => this.log.restore(orgId, spooledBatches(spool, this.limits.maxLineBytes * 4), { statementTimeoutMs: this.statementTimeoutMs, quotaBytes: usage.quotaBytes }));
    } finally {
      this.importing.delete(orgId);
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
      this.quotas.forget(orgId);
    }
  }

  /** Read, check and convert every line of `body` into `file` (one run's rows per line); the runs' stored bytes. */
  private async spool(orgId: string, body: AsyncIterable<Buffer | string>, revisions: Map<string, { agentId: string; revisionId: string }>, file: string): Promise<number> {
    const out = await open(file, 'w');
    try {
      let n = 0;
      let stored = 0;
      let pending: string[] = [];
      let pendingBytes = 0;
      for await (const bytes of archiveLines(body, this.limits)) {
        n += 1;
        if (bytes.every((c) => c === 0x20 || c === 0x09)) continue;
        if (jsonDeeperThan(bytes, this.maxDepth)) {
          throw new AppError('archive.too_deep', `archive line ${n} nests deeper than ${this.maxDepth} levels (ARCHIVE_IMPORT_MAX_DEPTH)`, { details: { line: n, maxDepth: this.maxDepth } });
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(bytes.toString('utf8'));
        } catch {
          throw invalidLine(n, 'not JSON');
        }
        const line = RunArchiveLineSchema.safeParse(parsed);
        if (!line.success) throw invalidLine(n, line.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
        const target = revisions.get(`${line.data.agent.slug}#${line.data.agent.revision}`);
        if (!target) throw invalidLine(n, `this organization has no agent '${line.data.agent.slug}' with revision ${line.data.agent.revision}`);
        const derived = checkedLog(line.data, n);
        checkProjections(line.data, n);
        stored += derived.stored_bytes;
        const rows = JSON.stringify(toRows(line.data, derived, orgId, target, n));
        pending.push(rows);
        pendingBytes += rows.length;
        if (pendingBytes >= 1024 * 1024) {
          await out.write(`${pending.join('\n')}\n`);
          pending = [];
          pendingBytes = 0;
        }
      }
      if (pending.length > 0) await out.write(`${pending.join('\n')}\n`);
      return stored;
    } finally {
      await out.close();
    }
  }

  /** Run `fn` once fewer than ARCHIVE_IMPORT_MAX_CONCURRENT_WRITES imports of this process are writing. */
  private async whenWriteSlot<R>(fn: () => Promise<R>): Promise<R> {
    if (this.writing >= this.maxWrites) await new Promise<void>((resolve) => this.writeQueue.push(resolve));
    else this.writing += 1;
    try {
      return await fn();
    } finally {
      const next = this.writeQueue.shift();
      if (next) next();
      else this.writing -= 1;
    }
  }
}

/** A line's log checked (1..last_sequence in order, a run's log) and its derived run columns. Errors: 422 `archive.invalid`. */
function checkedLog(line: RunArchiveLine, n: number): DerivedRunColumns {
  const last = line.run.last_sequence;
  if (line.events.length !== last || line.events.some((e, i) => e.sequence !== i + 1)) {
    throw invalidLine(n, `the log must hold sequences 1..${last} in order`);
  }
  const derived = deriveRunColumns(line.events);
  if (typeof derived === 'string') throw invalidLine(n, derived);
  return derived;
}

/** One line's rows for the restore statement: the run row with its derived columns, and its log and projections. */
function toRows(line: RunArchiveLine, derived: DerivedRunColumns, orgId: string, target: { agentId: string; revisionId: string }, n: number): RestoreBatch {
  const b = emptyBatch();
  const runId = line.run.id;
  b.runs.push({ ...line.run, ...derived, org_id: orgId, agent_id: target.agentId, revision_id: target.revisionId, lease_owner: null, lease_trigger: null, lease_expires_at: null, execution_epoch: 0 });
  for (const e of line.events) b.events.push({ ...e, run_id: runId, org_id: orgId });
  for (const m of line.messages) b.messages.push({ ...m, org_id: orgId, agent_id: target.agentId, run_id: runId });
  for (const a of line.artifacts) b.artifacts.push({ ...a, org_id: orgId, run_id: runId });
  for (const i of line.interactions) b.interactions.push({ ...i, org_id: orgId, run_id: runId });
  for (const l of line.links) {
    if (l.child_run_id !== runId) throw invalidLine(n, 'a link of the line must name its run as the child');
    b.links.push({ ...l, org_id: orgId });
  }
  return b;
}

/**
 * The spooled rows (written by `RunArchives.spool`, so trusted) in batches of up to
 * IMPORT_BATCH_RUNS runs or about IMPORT_BATCH_BYTES, read from disk as the transaction asks.
 */
async function* spooledBatches(file: string, maxLineBytes: number): AsyncGenerator<RestoreBatch> {
  let batch = emptyBatch();
  let bytes = 0;
  for await (const raw of archiveLines(createReadStream(file), { maxBodyBytes: Number.MAX_SAFE_INTEGER, maxLineBytes })) {
    const rows = JSON.parse(raw.toString('utf8')) as RestoreBatch;
    for (const k of Object.keys(batch) as Array<keyof RestoreBatch>) batch[k].push(...rows[k]);
    bytes += raw.length;
    if (batch.runs.length >= IMPORT_BATCH_RUNS || bytes >= IMPORT_BATCH_BYTES) {
      yield batch;
      batch = emptyBatch();
      bytes = 0;
    }
  }
  if (batch.runs.length > 0) yield batch;
}

function emptyBatch(): RestoreBatch {
  return { runs: [], events: [], messages: [], artifacts: [], interactions: [], links: [] };
}
