import { foldState, isStatusEvent } from '#libs/runs';
import type { DbSnapshot, History, Violation } from './history.js';

/**
 * The fault suite's checker: a pure function of the clients' history and the database at the
 * end (no I/O), returning per property what it checked and what broke.
 *
 * Properties (names as printed):
 * - `acknowledged-exists`: every task an ok answer named is in the database; a terminal state an
 *   ok answer reported is the run's state; an acknowledged cancel left the run canceled; a send
 *   refused on every attempt (connection refused: known not to have arrived) created nothing.
 * - `no-stuck-run`: every run is terminal or blocked on an interaction.
 * - `one-run-per-message`: one run per (agent, caller, messageId), and every ok answer to the
 *   attempts of one send named the same task.
 * - `one-message-per-followup`: a follow-up retried with its messageId is in the log once (at
 *   most once when never acknowledged: as message.added, or inside the interaction.responded it
 *   answers), and in the messages projection at most once.
 * - `gapless-log`: each run's events are exactly 1..last_sequence.
 * - `state-is-fold`: each run's (status, blocked_reason) is the fold of its log (libs/runs foldState
 *   over the newest status-affecting event).
 * - `stream-contiguous`: what a stream client saw after the snapshot, across its resumes, is
 *   exactly the run's projected events after the snapshot, in order, without gap or repeat (up to
 *   the last one seen; to the log's last projected event when it saw the end).
 * - `push-delivered`: each push config set with SendMessage got every projected event of its run
 *   (at least once: repeats ignored), in sequence order of first arrival; one created later on a
 *   running task got a contiguous suffix of them (possibly empty: the task may have ended first);
 *   the config is done once its run ended.
 * - `outbox-empty`: no run_dispatches row is left.
 * - `no-expired-lease`: no active run or active push config holds an expired lease.
 * - `lost-only-when-lost`: a run failed as lost ("the execution was lost ...") was not blocked on
 *   its caller at that point (a run waiting on its caller is never failed for it), and one failed
 *   for having "no live job" had not changed for RUN_STALE_AFTER_MS before (`staleAfterMs`; checked
 *   when the events carry their times).
 */
export interface PropertyReport {
  name: string;
  /** What was checked, e.g. `412 runs`. */
  checked: string;
  violations: Violation[];
}

export interface CheckResult {
  properties: PropertyReport[];
  violations: Violation[];
}

type DbEvent = DbSnapshot['events'][number];

const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);
const TERMINAL_A2A: Record<string, string> = {
  TASK_STATE_COMPLETED: 'completed',
  TASK_STATE_FAILED: 'failed',
  TASK_STATE_CANCELED: 'canceled',
  TASK_STATE_REJECTED: 'rejected',
};

/**
 * True when a log entry yields a stream event / push notification: the table of
 * libs/a2a/src/stream-projection.ts `projectEnvelope` (run.created, the caller's own messages,
 * non-blocking interaction closings, cancellations of interactions and platform bookkeeping
 * yield none).
 */
export function isProjected(e: Pick<DbEvent, 'type' | 'payload'>): boolean {
  switch (e.type) {
    case 'message.added':
      return (e.payload as { message?: { role?: string } }).message?.role === 'agent';
    case 'run.status_changed':
    case 'interaction.requested':
    case 'run.linked':
    case 'run.link_updated':
    case 'artifact.updated':
      return true;
    case 'interaction.responded':
      return isStatusEvent(e);
    case 'interaction.expired':
      return isStatusEvent(e) && (e.payload as { outcome?: string }).outcome === 'continue';
    default:
      return false;
  }
}

