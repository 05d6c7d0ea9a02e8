#!/usr/bin/env node
// `npm run dev`'s API process: runs the app in this process and, when its compiled code changes,
// closes it and starts it again from fresh copies of the changed modules under dist/ and of every
// module that imports them, without restarting the process. Node's own `--watch` restarts the
// process, and then most of each restart (about 2.5 of 3.5 s on 2 cores) is loading Nest, Fastify,
// Swagger, Prisma, BullMQ … again; here node_modules stay loaded, and so do our modules that the
// edit cannot reach. scripts/dev-host.hooks.mjs gives each module under dist/ the URL
// `<file>?v=<generation of its newest copy>`: a changed file and its importers, transitively, get
// the new generation's URL, so they are evaluated afresh; the others keep theirs, so they are the
// same instances (as when the tests build several apps in one process). The generated Prisma client
// is never reloaded: it changes only with prisma/schema.prisma, and `npm run dev` restarts then.
//
// Usage: spawned by `node scripts/setup.mjs --dev` with an IPC channel:
//   node scripts/dev-host.mjs <module under dist/> <exported start function>
//   The start function resolves with something to close() (the listening app). Each IPC message
//   `{ changed: [<path under dist/>, …] }` (sent once setup.mjs has written the transpiled files)
//   reloads the app; messages that arrive during a reload make one more reload after it. After each
//   start the host sends `{ started: <generation> }`, or `{ failed: <generation> }` when the import
//   or the start function threw (it then waits for the next change, which reloads every module).
//   It exits when the channel closes (setup.mjs is gone).
// Exit code 75 = restart this process (setup.mjs does): the app did not close within 5 s, or the
//   process has grown by MAX_GROWTH_MB since its first start (the ESM loader never frees a module,
//   so each generation's fresh copies stay in memory).
import { once } from 'node:events';
import { register } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const [entry, exported] = process.argv.slice(2);
if (!entry || !exported || !process.send) {
  console.error('usage (from node scripts/setup.mjs --dev, with an IPC channel): node scripts/dev-host.mjs <module under dist/> <exported start function>');
  process.exit(2);
}
const name = entry.match(/apps\/([^/]+)\//)?.[1] ?? path.basename(entry);
const dist = pathToFileURL(path.resolve('dist')).href + '/';
const hooks = new MessageChannel();
register('./dev-host.hooks.mjs', import.meta.url, { data: { root: dist, pinned: [`${dist}libs/db/src/generated/`], port: hooks.port2 }, transferList: [hooks.port2] });
hooks.port1.unref();

/** Tells the hooks which files a generation changes (all: every module); resolves once they know. */
async function invalidate(generation, changed, all) {
  hooks.port1.postMessage({ generation, changed: changed.map((f) => pathToFileURL(path.resolve(f)).href), all });
  while ((await once(hooks.port1, 'message'))[0]?.ack !== generation);
}

/** Longest wait for the running generation to close before this process restarts instead (ms). */
const CLOSE_TIMEOUT_MS = 5_000;
/** Growth of the resident memory since the first start after which the process restarts (MB). */
const MAX_GROWTH_MB = 512;
/** The process restarts when it asks (setup.mjs --dev respawns it). */
const RESTART = 75;

let generation = 0;
let running = null;
let busy = false;
let failed = false; // the last generation did not start: the next one reloads every module
let baseline = 0; // resident memory after the first start (bytes)
const pending = new Set(); // changed files not yet reloaded

async function reload() {
  if (busy) return;
  busy = true;
  const changed = [...pending];
  pending.clear();
  const reason = changed.length === 0 ? null : changed.length === 1 ? changed[0] : `${changed.length} files`;
  const started = Date.now();
  const cpu = process.cpuUsage();
  try {
    if (running) {
      const app = running;
      running = null;
      let timer;
      const closed = await Promise.race([
        app.close().then(() => true, (e) => (console.error(`[dev] ${name}: closing: ${e instanceof Error ? e.message : String(e)}`), true)),
        new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS, false))),
      ]);
      clearTimeout(timer);
      if (!closed) return restart(`it did not close within ${CLOSE_TIMEOUT_MS / 1000} s`);
    }
    const closedAt = Date.now();
    if (baseline > 0 && process.memoryUsage.rss() - baseline > MAX_GROWTH_MB * 2 ** 20) return restart(`it grew by more than ${MAX_GROWTH_MB} MB`);
    generation += 1;
    await invalidate(generation, changed, failed);
    failed = false;
    const mod = await import(`${pathToFileURL(path.resolve(entry)).href}?v=${generation}`);
    const importedAt = Date.now();
    running = await mod[exported]();
    const used = process.cpuUsage(cpu);
    baseline ||= process.memoryUsage.rss();
    process.send?.({ started: generation });
    if (reason) console.log(`[dev] ${name} reloaded in ${Date.now() - started} ms (close ${closedAt - started}, import ${importedAt - closedAt}, start ${Date.now() - importedAt}; ${Math.round((used.user + used.system) / 1000)} ms of CPU) after ${reason}`);
  } catch (e) {
    // as node --watch does: say why, keep the process, try again at the next change
    console.error(`aaas ${name}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    console.error(`[dev] ${name} is not running: waiting for a change`);
    failed = true;
    process.send?.({ failed: generation });
  } finally {
    busy = false;
    if (pending.size > 0) void reload();
  }
}

function restart(why) {
  console.log(`[dev] ${name}: restarting the process (${why})`);
  process.exit(RESTART);
}

process.on('message', (msg) => {
  const files = Array.isArray(msg?.changed) ? msg.changed : [];
  for (const f of files) pending.add(f);
  if (files.length > 0) void reload();
});
// setup.mjs is gone (killed without passing on a signal): do not outlive it holding the port
process.on('disconnect', () => {
  const app = running;
  running = null;
  const exit = () => process.exit(0);
  setTimeout(exit, CLOSE_TIMEOUT_MS).unref();
  void (app ? app.close().then(exit, exit) : exit());
});

await reload();
