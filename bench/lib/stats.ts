import { readFileSync } from 'node:fs';
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

  summary(): LatencySummary {
    const sorted = this.buf.slice(0, this.n).sort();
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
