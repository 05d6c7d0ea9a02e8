import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One frame of a backend's streamed answer: an NDJSON line or an SSE event's data, and where it was. */
export interface BackendFrame {
  /** The frame's text, decoded as UTF-8 from whole bytes (never from a lone network chunk). */
  text: string;
  /** Where it was, for error messages: `line 3`, `event 2`. */
  where: string;
}

/** Marks the end of one network chunk's frames: the caller commits what it applied before waiting for more. */
export const CHUNK_END = Symbol('chunk-end');

/** A frame broke the size limit (the run fails with this reason). */
export class FrameLimitError extends Error {}

/**
 * Splits a backend's streamed answer into frames as they arrive, each decoded from whole bytes, so
 * a multi-byte UTF-8 character that TCP splits across two chunks stays whole:
 * - `ndjson` (`application/x-ndjson`): one frame per line. Lines are cut at the byte 0x0A, which
 *   UTF-8 never uses inside a multi-byte character, then each whole line is decoded (a trailing `\r`
 *   dropped); a last line without `\n` is a frame too.
 * - `sse` (`text/event-stream`): one frame per event's `data` (its data lines joined by `\n`), parsed
 *   by `eventsource-parser` (WHATWG EventSource rules: comments, `id`, `retry`, CR/LF/CRLF), fed
 *   through a streaming `TextDecoder`. An event the stream ends without a blank line still counts.
 * `maxFrameBytes` bounds a frame in UTF-8 bytes: an NDJSON line, or the bytes received since the last
 * SSE event was dispatched. Yields CHUNK_END after each network chunk's frames.
 * Errors: FrameLimitError when a frame is longer (`line 3 of the answer exceeds N bytes`, `event 2 …`);
 * the body's own errors as they are.
 */
export async function* backendFrames(
  body: AsyncIterable<Buffer>,
  format: 'ndjson' | 'sse',
  maxFrameBytes: number,
): AsyncGenerator<BackendFrame | typeof CHUNK_END> {
  if (format === 'ndjson') {
    let rest: Buffer = Buffer.alloc(0);
    let line = 0;
    for await (const chunk of body) {
      let data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
      let nl: number;
      while ((nl = data.indexOf(0x0a)) >= 0) {
        if (nl > maxFrameBytes) throw tooLong(`line ${line + 1}`, maxFrameBytes);
        line++;
        yield { text: lineText(data.subarray(0, nl)), where: `line ${line}` };
        data = data.subarray(nl + 1);
      }
      if (data.length > maxFrameBytes) throw tooLong(`line ${line + 1}`, maxFrameBytes);
      // a copy: the remainder must not pin the (possibly much larger) chunk it came from
      rest = Buffer.from(data);
      yield CHUNK_END;
    }
    if (rest.length > 0) yield { text: lineText(rest), where: `line ${line + 1}` };
    return;
  }

  const decoder = new TextDecoder('utf-8');
  const ready: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => ready.push(event) });
  let pendingBytes = 0;
  let events = 0;
  for await (const chunk of body) {
    pendingBytes += chunk.length;
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (ready.length > 0) pendingBytes = 0;
    if (pendingBytes > maxFrameBytes) throw tooLong(`event ${events + ready.length + 1}`, maxFrameBytes);
    while (ready.length > 0) {
      const event = ready.shift()!;
      if (Buffer.byteLength(event.data, 'utf8') > maxFrameBytes) throw tooLong(`event ${events + 1}`, maxFrameBytes);
      yield { text: event.data, where: `event ${++events}` };
    }
    yield CHUNK_END;
  }
  parser.feed(decoder.decode());
  parser.feed('\n\n');
  for (const event of ready) yield { text: event.data, where: `event ${++events}` };
}

function tooLong(where: string, maxFrameBytes: number): FrameLimitError {
  return new FrameLimitError(`${where} of the answer exceeds ${maxFrameBytes} bytes`);
}

function lineText(bytes: Buffer): string {
  const end = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
  return bytes.toString('utf8', 0, end);
}
