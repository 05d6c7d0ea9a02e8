import type { Worker } from 'node:worker_threads';

/**
 * The next message of `type` from a bench's worker thread (messages are `{ type, … }`; one of type
 * `error` carries `message` and rejects). Rejects past `timeoutMs` (ms) or when the thread fails
 * or exits — except that a wait for `closedType` is satisfied by the thread's exit. `label` names
 * the thread in the errors.
 */
export function nextThreadMessage<M extends { type: string }>(worker: Worker, type: M['type'], timeoutMs: number, label: string, closedType?: M['type']): Promise<M> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${label}: no '${type}' within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: M) => {
      if (m.type === 'error') done(new Error(`${label}: ${(m as { message?: unknown }).message}`));
      else if (m.type === type) done(null, m);
    };
    const onError = (e: Error) => done(e);
    const onExit = (code: number) => done(type === closedType ? null : new Error(`${label} exited (${code})`), { type } as M);
    const done = (err: Error | null, m?: M) => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      if (err) reject(err);
      else resolve(m!);
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}
