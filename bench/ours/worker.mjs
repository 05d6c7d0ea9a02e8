// Bench child: our worker app from the compiled tree (dist/). Prints {"url": "worker"} when ready.
import { createWorkerApp } from '../../dist/apps/worker/src/worker.factory.js';

const app = await createWorkerApp({ LOG_LEVEL: 'silent' });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', async () => {
  await app.close();
  process.exit(0);
});
console.log(JSON.stringify({ url: 'worker' }));
