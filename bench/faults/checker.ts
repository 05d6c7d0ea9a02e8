import { foldState, isStatusEvent } from '#libs/runs';
import type { DbSnapshot, History, MessageSeen, TaskSeen, Violation } from './history.js';
import { eventDigests, expectedBackend, expectedScripted, finalTask, logOutput, partsText, userInputs, type BackendStep, type ScriptedConfig } from './output.js';

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
 *   running task got every projected event after the point it was created, and nothing but a
 *   contiguous suffix of them; the config is done once its run ended. The creation point: the API
 *   starts a new config's cursor at the run's last sequence as it reads it just before inserting
 *   the config (libs/a2a push A2APushService.create → libs/push PushConfigService.set), so every
 *   event whose append began after that insert began (run_events.created_at >
 *   push_configs.created_at: both the transaction's start, database clock, ms) is owed, and so is
 *   every projected event after it in the log. An event appended within the few ms between that
 *   read and that insert may or may not be owed (it is accepted either way); a snapshot without
 *   the config's createdAt owes a possibly empty suffix, as before.
 * - `outbox-empty`: no run_dispatches row is left.
 * - `no-expired-lease`: no active run or active push config holds an expired lease.
 * - `lost-only-when-lost`: a run failed as lost ("the execution was lost ...") was not blocked on
 *   its caller at that point (a run waiting on its caller is never failed for it), and one failed
 *   for having "no live job" had not changed for RUN_STALE_AFTER_MS before (`staleAfterMs`; checked
 *   when the events carry their times).
 * - `no-duplicate-operation`: per run, no two events carry the same `payload.opId` (a runtime
 *   operation recorded twice), no two agent messages (in any event) have the same messageId, and
 *   no two `artifact.updated` of one artifact have the same chunk index — the `#<n>` suffix of the
 *   opId when it has one (scripted: `<frame>/<path>#<n>`; http: `<execution>:<artifactId>#<n>`),
 *   else the chunk's place since the artifact's last chunk that does not append (an artifact is
 *   written once per run in the suite). One violation per run, listing what is there twice.
 * - `output-is-script`: each run of an agent given in `opts.agents` has exactly the output its
 *   script defines (output.ts: status changes, blocking interactions, agent messages with their
 *   text, artifact parts with their content, in order; bookkeeping left out) for the inputs its
 *   log holds — nothing twice, nothing missing. A run ended by something else than its script
 *   (canceled, failed by the platform) has a prefix of it, then that end; a run not ended has a
 *   prefix (no-stuck-run judges it). Scripts using steps output.ts does not model are skipped and
 *   counted.
 * - `failed-only-when-declared`: no run ended `failed` except for a declared budget — its reason
 *   says the resumptions were used up ("... (after N resumptions)") or an interaction expired
 *   ("interaction <id> expired"); any other failure (the execution was lost, the agent runtime
 *   failed, a backend's or upstream's error: the suite's agents never fail on their own) is a
 *   violation showing the reason (the event's `reason`, else its message). A run `canceled` had a
 *   cancel sent for it (a `cancel` operation on its task, whatever its outcome).
 * - `acknowledged-tail`: an ok answer that was a terminal Task showed the run's final projection
 *   (output.ts `finalTask`: the state, the status message, the agent messages of its history and
 *   the artifacts' texts); a non-terminal one showed agent messages the log still begins with. A
 *   stream whose opening snapshot was terminal is held to the same; one that saw its final
 *   status update (terminal) saw the run's final state and status message.
 * - `seen-is-logged`: every event a stream client or the push receiver was shown is in the log,
 *   at the sequence it was shown under, with the same projection (output.ts digests: state,
 *   message id and text, artifact id, flags and text) — a payload replaced afterwards, or a log
 *   tail lost with its counter after clients saw it, shows here.
 * - `one-call-per-execution`: the suite's `http` backend got at most 1 + (the run's
 *   `run.execution_resumed` events) requests per `webhook-id` (stable per execution; a resumed
 *   execution reuses its lost predecessor's; the suite configures `retries: 0`, so no retry of
 *   the runtime's own is due), and its upstream A2A agent at most as many new tasks per run of
 *   ours (keyed by the messageId it was sent: the run's originMessageId).
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

function eq<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function show(xs: number[], max = 24): string {
  return xs.length <= max ? `[${xs.join(',')}]` : `[${xs.slice(0, max).join(',')},… (${xs.length})]`;
}

/**
 * What runs of one of the suite's agents must produce (`output-is-script`): a `scripted` runtime's
 * config, or the steps of the suite's own `http` backend / upstream A2A agent.
 */
export type AgentModel = { runtime: 'scripted'; config: ScriptedConfig } | { runtime: 'http' | 'a2a'; steps: readonly BackendStep[] };

export interface CheckOptions {
  /** RUN_STALE_AFTER_MS of the system under test (ms); unset: the stale-time rule is not checked. */
  staleAfterMs?: number;
  /** Agent slug → what its runs must produce; agents not named are not checked by `output-is-script`. */
  agents?: Record<string, AgentModel>;
}

/** Failure reasons that spend a declared budget (libs/execution lost-execution.policy, libs/runs expireInteraction). */
const DECLARED_FAILURE = [/\(after \d+ resumptions\)$/, /^interaction \S+ expired$/];

const seenText = (m: MessageSeen | null) => (m ? `${m.messageId} ${JSON.stringify(m.text)}` : 'none');
const agentMessages = (t: TaskSeen) => t.messages.filter((m) => m.role === 'agent').map(seenText);
const artifactTexts = (t: TaskSeen) => t.artifacts.map((a) => `${a.artifactId} ${JSON.stringify(a.text)}`);

/**
 * How `seen` (a terminal Task a client was shown) differs from `final` (the log's), one clause per
 * field that differs; empty when they agree.
 */
function taskDiff(seen: TaskSeen, final: TaskSeen): string[] {
  const out: string[] = [];
  if (seen.state !== final.state) out.push(`state ${seen.state}, the log's ${final.state}`);
  if (seenText(seen.statusMessage) !== seenText(final.statusMessage)) out.push(`status message ${seenText(seen.statusMessage)}, the log's ${seenText(final.statusMessage)}`);
  const [a, b] = [agentMessages(seen), agentMessages(final)];
  if (a.join('\n') !== b.join('\n')) out.push(`agent messages [${a.join('; ')}], the log's [${b.join('; ')}]`);
  const [x, y] = [artifactTexts(seen), artifactTexts(final)];
  if (x.join('\n') !== y.join('\n')) out.push(`artifacts [${x.join('; ')}], the log's [${y.join('; ')}]`);
  return out;
}

function short(s: string, max = 90): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
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
      const row = dbConfigs.get(`${c.taskId}|${c.path}`);
      let want = projected;
      let point = '';
      if (c.createdWith === 'later') {
        // owed for sure: from the first event whose append began after the config's insert began
        const created = row?.createdAt ? Date.parse(row.createdAt) : NaN;
        const after = (eventsByRun.get(c.taskId) ?? []).filter((e) => e.createdAt !== undefined && Date.parse(e.createdAt) > created).map((e) => e.sequence);
        const from = after.length > 0 ? Math.min(...after) : Infinity;
        const owed = projected.filter((q) => q >= from);
        want = projected.slice(projected.length - Math.max(firsts.length, owed.length));
        point = Number.isNaN(created) ? ', creation point unknown' : from === Infinity ? ', created after the log\'s last event' : `, created before sequence ${from}`;
      }
      const where = `push config ${c.configId ?? c.path} of task ${c.taskId}`;
      if (!eq(firsts, want)) {
        const missing = want.filter((q) => !firsts.includes(q));
        v.push({ property: '', runId: c.taskId, message: `${where} (${c.createdWith}${point}) received ${show(firsts)}, owed ${show(want)}${missing.length ? `; never received ${show(missing)}` : ''}` });
      }
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

  const slugOf = new Map((db.agents ?? []).map((a) => [a.id, a.slug]));
  const resumptionsOf = (runId: string) => (eventsByRun.get(runId) ?? []).filter((e) => e.type === 'run.execution_resumed').length;
  const inputOf = (runId: string) => userInputs(eventsByRun.get(runId) ?? [])[0]?.text ?? '';

  // ------------------------------------------------------------------ no-duplicate-operation
  {
    const v: Violation[] = [];
    let ops = 0;
    for (const r of db.runs) {
      const byOp = new Map<string, number[]>();
      const byMessage = new Map<string, number[]>();
      const byChunk = new Map<string, number[]>();
      const place = new Map<string, number>();
      const add = (m: Map<string, number[]>, k: string, q: number) => m.set(k, [...(m.get(k) ?? []), q]);
      for (const e of eventsByRun.get(r.id) ?? []) {
        const p = e.payload as { opId?: unknown; message?: { role?: string; messageId?: string }; artifactId?: string; append?: boolean };
        if (typeof p.opId === 'string') {
          ops++;
          add(byOp, p.opId, e.sequence);
        }
        if (p.message?.role === 'agent' && p.message.messageId) add(byMessage, p.message.messageId, e.sequence);
        if (e.type === 'artifact.updated') {
          const id = String(p.artifactId);
          const k = p.append ? (place.get(id) ?? -1) + 1 : 0;
          place.set(id, k);
          const suffix = typeof p.opId === 'string' ? /#(\d+)$/.exec(p.opId) : null;
          add(byChunk, `${id}#${suffix ? Number(suffix[1]) : k}`, e.sequence);
        }
      }
      const twice = (m: Map<string, number[]>) => [...m].filter(([, qs]) => qs.length > 1).map(([k, qs]) => `${k} at ${qs.join(', ')}`);
      const parts = [
        ['operation', twice(byOp)],
        ['agent message', twice(byMessage)],
        ['artifact chunk', twice(byChunk)],
      ] as const;
      const found = parts.filter(([, xs]) => xs.length > 0);
      if (found.length === 0) continue;
      const what = found.map(([name, xs]) => `${xs.length} ${name}${xs.length === 1 ? '' : 's'} more than once (${xs.slice(0, 3).join('; ')}${xs.length > 3 ? '; …' : ''})`).join(', ');
      v.push({ property: '', runId: r.id, message: `run ${r.id} (${slugOf.get(r.agentId) ?? r.agentId}, ${r.status}, ${resumptionsOf(r.id)} resumptions): ${what}` });
    }
    prop('no-duplicate-operation', `${db.runs.length} runs, ${ops} operations`, v);
  }

  // ------------------------------------------------------------------ output-is-script
  {
    const v: Violation[] = [];
    let n = 0;
    let skipped = 0;
    const models = opts.agents ?? {};
    for (const r of db.runs) {
      const slug = slugOf.get(r.agentId);
      const model = slug !== undefined ? models[slug] : undefined;
      if (!model) continue;
      const list = eventsByRun.get(r.id) ?? [];
      const inputs = userInputs(list);
      const want = model.runtime === 'scripted' ? expectedScripted(model.config, inputs) : expectedBackend(model.steps, inputs[0]?.text ?? '');
      if (want.end === 'unsupported') {
        skipped++;
        continue;
      }
      n++;
      const out = logOutput(list);
      const got = out.map((x) => x.item);
      if (eq(got, want.items)) continue;
      // ended by someone else (a cancel, the platform's failure): a prefix of the script, then that end
      const scriptBody = want.end === 'terminal' ? want.items.slice(0, -1) : want.items;
      const last = got.at(-1) ?? '';
      const endedOtherwise = TERMINAL.has(r.status) && /^status (canceled|failed|rejected)\b/.test(last) && last.startsWith(`status ${r.status}`);
      const body = endedOtherwise ? got.slice(0, -1) : got;
      const prefixOk = (endedOtherwise || !TERMINAL.has(r.status)) && body.length <= (endedOtherwise ? scriptBody : want.items).length && body.every((x, i) => x === (endedOtherwise ? scriptBody : want.items)[i]);
      if (prefixOk) continue;
      const i = got.findIndex((x, k) => x !== want.items[k]);
      const at = i === -1 ? got.length : i;
      const here = got[at];
      const repeat = here !== undefined && got.indexOf(here) < at ? ` (a repeat of sequence ${out[got.indexOf(here)]!.sequence})` : '';
      const logSide = here !== undefined ? `${short(here)} at sequence ${out[at]!.sequence}${repeat}` : 'nothing more';
      v.push({
        property: '',
        runId: r.id,
        message: `run ${r.id} (${slug}, input ${JSON.stringify(short(inputs[0]?.text ?? '', 40))}, ${r.status}, ${resumptionsOf(r.id)} resumptions): output item ${at + 1} is ${logSide}, the script's is ${want.items[at] !== undefined ? short(want.items[at]!) : 'nothing more'} (log ${got.length} items, script ${want.items.length}${want.end === 'terminal' ? '' : `, ${want.end}`})`,
      });
    }
    prop('output-is-script', `${n} runs${skipped ? ` (${skipped} with steps not modelled skipped)` : ''}`, v);
  }

  // ------------------------------------------------------------------ failed-only-when-declared
  {
    const v: Violation[] = [];
    let failed = 0;
    let declared = 0;
    let canceled = 0;
    const cancelSent = new Set(history.operations.filter((o) => o.kind === 'cancel' && o.taskId).map((o) => o.taskId!));
    for (const r of db.runs) {
      if (r.status !== 'failed' && r.status !== 'canceled') continue;
      const end = [...(eventsByRun.get(r.id) ?? [])].reverse().find((e) => e.type === 'run.status_changed' && (e.payload as { status?: string }).status === r.status);
      const p = (end?.payload ?? {}) as { reason?: string; message?: { parts?: unknown } };
      const reason = p.reason ?? (p.message ? partsText(p.message.parts) : '(no reason)');
      const where = `run ${r.id} (${slugOf.get(r.agentId) ?? r.agentId}, input ${JSON.stringify(short(inputOf(r.id), 40))})`;
      if (r.status === 'failed') {
        failed++;
        if (DECLARED_FAILURE.some((re) => re.test(reason))) declared++;
        else v.push({ property: '', runId: r.id, message: `${where} failed at sequence ${end?.sequence ?? '?'}: ${JSON.stringify(short(reason, 200))} (${resumptionsOf(r.id)} resumptions)` });
      } else {
        canceled++;
        if (!cancelSent.has(r.id)) v.push({ property: '', runId: r.id, message: `${where} was canceled at sequence ${end?.sequence ?? '?'} (${JSON.stringify(short(reason, 120))}) but no cancel was sent for it` });
      }
    }
    prop('failed-only-when-declared', `${failed} failed runs (${declared} on a declared budget), ${canceled} canceled`, v);
  }

  // ------------------------------------------------------------------ acknowledged-tail
  {
    const v: Violation[] = [];
    let n = 0;
    const finals = new Map<string, TaskSeen>();
    const finalOf = (runId: string) => finals.get(runId) ?? finals.set(runId, finalTask(eventsByRun.get(runId) ?? [])).get(runId)!;
    for (const op of history.operations) {
      for (const a of op.attempts) {
        if (a.outcome !== 'ok' || !a.task || !a.taskId || !runs.has(a.taskId)) continue;
        n++;
        const final = finalOf(a.taskId);
        const what = `${op.kind} ${op.id}${op.note ? ` (${op.note})` : ''} on ${a.api} ${a.binding}`;
        if (TERMINAL_A2A[a.task.state]) {
          const diff = taskDiff(a.task, final);
          if (diff.length > 0) v.push({ property: '', operationId: op.id, runId: a.taskId, message: `${what} was answered ${a.task.state} for task ${a.taskId} with ${diff.map((d) => short(d, 400)).join('; ')}` });
        } else {
          const [seen, logged] = [agentMessages(a.task), agentMessages(final)];
          if (!seen.every((m, i) => m === logged[i])) v.push({ property: '', operationId: op.id, runId: a.taskId, message: `${what} was answered ${a.task.state} for task ${a.taskId} with agent messages [${short(seen.join('; '), 300)}], which the log's [${short(logged.join('; '), 300)}] does not begin with` });
        }
      }
    }
    for (const s of history.streams) {
      if (s.taskId === null || !runs.has(s.taskId)) continue;
      const final = finalOf(s.taskId);
      if (s.snapshot && TERMINAL_A2A[s.snapshot.state]) {
        n++;
        const diff = taskDiff(s.snapshot, final);
        if (diff.length > 0) v.push({ property: '', runId: s.taskId, message: `stream ${s.id} opened on a ${s.snapshot.state} snapshot of task ${s.taskId} with ${diff.map((d) => short(d, 400)).join('; ')}` });
      }
      if (s.final && s.finalSeen && TERMINAL_A2A[s.finalSeen.state]) {
        n++;
        const seen = { state: s.finalSeen.state, statusMessage: s.finalSeen.statusMessage };
        if (seen.state !== final.state || seenText(seen.statusMessage) !== seenText(final.statusMessage)) {
          v.push({ property: '', runId: s.taskId, message: `stream ${s.id} ended with ${seen.state} (status message ${seenText(seen.statusMessage)}) at sequence ${s.finalSeen.sequence} of task ${s.taskId}, the log ends ${final.state} (status message ${seenText(final.statusMessage)})` });
        }
      }
    }
    prop('acknowledged-tail', `${n} answers and stream ends`, v);
  }

  // ------------------------------------------------------------------ seen-is-logged
  {
    const v: Violation[] = [];
    let frames = 0;
    const digests = new Map<string, Map<number, string>>();
    const digestsOf = (runId: string) => digests.get(runId) ?? digests.set(runId, eventDigests(eventsByRun.get(runId) ?? [])).get(runId)!;
    const judge = (who: string, runId: string, shown: Array<{ sequence: number; digest?: string }>) => {
      const run = runs.get(runId);
      if (!run) return;
      const logged = new Set((eventsByRun.get(runId) ?? []).map((e) => e.sequence));
      const d = digestsOf(runId);
      const gone = [...new Set(shown.filter((x) => !logged.has(x.sequence)).map((x) => x.sequence))];
      const unprojected = [...new Set(shown.filter((x) => logged.has(x.sequence) && !d.has(x.sequence)).map((x) => x.sequence))];
      const changed = shown.filter((x, i) => x.digest !== undefined && d.has(x.sequence) && d.get(x.sequence) !== x.digest && shown.findIndex((y) => y.sequence === x.sequence && y.digest === x.digest) === i);
      if (gone.length > 0) v.push({ property: '', runId, message: `${who} was shown sequence${gone.length === 1 ? '' : 's'} ${show(gone)} of run ${runId}, which the log does not hold (last sequence ${run.lastSequence}, ${logged.size} events)` });
      if (unprojected.length > 0) v.push({ property: '', runId, message: `${who} was shown sequence${unprojected.length === 1 ? '' : 's'} ${show(unprojected)} of run ${runId}, which the log holds as events no client is shown` });
      for (const x of changed.slice(0, 3)) v.push({ property: '', runId, message: `${who} was shown at sequence ${x.sequence} of run ${runId}: ${short(x.digest!, 200)}; the log's event projects ${short(d.get(x.sequence)!, 200)}` });
    };
    for (const s of history.streams) {
      if (s.taskId === null) continue;
      frames += s.seen.length;
      judge(`stream ${s.id}`, s.taskId, s.seen.map((sequence, i) => ({ sequence, digest: s.frames?.[i] === '?' ? undefined : s.frames?.[i] })));
    }
    const byPath = new Map<string, Array<{ sequence: number; digest?: string }>>();
    const runOfPath = new Map(history.pushConfigs.map((c) => [c.path, c.taskId]));
    for (const r of history.pushReceipts) {
      if (!Number.isFinite(r.sequence)) continue;
      byPath.set(r.path, [...(byPath.get(r.path) ?? []), { sequence: r.sequence, digest: r.digest }]);
    }
    for (const [path, shown] of byPath) {
      const runId = runOfPath.get(path) ?? history.pushReceipts.find((r) => r.path === path)?.taskId;
      if (runId) judge(`push config ${path}`, runId, shown);
    }
    prop('seen-is-logged', `${frames} stream events, ${history.pushReceipts.length} push bodies`, v);
  }

  // ------------------------------------------------------------------ one-call-per-execution
  {
    const v: Violation[] = [];
    const calls = history.backendCalls ?? [];
    const groups = new Map<string, typeof calls>();
    for (const c of calls) {
      if (c.backend === 'a2a' && c.trigger !== 'new') continue; // a follow-up on the upstream task is not a new execution
      const k = `${c.backend}|${c.key}`;
      groups.set(k, [...(groups.get(k) ?? []), c]);
    }
    const byOrigin = new Map(db.runs.map((r) => [r.originMessageId, r]));
    for (const [k, list] of groups) {
      const c = list[0]!;
      const runId = c.backend === 'http' ? (c.runId ?? /^run_(.+)_[0-9a-f]+$/.exec(c.key)?.[1]) : byOrigin.get(c.key)?.id;
      if (!runId || !runs.has(runId)) {
        v.push({ property: '', runId, message: `the ${c.backend === 'http' ? 'http backend' : 'upstream A2A agent'} got ${list.length} request${list.length === 1 ? '' : 's'} for ${k.split('|')[1]}, which names no run in the database` });
        continue;
      }
      const allowed = 1 + resumptionsOf(runId);
      if (list.length <= allowed) continue;
      const when = list.map((x) => `+${(x.at / 1000).toFixed(1)} s${x.trigger ? ` ${x.trigger}` : ''}${x.taskId ? ` (task ${x.taskId})` : ''}`).join(', ');
      const what = c.backend === 'http' ? `the http backend got ${list.length} requests for execution ${c.key}` : `the upstream A2A agent started ${list.length} tasks for messageId ${c.key}`;
      v.push({ property: '', runId, message: `${what} of run ${runId} (its log records ${allowed - 1} resumptions; ${runs.get(runId)!.status}): ${when}` });
    }
    prop('one-call-per-execution', `${groups.size} executions, ${calls.length} backend requests`, v);
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
