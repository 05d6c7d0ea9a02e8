#!/usr/bin/env node
// Measures `npm run dev`'s edit loop: the time from saving a one-line edit in libs/ to the API
// answering with the edited code. Starts `node scripts/setup.mjs --dev` (or the command after
// `--`), waits for the API, then N times rewrites one string literal in
// libs/registry/src/agent-directory.ts (the "agent … not found" message) and polls
// GET /a2a/dev-probe/none/.well-known/agent-card.json every 20 ms until the message carries the new
// text. Puts the file back (its modification time too: the next build sees no change) and stops
// the session (as Ctrl-C does) at the end, on an error, on Ctrl-C or SIGTERM. Prints each time, the median
// and the worst, with the load average (the machine may be shared).
// Usage: node scripts/measure-dev-loop.mjs [edits=5] [-- <dev command …>]
//   The environment passes through (PORT, DATABASE_URL, REDIS_PREFIX …); PORT defaults to 3000.
import { spawn } from 'node:child_process';
import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const dash = process.argv.indexOf('--');
const args = dash === -1 ? process.argv.slice(2) : process.argv.slice(2, dash);
const command = dash === -1 ? [process.execPath, 'scripts/setup.mjs', '--dev'] : process.argv.slice(dash + 1);
const edits = Number(args[0] ?? 5);
const port = process.env.PORT ?? '3000';
const probeUrl = `http://127.0.0.1:${port}/a2a/dev-probe/none/.well-known/agent-card.json`;
const file = 'libs/registry/src/agent-directory.ts';
const anchor = 'not found`';
/** Time left to the worker's own restart (node --watch, lower priority) before the next edit (ms). */
const SETTLE_MS = 5_000;
const TIMEOUT_MS = 60_000;
/** The first answer may wait for a build (`npm run dev` compiles what changed first). */
const FIRST_TIMEOUT_MS = 600_000;

const original = readFileSync(file, 'utf8');
if (!original.includes(anchor)) throw new Error(`${file} no longer has the text this script edits (${anchor}): update the script`);
const { atime, mtime } = statSync(file);
// the file as it was, its time included (so the next `tsc -b` does not see a change)
const restore = () => {
  writeFileSync(file, original);
  utimesSync(file, atime, mtime);
};

const dev = spawn(command[0], command.slice(1), { stdio: ['ignore', process.env.MEASURE_VERBOSE ? 'inherit' : 'ignore', 'inherit'], detached: true, env: { ...process.env, PORT: port } });
const stop = () => {
  restore();
  try {
    process.kill(-dev.pid, 'SIGINT'); // the whole group, as Ctrl-C in a terminal
  } catch {
    // already gone
  }
};
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stop();
    process.exit(130);
  });
}

/** Polls the probe URL until `accept(body)` holds; resolves with the ms since `since`. */
async function until(accept, since, timeout = TIMEOUT_MS) {
  while (Date.now() - since < timeout) {
    try {
      const res = await fetch(probeUrl);
      if (accept(await res.text())) return Date.now() - since;
    } catch {
      // not listening (yet, or again)
    }
    if (dev.exitCode !== null) throw new Error(`the dev command exited (code ${dev.exitCode})`);
    await sleep(20);
  }
  throw new Error(`no answer within ${timeout / 1000} s`);
}

const times = [];
try {
  const cold = await until((body) => body.includes('not found'), Date.now(), FIRST_TIMEOUT_MS);
  console.log(`first answer ${cold} ms after starting (${command.join(' ')})`);
  await sleep(SETTLE_MS);
  for (let i = 1; i <= edits; i += 1) {
    const marker = `not found (edit ${i} ${Date.now()})`;
    const started = Date.now();
    writeFileSync(file, original.replace(anchor, `${marker}\``));
    const ms = await until((body) => body.includes(marker), started);
    times.push(ms);
    console.log(`edit ${i}: ${ms} ms (load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')})`);
    await sleep(SETTLE_MS);
  }
} finally {
  stop();
}
const sorted = [...times].sort((a, b) => a - b);
console.log(`edit → answer with the edit: median ${sorted[Math.floor(sorted.length / 2)]} ms, worst ${sorted.at(-1)} ms over ${times.length} edits; ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
