/**
 * Printing of `bench:tokens`: one line per measured run, the median tables per streams count
 * (throughput and latency with ratios to `sdk`; cost per 1,000 chunks; integrity), the slow
 * scenario, and the goals as PASS / MISS lines with figure vs goal.
 */
import { formatTable, round } from '../lib/stats.js';
import type { StreamRow } from './measure.js';
import type { SlowResult } from './slow.js';

const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Median of every numeric leaf over `rows` (same shape); count-like objects (`integrity`, `refused`) summed. */
function mergeRows(rows: StreamRow[]): StreamRow {
  const walk = (vals: unknown[], sum: boolean): unknown => {
    const v0 = vals[0];
    if (typeof v0 === 'number') return sum ? vals.reduce((a: number, b) => a + (b as number), 0) : median(vals as number[]);
    if (v0 === null || typeof v0 !== 'object' || Array.isArray(v0)) return v0;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v0)) out[k] = walk(vals.map((v) => (v as Record<string, unknown> | null)?.[k] ?? null), sum || k === 'integrity' || k === 'refused');
    return out;
  };
  const merged = walk(rows, false) as StreamRow;
  merged.loadAvg = rows.at(-1)!.loadAvg;
  merged.errorSamples = rows.flatMap((r) => r.errorSamples).slice(0, 5);
  return merged;
}

/** Medians per (streams, target), runs in the order first seen. */
export function medians(rows: StreamRow[]): StreamRow[] {
  const groups = new Map<string, StreamRow[]>();
  for (const r of rows) {
    const k = `${r.streams}/${r.target}`;
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.values()].map(mergeRows);
}

const f = (n: number | null | undefined, d = 1) => (n === null || n === undefined || !Number.isFinite(n) ? 'n/a' : String(round(n, d)));
const mb = (kb: number | null) => (kb === null ? '-' : f(kb / 1024, 0));
const integrityText = (r: StreamRow) => `${r.integrity.lost}/${r.integrity.duplicated}/${r.integrity.outOfOrder}`;

/** One line for a measured run (printed as it ends). */
export function runLine(r: StreamRow, repeat: number): string {
  return (
    `  [${repeat}] ${r.target.padEnd(6)} ${String(r.streams).padStart(4)} streams: ${f(r.chunksPerS)} chunks/s, ` +
    `latency p50/p99/max ${f(r.latencyMs.p50)}/${f(r.latencyMs.p99)}/${f(r.latencyMs.max)} ms, first chunk p50/p99 ${f(r.firstChunkMs.p50)}/${f(r.firstChunkMs.p99)} ms, ` +
    `CPU ${f(r.cpuMsPer1k.all)} ms/1k chunks, lost/dup/ooo ${integrityText(r)}, not completed ${r.integrity.notCompleted}, refused ${r.refused.http + r.refused.rpc}, broken ${r.refused.broken}, load ${r.loadAvg.join(' ')}`
  );
}

const GROUPS = ['api', 'worker', 'postgres', 'redis', 'backend'];

/** The median tables, per streams count. */
export function printTables(rows: StreamRow[]): void {
  for (const n of [...new Set(rows.map((r) => r.streams))]) {
    const at = rows.filter((r) => r.streams === n);
    const sdk = at.find((r) => r.target === 'sdk');
    console.log(`\n== ${n} streams (medians) ==`);
    console.log(
      formatTable(
        ['target', 'chunks/s', '×sdk', 'tasks/s', 'lat p50', 'p99', 'max', '+p50 vs sdk', '+p99 vs sdk', '1st p50', '1st p99'],
        at.map((r) => [
          r.target, f(r.chunksPerS), sdk ? f(r.chunksPerS / sdk.chunksPerS, 2) : 'n/a', f(r.tasksPerS),
          f(r.latencyMs.p50), f(r.latencyMs.p99), f(r.latencyMs.max),
          sdk ? f(r.latencyMs.p50 - sdk.latencyMs.p50) : 'n/a', sdk ? f(r.latencyMs.p99 - sdk.latencyMs.p99) : 'n/a',
          f(r.firstChunkMs.p50), f(r.firstChunkMs.p99),
        ]),
      ),
    );
    console.log('(latencies in ms: chunk emit → client receive; 1st = request sent → first chunk)');
    console.log(
      formatTable(
        ['target', ...GROUPS.map((g) => `CPU ${g === 'api' ? 'api/srv' : g}`), 'CPU all', 'SQL/chunk', 'Redis/chunk', 'RSS api MB', 'RSS worker MB'],
        at.map((r) => [r.target, ...GROUPS.map((g) => f(r.cpuMsPer1k[g])), f(r.cpuMsPer1k.all), f(r.sqlPerChunk, 2), f(r.redisPerChunk, 2), mb(r.rssKb.api), mb(r.rssKb.worker)]),
      ),
    );
    console.log('(CPU: ms per 1,000 chunks delivered; api/srv = the SDK server for sdk/direct; backend = NDJSON backend or upstream SDK agent)');
    console.log(
      formatTable(
        ['target', 'tasks', 'lost/dup/ooo', 'not completed', 'unfinished', 'refused http', 'rpc errors', 'broken'],
        at.map((r) => [r.target, String(r.tasks), integrityText(r), String(r.integrity.notCompleted), String(r.integrity.unfinished), String(r.refused.http), String(r.refused.rpc), String(r.refused.broken)]),
      ),
    );
    console.log('(integrity counts summed over the repeats)');
    for (const r of at) if (r.errorSamples.length > 0) console.log(`  ${r.target} errors: ${r.errorSamples.join(' | ')}`);
  }
}

