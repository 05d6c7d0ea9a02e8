import { readFileSync, readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

/**
 * Wall-clock milliseconds with sub-millisecond resolution, comparable between processes and
 * threads on one machine (`performance.timeOrigin + performance.now()`).
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Growable buffer of float samples (ms). */
export class Samples {
  private buf = new Float64Array(1 << 14);
  private n = 0;

  /** Samples over a copy of `values`. */
  static from(values: Float64Array): Samples {
    const s = new Samples();
    s.buf = values.length > 0 ? values.slice() : s.buf;
    s.n = values.length;
    return s;
  }

  get length(): number {
    return this.n;
  }

  push(v: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.n++] = v;
  }

  /** The samples in order of arrival (a copy). */
  values(): Float64Array {
    return this.buf.slice(0, this.n);
  }

  /** The samples sorted ascending (a copy). */
  sorted(): Float64Array {
    return this.values().sort();
  }

  summary(): LatencySummary {
    const sorted = this.sorted();
    let sum = 0;
    for (const v of sorted) sum += v;
    return {
      count: this.n,
      p50Ms: round(percentile(sorted, 50), 3),
      p90Ms: round(percentile(sorted, 90), 3),
      p99Ms: round(percentile(sorted, 99), 3),
      p999Ms: round(percentile(sorted, 99.9), 3),
      maxMs: round(this.n ? sorted[this.n - 1]! : Number.NaN, 3),
      avgMs: round(this.n ? sum / this.n : Number.NaN, 3),
    };
  }
}

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  avgMs: number;
}

/** Nearest-rank percentile of an ascending-sorted array (NaN when empty). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function round(n: number, digits = 2): number {
  if (!Number.isFinite(n)) return n;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** `os.loadavg()` rounded, as `[1 min, 5 min, 15 min]`. */
export function loadAverage(): [number, number, number] {
  const [a, b, c] = loadavg();
  return [round(a!), round(b!), round(c!)];
}

/** VmRSS of a process in KB, from `/proc/<pid>/status` (Linux); null when unavailable. */
export function vmRssKb(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Prints a left-aligned first column and right-aligned others; returns the text. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** Machine-wide CPU jiffies from `/proc/stat` (Linux), to tell how busy the whole box was. */
export function machineCpu(): { busy: number; total: number } | null {
  try {
    const first = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const v = first.trim().split(/\s+/).slice(1).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** Share of all CPUs busy between two `machineCpu()` readings (0..1), null when unknown. */
export function machineBusy(a: ReturnType<typeof machineCpu>, b: ReturnType<typeof machineCpu>): number | null {
  if (!a || !b || b.total === a.total) return null;
  return round((b.busy - a.busy) / (b.total - a.total), 3);
}

/** Per-process CPU time (ms, user + system) with a label; see `cpuSnapshot`. */
export type CpuSnapshot = Map<number, { label: string; ms: number }>;

/**
 * CPU time of processes on this machine: the given pids under their labels, `redis` for every
 * `redis-server`, and PostgreSQL split by database from each backend's title
 * (`postgres: 15/main: <user> <database> <client> <state>`): `postgres:<database>` for the
 * database given as `pgDatabase`, `postgres:other-dbs` for backends of other databases (other
 * people's tests), `postgres:shared` for the server's own processes (WAL writer, checkpointer…).
 * Read from `/proc/<pid>/stat` (Linux); empty when unavailable.
 */
export function cpuSnapshot(pids: Record<string, number | undefined>, pgDatabase?: string): CpuSnapshot {
  const out: CpuSnapshot = new Map();
  const tick = 10; // ms per jiffy (USER_HZ = 100 on Linux)
  const byPid = new Map<number, string>();
  for (const [label, pid] of Object.entries(pids)) if (pid !== undefined) byPid.set(pid, label);
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const d of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${d}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    let label = byPid.get(Number(d)) ?? (comm === 'postgres' ? 'postgres' : comm === 'redis-server' ? 'redis' : null);
    if (label === 'postgres') label = postgresLabel(d, pgDatabase);
    if (!label) continue;
    const f = stat.slice(close + 2).split(' ');
    out.set(Number(d), { label, ms: (Number(f[11]) + Number(f[12])) * tick }); // utime, stime
  }
  return out;
}

function postgresLabel(pid: string, database: string | undefined): string {
  let title = '';
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return 'postgres:shared';
  }
  // a client backend's title: "postgres: <cluster>: <user> <database> <host(port)|[local]> <state>"
  const m = /^postgres: (?:[^:]+: )?\S+ (\S+) (?:\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\]|\S+\(\d+\))/.exec(title);
  if (!m) return 'postgres:shared';
  return m[1] === database ? `postgres:${database}` : 'postgres:other-dbs';
}

/**
 * CPU ms per label between two snapshots (processes that started in between count from zero;
 * processes that exited in between are missing, so this undercounts short-lived backends).
 */
export function cpuDelta(a: CpuSnapshot, b: CpuSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, v] of b) out[v.label] = (out[v.label] ?? 0) + Math.max(0, v.ms - (a.get(pid)?.ms ?? 0));
  return out;
}

/** A non-negative number from the environment, or `fallback` when unset; throws on anything else. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got '${raw}'`);
  return n;
}
