import { execFileSync } from 'node:child_process';
import { TEST_DATABASE_URL } from './env.js';

/** Runs once before all test files: a fresh test database with every migration applied. */
export default async function setup(): Promise<void> {
  execFileSync(process.execPath, ['scripts/migrate.mjs', '--reset'], {
    stdio: 'inherit',
    env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL },
  });
}
