/**
 * `npm run bench:exactly-once`: does every run's work happen exactly once (issue #42)? Scenarios
 * that reproduce the duplicates and failures seen on a PostgreSQL stop, a long queue and parked
 * streaming runs through a worker kill, each judged on its EFFECTS (judge.ts): what the runs' logs
 * hold, how often the `http` backend was called per execution, what stream clients saw.
 *
 * Its own PostgreSQL cluster and redis-server (free ports), the API and worker processes from
 * dist/, and the counting `http` backend in this process (world.ts, backend.ts). Scenarios run one
 * after the other (scenarios.ts); each prints its table and verdict. Exit code: 0 every run of
 * every scenario exactly once, 1 violations, 2 the world could not be set up, 130/143 interrupted.
 *
 * Environment (see bench/README.md): EXACTLY_ONCE_SCENARIOS (default all: pg-stop-8, pg-stop-30,
 * queued-300, parking-streams), EXACTLY_ONCE_APP_ENV (`K=V,…` for every API and worker), the sizes
 * EXACTLY_ONCE_PG_*, EXACTLY_ONCE_QUEUED_*, EXACTLY_ONCE_STREAM_*, EXACTLY_ONCE_SETTLE_S,
 * EXACTLY_ONCE_DEADLINE_S, EXACTLY_ONCE_SHOW, EXACTLY_ONCE_OUT.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { cleanupNow, installSignalCleanup } from '../faults/world.js';
import { CountingBackend } from './backend.js';
import { violations, type Verdict } from './judge.js';
import { int, SCENARIOS, type Context, type Outcome } from './scenarios.js';
import { World, parseEnvList } from './world.js';

const log = (s: string) => process.stdout.write(`[exactly-once] ${s}\n`);

const COLUMNS: Array<[string, (o: Outcome) => string]> = [
  ['scenario', (o) => o.name],
  ['runs', (o) => String(o.verdict.runs)],
  ['completed', (o) => String(o.verdict.completed)],
  ['failed', (o) => String(o.verdict.failed + o.verdict.unfinished)],
  ['dup-output runs', (o) => String(o.verdict.duplicatedRuns)],
  ['dup ops', (o) => String(o.verdict.duplicatedOps)],
  ['output ≠', (o) => String(o.verdict.mismatched)],
  ['backend calls', (o) => (o.verdict.backendCalls === null ? '-' : String(o.verdict.backendCalls))],
  ['2nd calls w/o takeover', (o) => (o.verdict.untakenCalls === null ? '-' : `${o.verdict.untakenCalls} (${o.verdict.untakenRuns} runs)`)],
  ['resumptions', (o) => `${o.verdict.resumptions} (${o.verdict.runsResumed} runs)`],
  ['streams bad', (o) => (o.verdict.streams === null ? '-' : `${o.verdict.badStreams}/${o.verdict.streams}`)],
  ['wall', (o) => `${(o.wallMs / 1000).toFixed(0)} s`],
  ['verdict', (o) => (violations(o.verdict).length === 0 ? 'PASS' : 'FAIL')],
];

function table(rows: Outcome[]): string {
  const cells = [COLUMNS.map(([h]) => h), ...rows.map((o) => COLUMNS.map(([, f]) => f(o)))];
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) => `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [line(cells[0]!), `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...cells.slice(1).map(line)].join('\n');
}

function report(o: Outcome, show: number): void {
  const v: Verdict = o.verdict;
  console.log(`\n${table([o])}`);
  for (const n of o.notes) console.log(`  ${n}`);
  for (const f of v.findings.slice(0, show)) console.log(`  run ${f.runId} "${f.input.slice(0, 60)}" (${f.status}): ${f.problems.join('; ')}`);
  if (v.findings.length > show) console.log(`  … ${v.findings.length - show} more runs with findings`);
  for (const p of v.streamProblems.slice(0, show)) console.log(`  ${p}`);
  if (v.streamProblems.length > show) console.log(`  … ${v.streamProblems.length - show} more streams`);
  const bad = violations(v);
  console.log(`[exactly-once] ${o.name}: ${bad.length === 0 ? 'PASS: every run completed once, its output once' : `FAIL: ${bad.join(', ')}`}`);
}

async function main(): Promise<number> {
  if (!existsSync('dist/apps/api/src/main.js') || !existsSync('dist/apps/worker/src/main.js') || !existsSync('scripts/migrate.mjs')) {
    console.error('[exactly-once] run from the repository root after a build (npm run bench:exactly-once builds first)');
    return 2;
  }
  const wanted = (process.env.EXACTLY_ONCE_SCENARIOS ?? SCENARIOS.map((s) => s.name).join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = wanted.filter((w) => !SCENARIOS.some((s) => s.name === w));
  if (unknown.length > 0) {
    console.error(`[exactly-once] unknown scenario(s): ${unknown.join(', ')} (known: ${SCENARIOS.map((s) => s.name).join(', ')})`);
    return 2;
  }
  installSignalCleanup();
  const show = int(process.env.EXACTLY_ONCE_SHOW, 5);
  let world: World;
  const backend = new CountingBackend();
  try {
    world = await World.start(log, process.env.EXACTLY_ONCE_KEEP === '1');
    await backend.start();
  } catch (e) {
    console.error(`[exactly-once] could not set up the world: ${(e as Error).stack ?? e}`);
    return 2;
  }
  const ctx: Context = { world, backend, appEnv: parseEnvList(process.env.EXACTLY_ONCE_APP_ENV), log };
  if (Object.keys(ctx.appEnv).length > 0) log(`every API and worker also gets ${JSON.stringify(ctx.appEnv)}`);
  const outcomes: Outcome[] = [];
  const broken: string[] = [];
  for (const s of SCENARIOS.filter((x) => wanted.includes(x.name))) {
    log(`${s.name}: ${s.describe}`);
    try {
      const got = await s.run(ctx);
      for (const o of got) report(o, show);
      outcomes.push(...got);
    } catch (e) {
      // a scenario that could not be run says so and the next one runs (on a running PostgreSQL)
      console.error(`[exactly-once] ${s.name} could not be run: ${(e as Error).stack ?? e}`);
      broken.push(s.name);
      if (!(await world.pg.running())) await world.pg.start();
    }
  }
  await backend.stop();
  if (outcomes.length > 1) console.log(`\n[exactly-once] all scenarios\n${table(outcomes)}`);
  if (process.env.EXACTLY_ONCE_OUT) writeFileSync(process.env.EXACTLY_ONCE_OUT, JSON.stringify(outcomes, null, 1));
  const failed = outcomes.filter((o) => violations(o.verdict).length > 0);
  console.log(`\n[exactly-once] ${outcomes.length} judged loads, ${failed.length} with violations${failed.length ? `: ${failed.map((o) => o.name).join(', ')}` : ''}${broken.length ? `; not run: ${broken.join(', ')}` : ''}`);
  return failed.length > 0 ? 1 : broken.length > 0 ? 2 : 0;
}

main().then(
  (code) => {
    cleanupNow();
    process.exit(code);
  },
  (e) => {
    console.error(`[exactly-once] ${(e as Error).stack ?? e}`);
    cleanupNow();
    process.exit(2);
  },
);
