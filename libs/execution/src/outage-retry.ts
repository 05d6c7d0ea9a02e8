import { isDependencyUnavailable } from '#libs/common';

/**
 * Run `call`; while it fails because the database is unreachable (`isDependencyUnavailable`),
 * call it again with backoff (100 ms doubling to 2 s) for at most `budgetMs` ms, then rethrow the
 * last error. Any other error is thrown at once. Only for calls that are safe to repeat: reads, a
 * lease renewal, a delegation (idempotent by its key), failing a run (a guarded append that reads
 * the run first). Appends retry inside RuntimeOperations.apply, idempotent by sequence.
 */
export async function retryWhileUnavailable<T>(call: () => Promise<T>, budgetMs: number): Promise<T> {
  const until = Date.now() + budgetMs;
  for (let n = 0; ; n++) {
    try {
      return await call();
    } catch (e) {
      if (budgetMs <= 0 || !isDependencyUnavailable(e) || Date.now() >= until) throw e;
      await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** n, Math.max(0, until - Date.now()))));
    }
  }
}
