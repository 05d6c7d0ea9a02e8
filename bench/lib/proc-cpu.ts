import { readFileSync, readdirSync } from 'node:fs';

/** USER_HZ: 100 on Linux x86-64 and arm64. */
const CLOCK_TICKS = 100;

/** Fields of /proc/<pid>/stat after the command name (which may contain spaces): index 0 is field 3 (state). */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  } catch {
    return null;
  }
}

/** CPU time (user + system) of one process, milliseconds, from /proc/<pid>/stat; 0 when gone. */
export function processCpuMs(pid: number): number {
  const f = statFields(pid);
  if (!f) return 0;
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS; // utime, stime (fields 14, 15)
}

/**
 * CPU time of one process plus that of its children it has waited for (cutime, cstime: fields
 * 16, 17), milliseconds; 0 when gone. A PostgreSQL backend that exits is reaped by the postmaster,
 * so its CPU moves into the postmaster's children time instead of vanishing.
 */
export function processCpuWithReapedMs(pid: number): number {
  const f = statFields(pid);
  if (!f) return 0;
  return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / CLOCK_TICKS;
}

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

/** `root` and every live descendant of it (e.g. a postmaster and its backends). */
export function processTree(root: number): number[] {
  if (!root) return [];
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const f = statFields(Number(d));
    if (!f) continue;
    const ppid = Number(f[1]);
    const list = children.get(ppid);
    if (list) list.push(Number(d));
    else children.set(ppid, [Number(d)]);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * CPU accounting for named process groups over a window: `start()` snapshots, `stop()` returns
 * the CPU milliseconds each group used since. A group's figure is the change of the sum, over its
 * live processes, of their own CPU plus their reaped children's: a process that appears meanwhile
 * counts from 0, and one that exits meanwhile still counts when a member of the group reaped it
 * (PostgreSQL backends and their postmaster); an exited process nobody in the group reaped is lost.
 */
export class CpuWindow {
  private before = new Map<string, number>();

  constructor(private readonly groups: Record<string, () => number[]>) {}

  private total(pids: number[]): number {
    let ms = 0;
    for (const pid of pids) ms += processCpuWithReapedMs(pid);
    return ms;
  }

  start(): void {
    this.before.clear();
    for (const [name, pids] of Object.entries(this.groups)) this.before.set(name, this.total(pids()));
  }

  stop(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, pids] of Object.entries(this.groups)) out[name] = Math.max(0, this.total(pids()) - (this.before.get(name) ?? 0));
    return out;
  }
}
