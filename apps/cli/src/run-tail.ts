/**
 * `aaas runs tail`: print a run's events in sequence order as they are appended, until the run
 * has ended and every event of it is printed.
 *
 * Invariant: within one process each event is printed exactly once, in order — the only state is
 * the cursor `after` (the last sequence printed), every page is read with `after=<cursor>`, and
 * events at or below the cursor are dropped. A network error or a 5xx answer (never a 4xx) does
 * not end the tail: it retries with backoff (200 ms doubling to 5 s) from the same cursor, for up
 * to `retryForMs` without an answer.
 *
 * With a cursor file the cursor outlives the process: it is read at start (when the file exists)
 * and written after each page is printed, atomically (write a temporary file, then rename), so a
 * restarted tail starts after the last event the previous one printed. A process killed between
 * printing a page and writing the file (a few microseconds: both are synchronous) prints that
 * page again when restarted; it never skips an event.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError, NetworkError, UsageError, type AdminClient } from './admin-client.js';
import { eventLine, statusText } from './output.js';

const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);
const PAGE = 100;
const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 5_000;

export interface TailOptions {
  client: AdminClient;
  runId: string;
  /** Start after this sequence when there is no cursor file (or it does not exist yet). */
  after: number;
  cursorFile?: string;
  /** Pause between polls when there is nothing new (ms). */
  intervalMs: number;
  /** Give up after this long without a successful call (ms). */
  retryForMs: number;
  /** One JSON line per event (`{ sequence, type, payload }`) instead of `#<seq> <type> <summary>`. */
  json: boolean;
  /** After this long without a new event, say what the run is doing (ms); default 10 s. */
  idleNoticeMs?: number;
  out: (line: string) => void;
  err: (line: string) => void;
}

/** The sequence stored in a cursor file, or null when the file does not exist. Throws `UsageError` on other content. */
export function readCursor(file: string): number | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new UsageError(`cannot read the cursor file ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const n = Number(text.trim());
  if (!text.trim() || !Number.isSafeInteger(n) || n < 0) throw new UsageError(`the cursor file ${file} does not hold a sequence number`);
  return n;
}

/** Replace the cursor file's content atomically: a reader (or a restarted tail) sees the old or the new sequence, never a partial write. */
export function writeCursor(file: string, sequence: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${sequence}\n`);
  renameSync(tmp, file);
}

/** Runs until the run has ended and all its events are printed; throws on a 4xx or once retrying has lasted `retryForMs`. */
export async function tailRun(o: TailOptions): Promise<void> {
  const idleNoticeMs = o.idleNoticeMs ?? 10_000;
  let after = (o.cursorFile ? readCursor(o.cursorFile) : null) ?? o.after;
  let lastEventAt = Date.now();
  let nextNoticeAt = lastEventAt + idleNoticeMs;
  let retryMs = FIRST_RETRY_MS;
  let failingSince: number | null = null;
  for (;;) {
    try {
      const page = await o.client.call<{ events: Array<{ sequence: number; event: { type: string; payload: unknown } }> }>(
        'GET',
        `/v1/runs/${encodeURIComponent(o.runId)}/events?after=${after}&limit=${PAGE}`,
      );
      let printed = 0;
      for (const e of page.events) {
        if (e.sequence <= after) continue;
        o.out(o.json ? JSON.stringify({ sequence: e.sequence, type: e.event.type, payload: e.event.payload }) : eventLine(e, o.runId));
        after = e.sequence;
        printed++;
      }
      if (printed > 0) {
        if (o.cursorFile) writeCursor(o.cursorFile, after);
        lastEventAt = Date.now();
        nextNoticeAt = lastEventAt + idleNoticeMs;
      }
      failingSince = null;
      retryMs = FIRST_RETRY_MS;
      if (page.events.length === PAGE) continue;
      const { run } = await o.client.call<{ run: { status: string; blockedReason: string | null; lastSequence: number } }>('GET', `/v1/runs/${encodeURIComponent(o.runId)}`);
      if (TERMINAL.has(run.status) && run.lastSequence <= after) return;
      const now = Date.now();
      if (now >= nextNoticeAt) {
        o.err(`… still ${statusText(run.status, run.blockedReason)} (${Math.round((now - lastEventAt) / 1000)} s)`);
        nextNoticeAt = now + idleNoticeMs;
      }
      await sleep(o.intervalMs);
    } catch (e) {
      if (!(e instanceof NetworkError || (e instanceof ApiError && e.retryable))) throw e;
      const now = Date.now();
      failingSince ??= now;
      if (now - failingSince >= o.retryForMs) throw new Error(`gave up after ${Math.round((now - failingSince) / 1000)} s without an answer (${e.message})`);
      const reason = e instanceof ApiError ? `HTTP ${e.status}${e.code ? ` ${e.code}` : ''}` : e.reason;
      o.err(`aaas: connection lost (${reason}); retrying from sequence ${after + 1}`);
      await sleep(retryMs);
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    }
  }
}
