import { createParser } from 'eventsource-parser';
import { enc, type Envelope } from './api';

/**
 * Follow a run's event log over the admin API's SSE stream (GET /v1/runs/{id}/events/stream).
 * EventSource cannot send the API key header, so this reads the stream with fetch and parses it
 * with eventsource-parser. After a dropped connection it reconnects with `Last-Event-ID` = the
 * last sequence delivered (backoff 500 ms doubling to 10 s), so every event arrives once, in
 * order; events at or below that sequence are dropped if a server sends them again.
 */
export interface FollowHandlers {
  onEvents(batch: Envelope[]): void;
  onState(state: 'connecting' | 'live' | 'reconnecting' | 'ended', info?: string): void;
}

export function followRun(key: string, runId: string, after: number, h: FollowHandlers): () => void {
  const ac = new AbortController();
  let last = after;
  let delay = 500;
  void (async () => {
    while (!ac.signal.aborted) {
      let ended = false;
      try {
        h.onState(last === after ? 'connecting' : 'reconnecting');
        const res = await fetch(`/v1/runs/${enc(runId)}/events/stream`, {
          headers: { accept: 'text/event-stream', 'x-api-key': key, 'last-event-id': String(last) },
          signal: ac.signal,
          credentials: 'omit',
          cache: 'no-store',
        });
        if (!res.ok || !res.body) {
          const body = await res.text().catch(() => '');
          // 4xx will not get better by retrying (except 429: a stream slot frees up)
          if (res.status >= 400 && res.status < 500 && res.status !== 429) {
            h.onState('ended', `the stream was refused: HTTP ${res.status} ${body.slice(0, 200)}`);
            return;
          }
          throw new Error(`HTTP ${res.status}`);
        }
        h.onState('live');
        delay = 500;
        let batch: Envelope[] = [];
        const parser = createParser({
          onEvent(ev) {
            if (ev.event === 'end') {
              ended = true;
              return;
            }
            if (ev.event === 'error') return;
            const env = JSON.parse(ev.data) as Envelope;
            if (env.sequence <= last) return;
            last = env.sequence;
            batch.push(env);
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.feed(value);
          // one render per network chunk, not per event
          if (batch.length > 0) {
            h.onEvents(batch);
            batch = [];
          }
          if (ended) break;
        }
        if (ended) {
          h.onState('ended');
          ac.abort();
          return;
        }
      } catch (e) {
        if (ac.signal.aborted) return;
        h.onState('reconnecting', e instanceof Error ? e.message : String(e));
      }
      if (ac.signal.aborted) return;
      h.onState('reconnecting', `resuming after sequence ${last}`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  })();
  return () => ac.abort();
}
