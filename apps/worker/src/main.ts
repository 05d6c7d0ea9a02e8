import { createWorkerApp } from './worker.factory.js';

/** Worker process entry point: executes runs from the `run-execution` queue. */
createWorkerApp().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
