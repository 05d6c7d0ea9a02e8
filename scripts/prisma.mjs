#!/usr/bin/env node
// Runs the Prisma CLI with the environment that works without Prisma's binary host:
// the engine variables must name existing files (any file) so the CLI skips its downloads,
// and CHECKPOINT_DISABLE stops its telemetry call (a 10 s DNS time-out otherwise).
// Usage: node scripts/prisma.mjs <prisma args...>
import { execFileSync } from 'node:child_process';
import path from 'node:path';

export function prismaEnv(extra = {}) {
  const placeholder = path.resolve('node_modules/prisma/package.json');
  return {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? placeholder,
    PRISMA_QUERY_ENGINE_LIBRARY: process.env.PRISMA_QUERY_ENGINE_LIBRARY ?? placeholder,
    CHECKPOINT_DISABLE: '1',
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    ...extra,
  };
}

export function runPrisma(args, { quiet = false, env = {} } = {}) {
  execFileSync(path.resolve('node_modules/.bin/prisma'), args, {
    stdio: quiet ? ['ignore', 'ignore', 'inherit'] : 'inherit',
    env: prismaEnv(env),
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    runPrisma(process.argv.slice(2));
  } catch (e) {
    process.exit(e.status ?? 1);
  }
}
