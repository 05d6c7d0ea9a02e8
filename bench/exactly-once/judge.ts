import { isProjected } from '../faults/checker.js';
import type { BackendCall } from './backend.js';

/**
 * The exactly-once verdict of a scenario: a pure function of the runs and their logs as the
 * database holds them at the end, the counting backend's calls and what the stream clients saw
 * (no I/O). Per run:
 *
 * - completed exactly once: its final status is `completed` and its log holds exactly one
 *   `run.status_changed` to a terminal status;
 * - no run failed (nor canceled, rejected, or left unfinished);
 * - output exactly once: no two events of the run carry the same `opId`, no output item is there
 *   more often than expected (an unexpected one, such as a failure, more than once), and the projected output
 *   (status changes, agent messages, artifact chunks with their content, in log order) equals
 *   what the script / the backend's deterministic answer produces for its input, exactly;
 * - backend calls (http agents): per run (one trigger, so one `webhook-id`) at most 1 + the number
 *   of `run.execution_resumed` events its log records; a call beyond that is a second execution
 *   nobody took over from ("second calls without a recorded takeover");
 * - streams: what each client saw after its snapshot, across its resumptions with `Last-Event-ID`,
 *   is exactly the log's projected events after that snapshot, in order, no gap, no repeat (up to
 *   the last one it saw; to the end when it saw the end), artifact chunks with the log's content.
 */

/** One row of run_events. */
export interface LogEvent {
  runId: string;
  sequence: number;
  type: string;
  payload: Record<string, unknown>;
  /** When it was committed (ms since the epoch, database clock), for the evidence only. */
  at?: number;
}

/** One row of runs. */
export interface RunRow {
  id: string;
  status: string;
}

/** What one stream client saw of its run (bench/exactly-once/streams.ts). */
export interface StreamRecord {
  client: number;
  messageId: string;
  /** The task its snapshot named (null: no snapshot ever arrived). */
  taskId: string | null;
  /** `id:` of the Task snapshot frame. */
  snapshot: number | null;
  /** Every frame after the snapshot: its `id:` and, for artifact updates, `a:<artifactId>:<text>`. */
  seen: Array<{ id: number; key: string | null }>;
  /** It saw the frame that ends the stream (a terminal status). */
  final: boolean;
  /** Connections it opened (1 + resumptions + retries). */
  connections: number;
  /** Why it gave up, when it did. */
  error?: string;
}

export interface JudgeInput {
  runs: RunRow[];
  events: LogEvent[];
  /** The projected output a run with this input text must have (`outputOf` keys). */
  expected: (input: string) => string[];
  /** The counting backend's calls (http agents only). */
  backendCalls?: readonly BackendCall[];
  streams?: readonly StreamRecord[];
}

export interface RunFinding {
  runId: string;
  input: string;
  status: string;
  /** Its output holds something twice. */
  duplicated: boolean;
  problems: string[];
}

export interface Verdict {
  runs: number;
  completed: number;
  /** failed, canceled or rejected */
  failed: number;
  /** not terminal when judged */
  unfinished: number;
  /** runs whose log holds more than one terminal status change */
  multiTerminal: number;
  /** runs holding an opId twice or an output item more often than the expected output has it (an unexpected one twice) */
  duplicatedRuns: number;
  /** events whose opId an earlier event of the same run carries */
  duplicatedOps: number;
  /** runs whose projected output differs from the expected one (duplicates, gaps, wrong content, failures) */
  mismatched: number;
  /** backend POSTs (null: no http agent) */
  backendCalls: number | null;
  /** POSTs beyond 1 + recorded resumptions, summed over runs */
  untakenCalls: number | null;
  /** runs that saw such a call */
  untakenRuns: number | null;
  /** run.execution_resumed events */
  resumptions: number;
  runsResumed: number;
  streams: number | null;
  /** streams whose frames differ from the log's projection, or that never opened / never saw the end of a finished run */
  badStreams: number | null;
  findings: RunFinding[];
  streamProblems: string[];
}

const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

const texts = (parts: unknown): string =>
  Array.isArray(parts) ? parts.map((p) => (p && typeof p === 'object' && 'text' in p ? String((p as { text: unknown }).text) : '')).join('') : '';

/** One log event as an output item (null: not output), e.g. `status:working`, `message:<text>`, `artifact:<id>:<text>`. */
export function outputItem(e: Pick<LogEvent, 'type' | 'payload'>): string | null {
  const p = e.payload;
  switch (e.type) {
    case 'run.status_changed': {
      const why = (p.message as { parts?: unknown } | undefined)?.parts ? texts((p.message as { parts?: unknown }).parts) : (p.reason as string | undefined);
      return `status:${String(p.status)}${TERMINAL.has(String(p.status)) && p.status !== 'completed' && why ? ` (${why})` : ''}`;
    }
    case 'message.added': {
      const m = p.message as { role?: string; parts?: unknown } | undefined;
      return m?.role === 'agent' ? `message:${texts(m.parts)}` : null;
    }
    case 'artifact.updated':
      return `artifact:${String(p.artifactId)}:${texts(p.parts)}`;
    case 'interaction.requested':
    case 'run.linked':
      return e.type;
    default:
      return null;
  }
}

