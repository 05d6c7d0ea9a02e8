/**
 * `fn` at the end of the current event-loop turn (`setImmediate`: no timer), once however often
 * the returned function is called in that turn: what a turn asks for goes out together instead of
 * the first request going out alone. The latch is cleared before `fn` runs, so a call made by `fn`
 * (or later) schedules the next turn. Errors thrown by `fn` are the caller's to catch inside it.
 */
export function endOfTurn(fn: () => void): () => void {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      fn();
    });
  };
}
