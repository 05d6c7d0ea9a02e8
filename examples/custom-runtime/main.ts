/**
 * Run the control plane with one more runtime kind (`word-count`), API and worker in one process:
 *
 *   npm run build && node dist/examples/custom-runtime/main.js
 *
 * Both apps need the runtime: the API validates revisions and answers direct replies with it, the
 * worker executes runs with it. Then publish an agent whose revision says
 * `"runtime": { "kind": "word-count", "chunkSize": 3 }` (docs/runtimes.md) and talk to it over A2A.
 */
import { loadConfig } from '#libs/config';
import { createApiApp } from '../../apps/api/src/app.factory.js';
import { createWorkerApp } from '../../apps/worker/src/worker.factory.js';
import { WordCountRuntime } from './word-count.runtime.js';

const runtimes = [new WordCountRuntime()];
const config = loadConfig();
const api = await createApiApp({}, { runtimes });
await api.listen(config.PORT, config.HOST);
const worker = await createWorkerApp({}, { runtimes });
console.log(`API on ${config.HOST}:${config.PORT} with runtime kinds: scripted, http, a2a, word-count`);
const stop = async () => {
  await worker.close();
  await api.close();
  process.exit(0);
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
