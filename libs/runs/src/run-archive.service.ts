import { Injectable } from '@nestjs/common';
import { AppError } from '#libs/common';
import { RunArchiveLineSchema, type ImportRunsResult, type RunArchiveLine } from '#libs/contracts';
import { EventLogRepository, type RestoreBatch } from './event-log.repository.js';
import { RunArchiveRepository, type ArchiveFilter, type ArchivePosition } from './run-archive.repository.js';

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

function invalidLine(n: number, message: string): AppError {
  return new AppError('archive.invalid', `archive line ${n}: ${message}`, { details: { line: n } });
}

/**
 * Run archives (docs/architecture.md "Archives"): an organization's runs with their whole log as
 * JSON Lines (`RunArchiveLineSchema`), and their import into an organization that has no runs.
 */
@Injectable()
export class RunArchives {
  constructor(
    private readonly repo: RunArchiveRepository,
    private readonly log: EventLogRepository,
  ) {}

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
   * Import archive lines into `orgId`, all or nothing (one transaction; see
   * `EventLogRepository.restore`). Agents and revisions are mapped by slug and number to the
   * organization's own. Lines are read as they come, in batches of up to 100 runs.
   * Errors: 409 `archive.org_not_empty` (the organization has runs), 409 `archive.conflict` (a run
   * id exists already), 422 `archive.invalid` (a line that is not JSON, not of this format, a log
   * that is not 1..last_sequence, an agent revision the organization lacks, a row refused).
   */
  async import(orgId: string, lines: AsyncIterable<string>): Promise<ImportRunsResult> {
    const revisions = await this.repo.revisions(orgId);
    const batches = async function* (): AsyncGenerator<RestoreBatch> {
      let batch = emptyBatch();
      let bytes = 0;
      let n = 0;
      for await (const text of lines) {
        n += 1;
        if (text.trim().length === 0) continue;
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          throw invalidLine(n, 'not JSON');
        }
        const line = RunArchiveLineSchema.safeParse(parsed);
        if (!line.success) throw invalidLine(n, line.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
        const target = revisions.get(`${line.data.agent.slug}#${line.data.agent.revision}`);
        if (!target) throw invalidLine(n, `this organization has no agent '${line.data.agent.slug}' with revision ${line.data.agent.revision}`);
        addLine(batch, line.data, orgId, target, n);
        bytes += text.length;
        if (batch.runs.length >= IMPORT_BATCH_RUNS || bytes >= IMPORT_BATCH_BYTES) {
          yield batch;
          batch = emptyBatch();
          bytes = 0;
        }
      }
      if (batch.runs.length > 0) yield batch;
    };
    return this.log.restore(orgId, batches());
  }
}

function emptyBatch(): RestoreBatch {
  return { runs: [], events: [], messages: [], artifacts: [], interactions: [], links: [] };
}

function addLine(b: RestoreBatch, line: RunArchiveLine, orgId: string, target: { agentId: string; revisionId: string }, n: number): void {
  const runId = line.run.id;
  const last = line.run.last_sequence;
  if (line.events.length !== last || line.events.some((e, i) => e.sequence !== i + 1)) {
    throw invalidLine(n, `the log must hold sequences 1..${last} in order`);
  }
  b.runs.push({ ...line.run, org_id: orgId, agent_id: target.agentId, revision_id: target.revisionId, lease_owner: null, lease_trigger: null, lease_expires_at: null, execution_epoch: 0 });
  for (const e of line.events) b.events.push({ ...e, run_id: runId, org_id: orgId });
  for (const m of line.messages) b.messages.push({ ...m, org_id: orgId, agent_id: target.agentId, run_id: runId });
  for (const a of line.artifacts) b.artifacts.push({ ...a, org_id: orgId, run_id: runId });
  for (const i of line.interactions) b.interactions.push({ ...i, org_id: orgId, run_id: runId });
  for (const l of line.links) {
    if (l.child_run_id !== runId) throw invalidLine(n, 'a link of the line must name its run as the child');
    b.links.push({ ...l, org_id: orgId });
  }
}
