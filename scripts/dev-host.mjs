#!/usr/bin/env node
// `npm run dev`'s API process: runs the app in this process and, when its compiled code changes,
// closes it and starts it again from fresh copies of our modules under dist/, without restarting
// the process. Node's own `--watch` restarts the process, and then most of each restart (about
// 2.5 of 3.5 s on 2 cores) is loading Nest, Fastify, Swagger, Prisma, BullMQ … again; here
// node_modules stay loaded and only our ~250 small modules are read again (each generation imports
// `<entry>?v=<n>`, and scripts/dev-host.hooks.mjs carries `?v=<n>` to every module under dist/ it
// imports, except the generated Prisma client: it changes only with prisma/schema.prisma, and
// `npm run dev` is restarted then).
//
// Usage: spawned by `node scripts/setup.mjs --dev` with an IPC channel:
//   node scripts/dev-host.mjs <module under dist/> <exported start function>
//   The start function resolves with something to close() (the listening app). Each IPC message
//   `{ changed: [<path under dist/>, …] }` (sent once setup.mjs has written the transpiled files)
//   reloads the app; messages that arrive during a reload make one more reload after it. After each
//   start the host sends `{ started: <generation> }`, or `{ failed: <generation> }` when the import
//   or the start function threw (it then waits for the next change). It exits when the channel
//   closes (setup.mjs is gone).
// Exit codes: 75 = restart this process (setup.mjs does): the app did not close within 5 s, or
//   this process has kept too many generations (each one's modules stay in memory: the ESM loader
//   never frees a module).
import { register } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [entry, exported] = process.argv.slice(2);
if (!entry || !exported || !process.send) {
  console.error('usage (from node scripts/setup.mjs --dev, with an IPC channel): node scripts/dev-host.mjs <module under dist/> <exported start function>');
  process.exit(2);
}
const name = entry.match(/apps\/([^/]+)\//)?.[1] ?? path.basename(entry);
const dist = pathToFileURL(path.resolve('dist')).href + '/';
register('./dev-host.hooks.mjs', import.meta.url, { data: { root: dist, pinned: [`${dist}libs/db/src/generated/`] } });

/** Longest wait for the running generation to close before this process restarts instead (ms). */
const CLOSE_TIMEOUT_MS = 5_000;
/** Generations kept in one process before it restarts (a generation's modules hold a few MB). */
const MAX_GENERATIONS = 50;
/** The process restarts when it asks (setup.mjs --dev respawns it). */
const RESTART = 75;

let generation = 0;
let running = null;
let busy = false;
let again = false;

async function reload(reason) {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
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
    if (generation >= MAX_GENERATIONS) return restart(`${MAX_GENERATIONS} reloads in one process`);
    generation += 1;
    const mod = await import(`${pathToFileURL(path.resolve(entry)).href}?v=${generation}`);
    const importedAt = Date.now();
    running = await mod[exported]();
    const used = process.cpuUsage(cpu);
    process.send?.({ started: generation });
    if (reason) console.log(`[dev] ${name} reloaded in ${Date.now() - started} ms (close ${closedAt - started}, import ${importedAt - closedAt}, start ${Date.now() - importedAt}; ${Math.round((used.user + used.system) / 1000)} ms of CPU) after ${reason}`);
  } catch (e) {
    // as node --watch does: say why, keep the process, try again at the next change
    console.error(`aaas ${name}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    console.error(`[dev] ${name} is not running: waiting for a change`);
    process.send?.({ failed: generation });
  } finally {
    busy = false;
    if (again) {
      again = false;
      void reload('changed while reloading');
    }
  }
}

function restart(why) {
  console.log(`[dev] ${name}: restarting the process (${why})`);
  process.exit(RESTART);
}

process.on('message', (msg) => {
  const files = Array.isArray(msg?.changed) ? msg.changed : [];
  if (files.length > 0) void reload(files.length === 1 ? files[0] : `${files.length} files`);
});
// setup.mjs is gone (killed without passing on a signal): do not outlive it holding the port
process.on('disconnect', () => {
  const app = running;
  running = null;
  const exit = () => process.exit(0);
  setTimeout(exit, CLOSE_TIMEOUT_MS).unref();
  void (app ? app.close().then(exit, exit) : exit());
});

await reload(null);