/** A run's projected output, in log order. */
export const outputOf = (events: readonly LogEvent[]): string[] => events.map(outputItem).filter((x): x is string => x !== null);

/** The input text of a run: its first user message. */
export function inputOf(events: readonly LogEvent[]): string {
  const first = events.find((e) => e.type === 'message.added' && (e.payload.message as { role?: string } | undefined)?.role === 'user');
  return first ? texts((first.payload.message as { parts?: unknown }).parts) : '';
}

/** An artifact update's stream key (what a client compares it by); null for other events. */
export function streamKey(e: Pick<LogEvent, 'type' | 'payload'>): string | null {
  return e.type === 'artifact.updated' ? `a:${String(e.payload.artifactId)}:${texts(e.payload.parts)}` : null;
}

function counts(items: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of items) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
}

const short = (s: string, n = 90) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Where two item lists first differ, for a finding. */
function firstDifference(got: readonly string[], want: readonly string[]): string {
  let i = 0;
  while (i < got.length && i < want.length && got[i] === want[i]) i++;
  return `${got.length} items, want ${want.length}; first difference at #${i}: got ${got[i] === undefined ? '(end)' : `"${short(got[i]!)}"`}, want ${want[i] === undefined ? '(end)' : `"${short(want[i]!)}"`}`;
}

function showSeqs(xs: readonly number[]): string {
  if (xs.length === 0) return '[]';
  const out: string[] = [];
  let start = xs[0]!;
  let prev = start;
  for (const x of [...xs.slice(1), NaN]) {
    if (x === prev + 1) {
      prev = x;
      continue;
    }
    out.push(start === prev ? String(start) : `${start}-${prev}`);
    start = prev = x;
  }
  return `[${out.join(',')}]`;
}

