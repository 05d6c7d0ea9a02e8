import { endOfTurn } from '#libs/common';

/**
 * Group commit for one kind of write: the items submitted in one event-loop turn go out together
 * at the end of that turn (`setImmediate`: no timer), and items submitted while `maxInFlight`
 * batches are already in flight wait, the next free slot taking up to `maxBatch` of them as one
 * batch. At low load every item goes out within its turn; under load, one round trip and one
 * commit serve many items — the executions of one job, which end in the same turn, share one
 * statement instead of the first going out alone.
 *
 * With `key`, a batch never holds two items of one key: the second waits for a later batch (so
 * items of a key go out in submission order, each batch taking the oldest), while items of other
 * keys pass it. Batches in flight together may hold the same key (the database orders them, as it
 * would two single writes).
 *
 * `write(batch)` resolves to one settled result per item, in order (so one bad item can fail
 * alone); if `write` itself rejects, every item of the batch rejects with that error.
 */
export class GroupCommit<T, R> {
  private queue: Array<{ item: T; key: string | undefined; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;
  /** `pump` at the end of this turn. */
  private readonly pumpSoon = endOfTurn(() => this.pump());

  constructor(
    private readonly write: (batch: readonly T[]) => Promise<ReadonlyArray<PromiseSettledResult<R>>>,
    private readonly opts: { maxInFlight: number; maxBatch: number; key?: (item: T) => string },
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, key: this.opts.key?.(item), resolve, reject });
      this.pumpSoon();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.opts.maxInFlight) {
      const batch = this.opts.key ? this.takeKeyed() : this.queue.splice(0, this.opts.maxBatch);
      if (batch.length === 0) return;
      this.inFlight++;
      this.write(batch.map((b) => b.item))
        .then(
          (results) =>
            batch.forEach((b, i) => {
              const r = results[i];
              if (r?.status === 'fulfilled') b.resolve(r.value);
              else b.reject(r ? r.reason : new Error('group commit: missing result'));
            }),
          (e: unknown) => batch.forEach((b) => b.reject(e)),
        )
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }

  /** Up to maxBatch queued items, in order, at most one per key (the oldest of each). */
  private takeKeyed(): typeof this.queue {
    const batch: typeof this.queue = [];
    const rest: typeof this.queue = [];
    const taken = new Set<string>();
    for (const entry of this.queue) {
      if (batch.length < this.opts.maxBatch && !taken.has(entry.key!)) {
        taken.add(entry.key!);
        batch.push(entry);
      } else {
        rest.push(entry);
      }
    }
    this.queue = rest;
    return batch;
  }
}