export function printSlow(s: SlowResult): void {
  console.log(`\n== slow: ${s.executions} executions, submitted in ${s.submitS} s ==`);
  console.log(
    formatTable(
      ['executions', 'accepted', 'refused', 'progressing (chunk in last 5 s)', 'executing now / max', 'failed runs', 'worker RSS before→after MB', 'KB per execution', 'KB per executing'],
      [[String(s.executions), String(s.accepted), String(s.refused), String(s.progressing), `${s.executing} / ${s.maxExecuting}`, String(s.failedRuns), `${mb(s.workerRssKb.before)}→${mb(s.workerRssKb.after)}`, f(s.rssKbPerExecution), f(s.rssKbPerExecuting)]],
    ),
  );
  console.log(`  runs by status: ${JSON.stringify(s.statuses)}${s.errorSamples.length ? `; errors: ${s.errorSamples.join(' | ')}` : ''}`);
}

/** PASS / MISS lines with figure vs goal (n/a where the run did not measure it). */
export function goals(rows: StreamRow[], slow: SlowResult | null): string[] {
  const out: string[] = [];
  const line = (ok: boolean | null, text: string) => out.push(`${ok === null ? 'n/a ' : ok ? 'PASS' : 'MISS'}  ${text}`);
  const get = (n: number, t: string) => rows.find((r) => r.streams === n && r.target === t);
  const ours100 = get(100, 'http');
  const sdk100 = get(100, 'sdk');
  const ratio = (a?: StreamRow, b?: StreamRow) => (a && b ? a.chunksPerS / b.chunksPerS : null);
  const r100 = ratio(ours100, sdk100);
  line(r100 === null ? null : r100 >= 0.95, `100 streams: ours http chunks/s ${f(r100, 2)}× sdk (goal ≥ 0.95×)`);
  const add = (a?: StreamRow, b?: StreamRow, k: 'p50' | 'p99' = 'p50') => (a && b ? a.latencyMs[k] - b.latencyMs[k] : null);
  const a50 = add(ours100, sdk100, 'p50');
  const a99 = add(ours100, sdk100, 'p99');
  line(a50 === null ? null : a50 <= 5, `100 streams: added latency p50 ${f(a50)} ms over sdk (goal ≤ 5 ms)`);
  line(a99 === null ? null : a99 <= 50, `100 streams: added latency p99 ${f(a99)} ms over sdk (goal ≤ 50 ms)`);
  line(ours100 ? ours100.firstChunkMs.p50 <= 50 : null, `100 streams: ours http first chunk p50 ${f(ours100?.firstChunkMs.p50)} ms (goal ≤ 50 ms)`);
  const ours300 = get(300, 'http');
  const r300 = ratio(ours300, get(300, 'sdk'));
  line(r300 === null ? null : r300 >= 0.8, `300 streams: ours http chunks/s ${f(r300, 2)}× sdk (goal ≥ 0.8×)`);
  line(ours300 ? ours300.latencyMs.p99 <= 250 : null, `300 streams: ours http latency p99 ${f(ours300?.latencyMs.p99)} ms (goal ≤ 250 ms)`);
  const refused300 = ours300 ? ours300.refused.http + ours300.refused.rpc : null;
  line(refused300 === null ? null : refused300 === 0, `300 streams: ours http requests refused ${refused300 ?? 'n/a'} (non-200 + JSON-RPC errors; goal 0)`);
  line(slow ? slow.progressing >= slow.executions && slow.refused === 0 && slow.failedRuns === 0 : null, `slow: ${slow ? `${slow.progressing} of ${slow.executions}` : 'n/a'} executions progressing, ${slow ? slow.refused + slow.failedRuns : 'n/a'} errors (goal all, 0)`);
  const partial = slow && slow.executing < slow.executions ? ` — but only ${slow.executing} of ${slow.executions} were executing: ${f(slow.rssKbPerExecuting)} KB per executing one` : '';
  line(slow?.rssKbPerExecution != null ? slow.rssKbPerExecution <= 64 : null, `slow: worker RSS ${f(slow?.rssKbPerExecution)} KB per execution (goal ≤ 64 KB)${partial}`);
  for (const n of [...new Set(rows.map((r) => r.streams))]) {
    const d = add(get(n, 'a2a'), get(n, 'direct'), 'p50');
    line(d === null ? null : d <= 5, `${n} streams: a2a runtime adds ${f(d)} ms p50 per chunk over direct (goal ≤ 5 ms)`);
  }
  const bad = rows.reduce((a, r) => ({ lost: a.lost + r.integrity.lost, dup: a.dup + r.integrity.duplicated, ooo: a.ooo + r.integrity.outOfOrder }), { lost: 0, dup: 0, ooo: 0 });
  line(rows.length ? bad.lost + bad.dup + bad.ooo === 0 : null, `integrity, every target: ${bad.lost} lost / ${bad.dup} duplicated / ${bad.ooo} out of order (goal 0/0/0)`);
  return out;
}
