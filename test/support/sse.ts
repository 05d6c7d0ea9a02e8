/** One parsed Server-Sent Events frame. */
export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

/**
 * POST/GET `url` and read its `text/event-stream` body frame by frame (WHATWG SSE parsing, enough
 * for our frames). Stops after `max` frames (then aborts the connection, as a client that is cut
 * off would), or when the server ends the stream. Returns the frames and the HTTP status.
 * `onFrame`: called with each frame as it arrives (e.g. to learn a task id while the stream goes on).
 */
export async function readSse(
  url: string,
  init: RequestInit,
  opts: { max?: number; timeoutMs?: number; onFrame?: (frame: SseFrame, index: number) => void } = {},
): Promise<{ status: number; contentType: string | null; frames: SseFrame[]; ended: boolean; body?: string }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts.timeoutMs ?? 15_000);
  const frames: SseFrame[] = [];
  try {
    const res = await fetch(url, { ...init, signal: ac.signal });
    const contentType = res.headers.get('content-type');
    if (!contentType?.startsWith('text/event-stream')) {
      return { status: res.status, contentType, frames, ended: true, body: await res.text() };
    }
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let cur: SseFrame = { data: '' };
    let dataLines: string[] = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { status: res.status, contentType, frames, ended: true };
      buf += value;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (dataLines.length > 0) {
            frames.push({ ...cur, data: dataLines.join('\n') });
            opts.onFrame?.(frames.at(-1)!, frames.length - 1);
            if (opts.max !== undefined && frames.length >= opts.max) {
              ac.abort();
              return { status: res.status, contentType, frames, ended: false };
            }
          }
          cur = { data: '' };
          dataLines = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'data') dataLines.push(val);
        else if (field === 'id') cur.id = val;
        else if (field === 'event') cur.event = val;
      }
    }
  } catch (e) {
    if ((e as Error).name === 'AbortError') return { status: 0, contentType: null, frames, ended: false };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}
