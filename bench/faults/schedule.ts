/**
 * The nemesis schedule: a pure function of (seed, duration). The same seed gives the same
 * schedule (printed at the start of every run). Faults on one resource never overlap; faults on
 * different resources do.
 */

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type FaultKind =
  | 'kill-api'
  | 'kill-worker'
  | 'term-api'
  | 'term-worker'
  | 'pg-restart'
  | 'pg-stop'
  | 'pg-partition'
  | 'pg-delay'
  | 'redis-restart'
  | 'redis-stop'
  | 'redis-partition'
  | 'redis-delay'
  | 'push-flaky';

export interface PlannedFault {
  /** ms after the start of the load. */
  at: number;
  kind: FaultKind;
  /** `A` / `B` (APIs), `W1` / `W2` (workers), `pg`, `redis`, `push`. */
  target: string;
  /** How long the fault lasts (ms): the down time of a killed process, the outage, the partition. */
  durationMs: number;
}

const KINDS: Array<{ kind: FaultKind; targets: string[]; min: number; max: number }> = [
  { kind: 'kill-api', targets: ['A', 'B'], min: 1_000, max: 4_000 },
  { kind: 'kill-worker', targets: ['W1', 'W2'], min: 1_000, max: 4_000 },
  { kind: 'term-api', targets: ['A', 'B'], min: 1_000, max: 2_000 },
  { kind: 'term-worker', targets: ['W1', 'W2'], min: 1_000, max: 2_000 },
  { kind: 'pg-restart', targets: ['pg'], min: 0, max: 0 },
  { kind: 'pg-stop', targets: ['pg'], min: 10_000, max: 10_000 },
  { kind: 'pg-partition', targets: ['pg'], min: 3_000, max: 8_000 },
  { kind: 'pg-delay', targets: ['pg'], min: 4_000, max: 10_000 },
  { kind: 'redis-restart', targets: ['redis'], min: 0, max: 0 },
  { kind: 'redis-stop', targets: ['redis'], min: 10_000, max: 10_000 },
  { kind: 'redis-partition', targets: ['redis'], min: 3_000, max: 8_000 },
  { kind: 'redis-delay', targets: ['redis'], min: 4_000, max: 10_000 },
  { kind: 'push-flaky', targets: ['push'], min: 3_000, max: 8_000 },
];

/** Time a resource stays reserved after a fault of `kind` starts (ms): its duration plus recovery. */
function reserved(kind: FaultKind, durationMs: number): number {
  if (kind === 'term-api' || kind === 'term-worker') return durationMs + 25_000; // graceful stop, bounded
  if (kind === 'pg-restart' || kind === 'redis-restart') return 5_000;
  return durationMs + 2_000;
}

/**
 * Faults from 3 s after the start to 5 s before `durationMs`, one every 2–8 s (so they overlap),
 * each on a resource that is free at that time. A smoke run (30 s) is guaranteed one process
 * kill, one PostgreSQL fault and one Redis fault when they fit.
 */
export function planFaults(seed: number, durationMs: number): PlannedFault[] {
  const random = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const busyUntil = new Map<string, number>();
  const plan: PlannedFault[] = [];
  const end = durationMs - 5_000;
  const place = (at: number, candidates: typeof KINDS): boolean => {
    const free = candidates.flatMap((k) => k.targets.filter((t) => (busyUntil.get(t) ?? 0) <= at).map((target) => ({ ...k, target })));
    if (free.length === 0) return false;
    const f = pick(free);
    const durationMs = Math.round(f.min + random() * (f.max - f.min));
    plan.push({ at, kind: f.kind, target: f.target, durationMs });
    busyUntil.set(f.target, at + reserved(f.kind, durationMs));
    return true;
  };
  let t = 3_000;
  // the first three: a process kill, a PostgreSQL fault, a Redis fault (any order)
  const firsts = [KINDS.filter((k) => k.kind.startsWith('kill')), KINDS.filter((k) => k.targets[0] === 'pg'), KINDS.filter((k) => k.targets[0] === 'redis')];
  for (const group of firsts.sort(() => random() - 0.5)) {
    if (t > end) break;
    place(t, group);
    t += Math.round(2_000 + random() * 6_000);
  }
  while (t <= end) {
    place(t, KINDS);
    t += Math.round(2_000 + random() * 6_000);
  }
  return plan;
}

/** One line per fault: `  +12.3 s  pg-stop        pg     10.0 s`. */
export function formatPlan(plan: PlannedFault[]): string {
  return plan.map((f) => `  +${(f.at / 1000).toFixed(1).padStart(6)} s  ${f.kind.padEnd(16)} ${f.target.padEnd(6)} ${(f.durationMs / 1000).toFixed(1)} s`).join('\n');
}

/**
 * The `FAULTS_PG_STOPS` schedule: exactly the PostgreSQL stops given (`stopsS`, seconds each), in
 * that order, nothing else. The load is cut into as many equal slots as there are stops (from 3 s
 * after the start to 5 s before `durationMs`), each stop centred in its slot; a stop longer than
 * its slot starts 3 s after the previous one healed instead (the run then lasts past the load).
 */
export function planPgStops(stopsS: readonly number[], durationMs: number): PlannedFault[] {
  const start = 3_000;
  const slot = Math.max(0, durationMs - 5_000 - start) / Math.max(1, stopsS.length);
  const plan: PlannedFault[] = [];
  let free = start;
  stopsS.forEach((s, i) => {
    const durationMs = Math.round(s * 1000);
    const centred = Math.round(start + i * slot + Math.max(0, slot - durationMs) / 2);
    const at = Math.max(centred, free);
    plan.push({ at, kind: 'pg-stop', target: 'pg', durationMs });
    free = at + durationMs + 3_000;
  });
  return plan;
}
