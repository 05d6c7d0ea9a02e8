#!/usr/bin/env node
// Everything `npm run demo` and `npm test` need on a fresh machine, each step skipped when it is
// already done: install dependencies, generate the Prisma client, compile (demo/bench only).
// Uses only Node built-ins, so it runs before `npm ci`.
// Usage: node scripts/setup.mjs [--build]
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : 0);
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });

if (!existsSync('node_modules/.package-lock.json') || mtime('package-lock.json') > mtime('node_modules/.package-lock.json')) {
  console.log('[setup] installing dependencies (npm ci)');
  run(npm, ['ci', '--no-audit', '--no-fund']);
}
if (mtime('prisma/schema.prisma') > mtime('libs/db/src/generated/prisma/client.ts')) {
  console.log('[setup] generating the Prisma client');
  run(process.execPath, ['scripts/prisma.mjs', 'generate']);
}
if (process.argv.includes('--build')) {
  console.log('[setup] compiling TypeScript');
  run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json']);
}
