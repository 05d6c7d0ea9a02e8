import { startApiProcess } from './api.process.js';

/**
 * API process entry point (see startApiProcess): exits with one clear line and code 1 when the API
 * cannot start (invalid configuration, PostgreSQL unreachable or behind this build, PORT taken).
 */
startApiProcess().catch((e: unknown) => {
  console.error(`aaas api: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