function eq(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function show(xs: number[], max = 24): string {
  return xs.length <= max ? `[${xs.join(',')}]` : `[${xs.slice(0, max).join(',')},… (${xs.length})]`;
}

export interface CheckOptions {
  /** RUN_STALE_AFTER_MS of the system under test (ms); unset: the stale-time rule is not checked. */
  staleAfterMs?: number;
}

/** The sweeper's reasons for failing a run whose execution it believes lost (libs/execution run-sweeper). */
const LOST = /^the execution was lost/;

/** Check `history` against `db`. Pure. */
export function check(history: History, db: DbSnapshot, opts: CheckOptions = {}): CheckResult {
  const runs = new Map(db.runs.map((r) => [r.id, r]));
  const eventsByRun = new Map<string, DbEvent[]>();
  for (const e of db.events) {
    const list = eventsByRun.get(e.runId) ?? [];
    list.push(e);
    eventsByRun.set(e.runId, list);
  }
  for (const list of eventsByRun.values()) list.sort((a, b) => a.sequence - b.sequence);
  const projectedOf = (runId: string) => (eventsByRun.get(runId) ?? []).filter(isProjected).map((e) => e.sequence);
  const properties: PropertyReport[] = [];
  const prop = (name: string, checked: string, violations: Violation[]) => properties.push({ name, checked, violations: violations.map((v) => ({ ...v, property: name })) });

  // ------------------------------------------------------------------ acknowledged-exists
  {
    const v: Violation[] = [];
    let n = 0;
    const sendsByMessage = new Map<string, string>();
    for (const r of db.runs) sendsByMessage.set(r.originMessageId, r.id);
    for (const op of history.operations) {
      for (const a of op.attempts) {
        if (a.outcome !== 'ok' || !a.taskId) continue;
        n++;
        const run = runs.get(a.taskId);
        if (!run) {
          v.push({ property: '', operationId: op.id, runId: a.taskId, message: `${op.kind} ${op.id} was acknowledged with task ${a.taskId}, which is not in the database` });
          continue;
        }
        const terminal = a.state ? TERMINAL_A2A[a.state] : undefined;
        if (terminal && run.status !== terminal) {
          v.push({ property: '', operationId: op.id, runId: run.id, message: `${op.kind} ${op.id} was answered ${a.state} but the run is ${run.status}` });
        }
      }
      if (op.kind === 'cancel' && op.outcome === 'ok' && op.taskId) {
        const run = runs.get(op.taskId);
        if (run && run.status !== 'canceled') v.push({ property: '', operationId: op.id, runId: run.id, message: `cancel ${op.id} was acknowledged but the run is ${run.status}` });
      }
      if (op.kind === 'send' && op.outcome === 'fail' && op.messageId && sendsByMessage.has(op.messageId)) {
        v.push({ property: '', operationId: op.id, runId: sendsByMessage.get(op.messageId), message: `send ${op.id} was refused on every attempt, yet run ${sendsByMessage.get(op.messageId)} has its messageId` });
      }
    }
    for (const s of history.streams) {
      if (s.taskId === null) continue;
      n++;
      if (!runs.has(s.taskId)) v.push({ property: '', runId: s.taskId, message: `stream ${s.id} was opened on task ${s.taskId}, which is not in the database` });
    }
    prop('acknowledged-exists', `${n} acknowledgements`, v);
  }

  // ------------------------------------------------------------------ no-stuck-run
  {
    const v: Violation[] = [];
    for (const r of db.runs) {
      if (!TERMINAL.has(r.status) && r.blockedReason === null) {
        v.push({ property: '', runId: r.id, message: `run ${r.id} is ${r.status}, not blocked on an interaction, after the quiet period (last sequence ${r.lastSequence})` });
      }
    }
    prop('no-stuck-run', `${db.runs.length} runs`, v);
  }

  // ------------------------------------------------------------------ one-run-per-message
  {
    const v: Violation[] = [];
    const groups = new Map<string, string[]>();
    for (const r of db.runs) {
      const k = `${r.agentId}|${r.createdBy ?? ''}|${r.originMessageId}`;
      groups.set(k, [...(groups.get(k) ?? []), r.id]);
    }
    for (const [k, ids] of groups) {
      if (ids.length > 1) v.push({ property: '', runId: ids[0], message: `messageId ${k.split('|')[2]} created ${ids.length} runs: ${ids.join(', ')}` });
    }
    let ops = 0;
    for (const op of history.operations) {
      if (op.kind !== 'send') continue;
      ops++;
      const named = [...new Set(op.attempts.filter((a) => a.outcome === 'ok' && a.taskId).map((a) => a.taskId!))];
      if (named.length > 1) v.push({ property: '', operationId: op.id, runId: named[0], message: `send ${op.id} (messageId ${op.messageId}) was answered with ${named.length} different tasks: ${named.join(', ')}` });
    }
    ops += history.streams.length;
    prop('one-run-per-message', `${db.runs.length} runs, ${ops} sends`, v);
  }

  // ------------------------------------------------------------------ one-message-per-followup
  {
    const v: Violation[] = [];
    const logged = new Map<string, string[]>();
    for (const e of db.events) {
      // a user message is logged by message.added, or inside the interaction.responded it answers
      if (e.type !== 'message.added' && e.type !== 'interaction.responded') continue;
      const m = (e.payload as { message?: { messageId?: string; role?: string } }).message;
      if (m?.role !== 'user' || !m.messageId) continue;
      logged.set(m.messageId, [...(logged.get(m.messageId) ?? []), `${e.runId}#${e.sequence}`]);
    }
    const rows = new Map<string, number>();
    for (const m of db.messages) if (m.role === 'user') rows.set(m.messageId, (rows.get(m.messageId) ?? 0) + 1);
    let n = 0;
    for (const op of history.operations) {
      if (op.kind !== 'followup' || !op.messageId) continue;
      n++;
      const at = logged.get(op.messageId) ?? [];
      const retried = op.attempts.length > 1 ? ` (${op.attempts.length} attempts)` : '';
      if (at.length > 1) v.push({ property: '', operationId: op.id, runId: op.taskId, message: `follow-up ${op.id} (messageId ${op.messageId})${retried} is in the log ${at.length} times: ${at.join(', ')}` });
      if (op.outcome === 'ok' && at.length === 0) v.push({ property: '', operationId: op.id, runId: op.taskId, message: `follow-up ${op.id} (messageId ${op.messageId}) was acknowledged but is not in the log` });
      if ((rows.get(op.messageId) ?? 0) > 1) v.push({ property: '', operationId: op.id, runId: op.taskId, message: `follow-up ${op.id} (messageId ${op.messageId}) has ${rows.get(op.messageId)} message rows` });
    }
    prop('one-message-per-followup', `${n} follow-ups`, v);
  }

  // ------------------------------------------------------------------ gapless-log, state-is-fold
  {
    const gaps: Violation[] = [];
    const folds: Violation[] = [];
    let events = 0;
    for (const r of db.runs) {
      const list = eventsByRun.get(r.id) ?? [];
      events += list.length;
      const seqs = list.map((e) => e.sequence);
      const want = Array.from({ length: r.lastSequence }, (_, i) => i + 1);
      if (!eq(seqs, want)) {
        const missing = want.filter((s) => !seqs.includes(s));
        const dup = seqs.filter((s, i) => seqs.indexOf(s) !== i);
        const extra = seqs.filter((s) => s > r.lastSequence || s < 1);
        gaps.push({ property: '', runId: r.id, message: `run ${r.id}: log ${show(seqs)} is not 1..${r.lastSequence}${missing.length ? `; missing ${show(missing)}` : ''}${dup.length ? `; duplicated ${show(dup)}` : ''}${extra.length ? `; outside ${show(extra)}` : ''}` });
      }
      const last = [...list].reverse().find((e) => isStatusEvent(e));
      const folded = foldState(last);
      if (folded.status !== r.status || folded.blockedReason !== r.blockedReason) {
        folds.push({ property: '', runId: r.id, message: `run ${r.id} is (${r.status}, ${r.blockedReason}) but its log folds to (${folded.status}, ${folded.blockedReason})${last ? ` (sequence ${last.sequence} ${last.type})` : ''}` });
      }
    }
    const orphans = [...eventsByRun.keys()].filter((id) => !runs.has(id));
    for (const id of orphans) gaps.push({ property: '', runId: id, message: `events of run ${id}, which has no row` });
    prop('gapless-log', `${db.runs.length} runs, ${events} events`, gaps);
    prop('state-is-fold', `${db.runs.length} runs`, folds);
  }

  // ------------------------------------------------------------------ stream-contiguous
  {
    const v: Violation[] = [];
    let n = 0;
    for (const s of history.streams) {
      if (s.taskId === null || s.snapshotSequence === null || !runs.has(s.taskId)) continue;
      n++;
      const projected = projectedOf(s.taskId).filter((q) => q > s.snapshotSequence!);
      const upTo = s.final ? projected : projected.filter((q) => q <= (s.seen.at(-1) ?? s.snapshotSequence!));
      if (!eq(s.seen, upTo)) {
        v.push({ property: '', runId: s.taskId, message: `stream ${s.id} (${s.connections} connections, from snapshot ${s.snapshotSequence}) saw ${show(s.seen)}, the log projects ${show(upTo)}` });
      } else if (s.final && !TERMINAL.has(runs.get(s.taskId)!.status) && runs.get(s.taskId)!.blockedReason === null) {
        v.push({ property: '', runId: s.taskId, message: `stream ${s.id} ended as final but the run is ${runs.get(s.taskId)!.status}` });
      }
    }
    prop('stream-contiguous', `${n} streams, ${history.streams.reduce((a, s) => a + s.connections, 0)} connections`, v);
  }

  // ------------------------------------------------------------------ push-delivered
  {
    const v: Violation[] = [];
    const byPath = new Map<string, number[]>();
    for (const r of history.pushReceipts) {
      if (r.status < 200 || r.status >= 300) continue;
      byPath.set(r.path, [...(byPath.get(r.path) ?? []), r.sequence]);
    }
    const dbConfigs = new Map(db.pushConfigs.filter((c) => c.deletedAt === null).map((c) => [`${c.runId}|${c.path}`, c]));
    for (const c of history.pushConfigs) {
      const arrivals = byPath.get(c.path) ?? [];
      const firsts = arrivals.filter((q, i) => arrivals.indexOf(q) === i);
      const projected = projectedOf(c.taskId);
      const want = c.createdWith === 'send' ? projected : projected.slice(projected.length - firsts.length);
      const where = `push config ${c.configId ?? c.path} of task ${c.taskId}`;
      if (!eq(firsts, want)) {
        const missing = want.filter((q) => !firsts.includes(q));
        v.push({ property: '', runId: c.taskId, message: `${where} (${c.createdWith}) received ${show(firsts)}, owed ${show(want)}${missing.length ? `; never received ${show(missing)}` : ''}` });
      }
      const row = dbConfigs.get(`${c.taskId}|${c.path}`);
      const run = runs.get(c.taskId);
      if (!row) v.push({ property: '', runId: c.taskId, message: `${where} is not in the database` });
      else if (run && TERMINAL.has(run.status) && row.status !== 'done') v.push({ property: '', runId: c.taskId, message: `${where} is ${row.status} (cursor ${row.cursor}) on a ${run.status} run` });
    }
    prop('push-delivered', `${history.pushConfigs.length} configs, ${history.pushReceipts.length} requests received`, v);
  }

  // ------------------------------------------------------------------ outbox-empty, no-expired-lease
  {
    const v = db.outbox.map((o) => ({ property: '', runId: o.runId, message: `outbox row left for run ${o.runId} (trigger sequence ${o.triggerSequence})` }));
    prop('outbox-empty', `${db.outbox.length} rows`, v);
    const l: Violation[] = [];
    for (const r of db.runs) {
      if (r.leaseExpired && !TERMINAL.has(r.status) && r.blockedReason === null) l.push({ property: '', runId: r.id, message: `run ${r.id} (${r.status}) holds an expired execution lease` });
    }
    for (const c of db.pushConfigs) {
      if (c.leaseExpired && c.status === 'active' && c.deletedAt === null) l.push({ property: '', runId: c.runId, message: `push config ${c.configId} of run ${c.runId} holds an expired delivery lease` });
    }
    prop('no-expired-lease', `${db.runs.length} runs, ${db.pushConfigs.length} push configs`, l);
  }

  // ------------------------------------------------------------------ lost-only-when-lost
  {
    const v: Violation[] = [];
    let n = 0;
    for (const r of db.runs) {
      const list = eventsByRun.get(r.id) ?? [];
      for (let i = 0; i < list.length; i++) {
        const e = list[i]!;
        const reason = (e.payload as { reason?: string }).reason ?? '';
        if (e.type !== 'run.status_changed' || (e.payload as { status?: string }).status !== 'failed' || !LOST.test(reason)) continue;
        n++;
        const before = list.slice(0, i).filter((x) => x.type !== 'interaction.canceled');
        const state = foldState([...before].reverse().find((x) => isStatusEvent(x)));
        if (state.blockedReason !== null) {
          v.push({ property: '', runId: r.id, message: `run ${r.id} was failed at sequence ${e.sequence} ("${reason}") while blocked on its caller (${state.blockedReason} since its log's sequence ${[...before].reverse().find((x) => isStatusEvent(x))?.sequence})` });
          continue;
        }
        const prev = before.at(-1);
        if (opts.staleAfterMs !== undefined && /no live job/.test(reason) && prev?.createdAt && e.createdAt) {
          const quietMs = Date.parse(e.createdAt) - Date.parse(prev.createdAt);
          if (quietMs < opts.staleAfterMs - 1_000) {
            v.push({ property: '', runId: r.id, message: `run ${r.id} was failed at sequence ${e.sequence} ("${reason}") ${quietMs} ms after its sequence ${prev.sequence} (${prev.type}): not stale (${opts.staleAfterMs} ms)` });
          }
        }
      }
    }
    // executions lost (or handed on) and resumed instead: a crash that cost its run nothing
    const resumed = db.runs.reduce((k, r) => k + (eventsByRun.get(r.id) ?? []).filter((e) => e.type === 'run.execution_resumed').length, 0);
    prop('lost-only-when-lost', `${n} runs failed as lost (${resumed} executions resumed)`, v);
  }

  return { properties, violations: properties.flatMap((p) => p.violations) };
}

/** The checker's report, one line per property then each violation, and the closing count line. */
export function formatReport(result: CheckResult, operations: number, faults: number): string {
  const lines: string[] = [];
  for (const p of result.properties) {
    lines.push(`${p.violations.length === 0 ? 'ok  ' : 'FAIL'} ${p.name.padEnd(26)} checked ${p.checked}: ${p.violations.length} violation${p.violations.length === 1 ? '' : 's'}`);
    for (const v of p.violations.slice(0, 20)) lines.push(`       - ${v.message}`);
    if (p.violations.length > 20) lines.push(`       - … and ${p.violations.length - 20} more`);
  }
  lines.push(`faults: ${operations} operations, ${faults} faults, ${result.violations.length} violations`);
  return lines.join('\n');
}
