import { readFileSync, readdirSync } from 'node:fs';

/** CPU time (user + system) of one process, milliseconds, from /proc/<pid>/stat; 0 when gone. */
export function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after the command name (which may contain spaces) start at ") "
    const rest = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    const ticks = Number(rest[11]) + Number(rest[12]); // utime, stime (fields 14, 15)
    return (ticks * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** USER_HZ: 100 on Linux x86-64 and arm64. */
const CLOCK_TICKS = 100;

/** Pids whose command name (/proc/<pid>/comm) starts with `prefix` (e.g. every `postgres` backend). */
export function pidsByName(prefix: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim().startsWith(prefix)) out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * CPU accounting for named process groups over a window: `start()` snapshots, `stop()` returns
 * the CPU milliseconds each group used since (processes that appeared meanwhile count from 0,
 * processes that exited meanwhile are lost — keep the window on long-lived processes).
 */
export class CpuWindow {
  private before = new Map<number, number>();

  constructor(private readonly groups: Record<string, () => number[]>) {}

  start(): void {
    this.before.clear();
    for (const pids of Object.values(this.groups)) for (const pid of pids()) this.before.set(pid, processCpuMs(pid));
  }

  stop(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, pids] of Object.entries(this.groups)) {
      let ms = 0;
      for (const pid of pids()) ms += Math.max(0, processCpuMs(pid) - (this.before.get(pid) ?? 0));
      out[name] = ms;
    }
    return out;
  }
}
