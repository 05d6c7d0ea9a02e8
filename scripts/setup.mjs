#!/usr/bin/env node
// Everything `npm run demo`, `npm test` and `npm run dev` need on a fresh machine, each step skipped
// when it is already done: install dependencies, generate the Prisma client, compile.
// Uses only Node built-ins (and scripts/prisma.mjs' environment), so it runs before `npm ci`.
// Usage: node scripts/setup.mjs [--build | --dev]
//   --build  also compile TypeScript to dist/ (incremental: a no-op in well under a second when
//            nothing changed)
//   --dev    build, migrate, then keep the API and a worker running from dist/; each edited .ts
//            file under apps/ and libs/ is transpiled alone into dist/ with swc (no type check, in
//            milliseconds), and each process restarts when its compiled files change (type checking:
//            npm run typecheck / lint / test); Ctrl-C stops all
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prismaEnv } from './prisma.mjs';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const tsc = 'node_modules/typescript/bin/tsc';
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const dev = process.argv.includes('--dev');
const build = dev || process.argv.includes('--build');

/** Runs a command with its output captured; prints the output only when it fails (then exits). */
function runQuiet(what, cmd, args, env = process.env) {
  try {
    return execFileSync(cmd, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (e) {
    // (tsc's --listEmittedFiles lines are bookkeeping, not the error)
    process.stdout.write((e.stdout ?? '').replace(/^TSFILE: .*\n/gm, ''));
    process.stderr.write(e.stderr ?? '');
    console.error(`[setup] ${what} failed`);
    process.exit(e.status ?? 1);
  }
}

const installed = 'node_modules/.package-lock.json';
if (!existsSync(installed) || mtime('package-lock.json') > mtime(installed)) {
  console.log('[setup] installing dependencies (npm ci)');
  run(npm, ['ci', '--no-audit', '--no-fund']);
}

// Regenerate when the schema changed or the dependencies (the Prisma version) were reinstalled.
const generated = 'libs/db/src/generated/prisma/client.ts';
if (Math.max(mtime('prisma/schema.prisma'), mtime(installed)) > mtime(generated)) {
  const started = Date.now();
  console.log('[setup] generating the Prisma client …');
  runQuiet('prisma generate', process.execPath, ['node_modules/prisma/build/index.js', 'generate'], prismaEnv());
  console.log(`[setup] generated the Prisma client (${seconds(started)})`);
}

if (build) {
  // `tsc -b` skips the build when no source is newer than dist/tsconfig.tsbuildinfo, and otherwise
  // re-emits only what changed. It does not look at node_modules, so a reinstall forces a full build,
  // and so does a missing entry point (someone deleted part of dist/).
  const buildInfo = 'dist/tsconfig.tsbuildinfo';
  const entries = ['dist/apps/api/src/main.js', 'dist/apps/worker/src/main.js', 'dist/scripts/demo.js'];
  const force = mtime(installed) > mtime(buildInfo) || entries.some((f) => !existsSync(f));
  const started = Date.now();
  // a first build takes a while on a small machine: say so instead of printing nothing for a minute
  if (force || !existsSync(buildInfo)) console.log('[setup] compiling TypeScript (a full build, about a minute on 2 cores) …');
  const out = runQuiet('compiling TypeScript', process.execPath, [tsc, '-b', 'tsconfig.json', '--listEmittedFiles', ...(force ? ['--force'] : [])]);
  const emitted = out.split('\n').filter((l) => l.startsWith('TSFILE: ') && l.endsWith('.js')).length;
  console.log(emitted ? `[setup] compiled TypeScript (${emitted} files, ${seconds(started)})` : '[setup] TypeScript up to date');

  // The operator console (apps/console → dist/console, served at /console): rebuilt with Vite only
  // when a source it bundles (or the installed dependencies) is newer than the built index.html.
  const newest = (dir) => (existsSync(dir) ? Math.max(mtime(dir), ...readdirSync(dir, { recursive: true }).map((f) => mtime(`${dir}/${f}`))) : 0);
  const consoleSources = Math.max(newest('apps/console'), newest('libs/trust/src'), mtime(installed));
  if (consoleSources > mtime('dist/console/index.html')) {
    const began = Date.now();
    runQuiet('building the console', process.execPath, ['node_modules/vite/bin/vite.js', 'build', '--config', 'apps/console/vite.config.ts', '--logLevel', 'warn']);
    console.log(`[setup] built the console (${seconds(began)})`);
  }
}

if (dev) {
  run(process.execPath, ['scripts/migrate.mjs']);
  // A type-checking rebuild (`tsc -b --watch`) took ~19 s from an edit in libs/ to a restarted API
  // on 2 cores; transpiling only the edited file takes milliseconds. Restarting the API process
  // (node --watch) then took 3.4–3.5 s, most of it loading node_modules again, so the API runs in
  // scripts/dev-host.mjs instead: it keeps node_modules loaded and, told which files changed,
  // closes the app and starts it again from fresh copies of our compiled modules. Type checking
  // stays in the full build above, `npm run typecheck`, `npm run lint`, `npm test` and the editor.
  // The worker restarts (node --watch) at a lower priority: the API answers first.
  const worker = spawn(process.execPath, ['--watch', 'dist/apps/worker/src/main.js'], { stdio: 'inherit' });
  try {
    os.setPriority(worker.pid, 10); // inherited by each worker process it (re)starts
  } catch {
    // not permitted here: both restart at the same priority
  }
  let stopping = false;
  let watchers = [];
  let api = null;
  let apiWaiting = false; // the API host exited on an error: started again at the next change
  const children = new Set([worker]);
  const stop = (code) => {
    if (stopping) return;
    stopping = true;
    process.exitCode = code;
    for (const w of watchers) w.close();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  };
  const exited = (c, code, signal) => {
    children.delete(c);
    if (!stopping) {
      // the API host asked for a fresh process (scripts/dev-host.mjs), or failed: as node --watch
      // does, it starts again at the next change
      if (c === api && signal === null && code === 75) return void startApi();
      if (c === api && signal === null) {
        apiWaiting = true;
        return void console.error(`[dev] the API process exited (code ${code}): started again at the next change`);
      }
      // a signal that reached only one process, or the worker's watcher gone: the session ends
      stop(code ?? 0);
    }
    if (children.size === 0) process.exit(process.exitCode);
  };
  const startApi = () => {
    apiWaiting = false;
    api = spawn(process.execPath, ['scripts/dev-host.mjs', 'dist/apps/api/src/api.process.js', 'startApiProcess'], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'] });
    const self = api;
    children.add(self);
    self.on('exit', (code, signal) => exited(self, code, signal));
  };
  worker.on('exit', (code, signal) => exited(worker, code, signal));
  startApi();
  console.log('[dev] watching apps/ and libs/: each saved .ts file is transpiled into dist/ (no type check: npm run typecheck)');
  watchers = await transpileOnChange(['apps', 'libs'], (outputs) => {
    // what the API loads: its app and the libs (the worker's own node --watch sees its files)
    const changed = outputs.filter((f) => f.startsWith('dist/libs/') || f.startsWith('dist/apps/api/'));
    if (changed.length === 0 || stopping) return;
    if (apiWaiting) startApi();
    else if (api?.connected) api.send({ changed });
  });
  // Ctrl-C reaches the whole process group; SIGTERM (e.g. from a supervisor) only this process
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));
}

/**
 * --dev: watch `dirs` and transpile each changed .ts file (what tsconfig.json compiles: not specs,
 * declarations or apps/console) on its own into dist/ with swc — decorators and their metadata as
 * tsc emits them, ESM, a source map — or remove its output when the file is gone. Changes within
 * 25 ms are one batch; `onBatch` gets the dist/ paths written or removed by each batch. Returns the
 * watchers (close them to stop).
 */
async function transpileOnChange(dirs, onBatch) {
  const { transformFile } = await import('@swc/core');
  const compiles = (f) => f.endsWith('.ts') && !f.endsWith('.spec.ts') && !f.endsWith('.d.ts') && !f.startsWith('apps/console/');
  const pending = new Set();
  let timer = null;
  const flush = async () => {
    timer = null;
    const files = [...pending];
    pending.clear();
    const started = Date.now();
    const outputs = [];
    for (const file of files) {
      const out = path.join('dist', file.replace(/\.ts$/, '.js'));
      if (!existsSync(file)) {
        rmSync(out, { force: true });
        rmSync(`${out}.map`, { force: true });
        outputs.push(out);
        continue;
      }
      try {
        const r = await transformFile(file, {
          swcrc: false,
          sourceMaps: true,
          sourceFileName: path.relative(path.dirname(out), file),
          jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022', keepClassNames: true },
          module: { type: 'es6' },
        });
        mkdirSync(path.dirname(out), { recursive: true });
        writeFileSync(`${out}.map`, r.map ?? '');
        writeFileSync(out, `${r.code}\n//# sourceMappingURL=${path.basename(out)}.map\n`);
        outputs.push(out);
      } catch (e) {
        // a syntax error: say where, keep the last good output (tsc --watch says more)
        console.error(`[dev] ${file}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (files.length > 0) console.log(`[dev] transpiled ${files.join(', ')} (${Date.now() - started} ms)`);
    if (outputs.length > 0) onBatch(outputs);
  };
  return dirs.map((dir) =>
    watch(dir, { recursive: true }, (_event, name) => {
      const file = name ? path.join(dir, name.toString()) : null;
      if (!file || !compiles(file)) return;
      pending.add(file);
      timer ??= setTimeout(flush, 25);
    }),
  );
}