export function judge(input: JudgeInput): Verdict {
  const byRun = new Map<string, LogEvent[]>();
  for (const e of input.events) {
    const list = byRun.get(e.runId) ?? [];
    list.push(e);
    byRun.set(e.runId, list);
  }
  for (const list of byRun.values()) list.sort((a, b) => a.sequence - b.sequence);
  const callsByRun = new Map<string, BackendCall[]>();
  for (const c of input.backendCalls ?? []) callsByRun.set(c.runId, [...(callsByRun.get(c.runId) ?? []), c]);

  const v: Verdict = {
    runs: input.runs.length,
    completed: 0,
    failed: 0,
    unfinished: 0,
    multiTerminal: 0,
    duplicatedRuns: 0,
    duplicatedOps: 0,
    mismatched: 0,
    backendCalls: input.backendCalls ? input.backendCalls.length : null,
    untakenCalls: input.backendCalls ? 0 : null,
    untakenRuns: input.backendCalls ? 0 : null,
    resumptions: 0,
    runsResumed: 0,
    streams: input.streams ? input.streams.length : null,
    badStreams: input.streams ? 0 : null,
    findings: [],
    streamProblems: [],
  };

  for (const run of input.runs) {
    const log = byRun.get(run.id) ?? [];
    const problems: string[] = [];
    const text = inputOf(log);
    const terminals = log.filter((e) => e.type === 'run.status_changed' && TERMINAL.has(String(e.payload.status)));
    if (run.status === 'completed' && terminals.length === 1) v.completed++;
    if (!TERMINAL.has(run.status)) {
      v.unfinished++;
      problems.push(`not finished (${run.status})`);
    } else if (run.status !== 'completed') {
      v.failed++;
      problems.push(`ended ${run.status}${terminals.at(-1) ? `: ${short(outputItem(terminals.at(-1)!) ?? '')}` : ''}`);
    }
    if (terminals.length > 1) {
      v.multiTerminal++;
      problems.push(`${terminals.length} terminal status changes`);
    }

    const seenOps = new Set<string>();
    let dupOps = 0;
    for (const e of log) {
      const op = e.payload.opId;
      if (typeof op !== 'string') continue;
      if (seenOps.has(op)) dupOps++;
      seenOps.add(op);
    }
    const got = outputOf(log);
    const want = input.expected(text);
    const wantCounts = counts(want);
    let excess = 0;
    // an item more often than the expected output has it (an unexpected one, e.g. a failure, counts from its second time)
    for (const [item, n] of counts(got)) excess += Math.max(0, n - Math.max(1, wantCounts.get(item) ?? 0));
    const duplicated = dupOps > 0 || excess > 0;
    if (duplicated) {
      v.duplicatedRuns++;
      v.duplicatedOps += dupOps;
      problems.push(`duplicated output: ${dupOps} events repeat an opId, ${excess} output items beyond the expected`);
    }
    if (got.length !== want.length || got.some((x, i) => x !== want[i])) {
      v.mismatched++;
      problems.push(`output differs: ${firstDifference(got, want)}`);
    }

    const resumed = log.filter((e) => e.type === 'run.execution_resumed').length;
    v.resumptions += resumed;
    if (resumed > 0) v.runsResumed++;
    if (input.backendCalls) {
      const calls = callsByRun.get(run.id) ?? [];
      const ids = new Set(calls.map((c) => c.webhookId));
      const extra = Math.max(0, calls.length - (1 + resumed));
      if (extra > 0) {
        v.untakenCalls! += extra;
        v.untakenRuns!++;
        const kinds = calls.map((c) => c.trigger).join(', ');
        problems.push(`backend called ${calls.length} times (${kinds}; ${ids.size} webhook-id${ids.size === 1 ? '' : 's'}) for ${resumed} recorded resumption${resumed === 1 ? '' : 's'}`);
      } else if (ids.size > 1) {
        problems.push(`backend called under ${ids.size} webhook-ids for one trigger`);
        v.untakenRuns!++;
      }
    }
    if (problems.length > 0) v.findings.push({ runId: run.id, input: text, status: run.status, duplicated, problems });
  }

  // backend calls naming a run the database does not have
  if (input.backendCalls) {
    const known = new Set(input.runs.map((r) => r.id));
    const stray = (input.backendCalls ?? []).filter((c) => !known.has(c.runId));
    if (stray.length > 0) {
      v.untakenCalls! += stray.length;
      v.findings.push({ runId: '(none)', input: '', status: '', duplicated: false, problems: [`${stray.length} backend calls name runs the database does not hold`] });
    }
  }

  if (input.streams) {
    const status = new Map(input.runs.map((r) => [r.id, r.status]));
    for (const s of input.streams) {
      const where = `stream of client ${s.client} (${s.connections} connections${s.taskId ? `, task ${s.taskId}` : ''})`;
      if (s.taskId === null || s.snapshot === null) {
        v.badStreams!++;
        v.streamProblems.push(`${where}: never got its task snapshot${s.error ? ` (${short(s.error, 140)})` : ''}`);
        continue;
      }
      const log = (byRun.get(s.taskId) ?? []).filter((e) => e.sequence > s.snapshot! && isProjected(e));
      const last = s.seen.at(-1)?.id ?? s.snapshot;
      const owed = s.final ? log : log.filter((e) => e.sequence <= last);
      const seenIds = s.seen.map((f) => f.id);
      const owedIds = owed.map((e) => e.sequence);
      if (seenIds.length !== owedIds.length || seenIds.some((q, i) => q !== owedIds[i])) {
        v.badStreams!++;
        v.streamProblems.push(`${where}: from snapshot ${s.snapshot} saw ${showSeqs(seenIds)}, the log projects ${showSeqs(owedIds)}`);
        continue;
      }
      const wrong = owed.findIndex((e, i) => streamKey(e) !== null && streamKey(e) !== s.seen[i]!.key);
      if (wrong >= 0) {
        v.badStreams!++;
        v.streamProblems.push(`${where}: frame ${owed[wrong]!.sequence} carried "${short(s.seen[wrong]!.key ?? '')}", the log "${short(streamKey(owed[wrong]!) ?? '')}"`);
        continue;
      }
      if (!s.final && TERMINAL.has(status.get(s.taskId) ?? '')) {
        v.badStreams!++;
        v.streamProblems.push(`${where}: never saw the end of its ${status.get(s.taskId)} run (last frame ${last})${s.error ? `: ${short(s.error, 140)}` : ''}`);
      }
    }
  }
  return v;
}

/** Violations of a verdict (each a count > 0 with what it counts); empty: exactly once. */
export function violations(v: Verdict): string[] {
  const out: string[] = [];
  const add = (n: number | null, what: string) => n && out.push(`${n} ${what}`);
  add(v.runs - v.completed, 'runs not completed exactly once');
  add(v.failed, 'runs failed');
  add(v.unfinished, 'runs unfinished');
  add(v.duplicatedRuns, `runs with duplicated output (${v.duplicatedOps} duplicated operations)`);
  add(v.mismatched, 'runs whose output is not the expected one');
  add(v.untakenCalls, 'backend calls without a recorded takeover');
  add(v.badStreams, 'streams that differ from the log');
  return out;
}
