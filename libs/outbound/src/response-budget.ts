import type { Readable } from 'node:stream';

/**
 * How many bytes of an answer the service reads from an address its users gave (an `a2a`
 * upstream, a JWT issuer): an answer that is not an event stream is read whole by its consumer,
 * so it is bounded as a whole; an event stream lives as long as its task, so each of its events is.
 */
export interface ResponseBudget {
  /**
   * Largest body of an answer other than `text/event-stream` (bytes): refused from its
   * Content-Length before a byte is read, else once that many bytes arrived.
   */
  maxBodyBytes: number;
  /**
   * Largest event of a `text/event-stream` answer (bytes from the end of the last event — a blank
   * line — comments and line ends included); the stream as a whole is not bounded.
   */
  maxEventBytes: number;
  /**
   * Told of a refusal, once, before the fetch rejects or the body errors with it: a caller whose
   * client library wraps or rewords errors (the `@a2a-js/sdk` client does) learns the reason here.
   */
  onRefused?: (refusal: ResponseTooLargeError) => void;
}

/** The budget `outboundFetch` applies when its caller gives none: 4 MiB per answer, 4 MiB per event. */
export const DEFAULT_RESPONSE_BUDGET: ResponseBudget = { maxBodyBytes: 4 * 1024 * 1024, maxEventBytes: 4 * 1024 * 1024 };

/** An answer (`kind: 'answer'`) or one event of a stream (`'event'`) was larger than its budget of `limit` bytes. */
export class ResponseTooLargeError extends Error {
  override readonly name = 'ResponseTooLargeError';
  constructor(
    readonly kind: 'answer' | 'event',
    readonly limit: number,
  ) {
    super(kind === 'answer' ? `the answer exceeds ${limit} bytes` : `an event of the stream exceeds ${limit} bytes`);
  }
}

/** True for a `text/event-stream` Content-Type (any parameters, any case). */
export function isEventStream(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'text/event-stream';
}

/** What a counter lets through of one chunk, and the refusal when the chunk broke the budget. */
export interface Fed {
  pass?: Buffer;
  refusal?: ResponseTooLargeError;
}

/** A budget counter over the chunks of one body, in order. After a refusal it is not fed again. */
export interface BodyCounter {
  feed(chunk: Buffer): Fed;
  /** What it still holds when the body ended. */
  end(): Buffer | undefined;
}

/** Counts a whole answer: what it lets through is at most `maxBytes`; the chunk that passes it is refused. */
export function answerCounter(maxBytes: number): BodyCounter {
  let seen = 0;
  return {
    feed(chunk) {
      seen += chunk.length;
      return seen > maxBytes ? { refusal: new ResponseTooLargeError('answer', maxBytes) } : { pass: chunk };
    },
    end: () => undefined,
  };
}

/**
 * Counts a `text/event-stream` answer: refuses once the bytes since the last blank line pass
 * `maxEventBytes`, and lets through whole lines only (LF-terminated, as `@a2a-js/sdk`'s parser
 * splits them; a blank line is `\n` or `\r\n`; the bytes are unchanged). A partial line is held
 * (at most the budget) until its end arrives, so a parser that appends each chunk to a string and
 * searches it again sees one chunk per line, not thousands: a 4 MiB line in 64 KiB chunks would
 * cost it about 130 MB of copies.
 */
export function sseEventCounter(maxEventBytes: number): BodyCounter {
  /** Bytes since the last blank line, the held partial line included. */
  let eventBytes = 0;
  /** The start of the line being received (not yet let through), and its size. */
  let held: Buffer[] = [];
  let heldBytes = 0;
  /** The whole lines of `chunk` before `start` (with the held start of the first). */
  const whole = (chunk: Buffer, start: number): Buffer | undefined => {
    if (start === 0) return undefined;
    const out = held.length > 0 ? Buffer.concat([...held, chunk.subarray(0, start)]) : chunk.subarray(0, start);
    held = [];
    return out;
  };
  const refused = (chunk: Buffer, start: number): Fed => ({ pass: whole(chunk, start), refusal: new ResponseTooLargeError('event', maxEventBytes) });
  return {
    feed(chunk) {
      let start = 0;
      let nl: number;
      while ((nl = chunk.indexOf(0x0a, start)) >= 0) {
        // the line's bytes before its LF (a held start counted already); blank: none, or a CR alone
        const first = heldBytes > 0 ? held[0]![0] : chunk[start];
        const lineBytes = heldBytes + (nl - start);
        if (lineBytes === 0 || (lineBytes === 1 && first === 0x0d)) eventBytes = 0;
        else if ((eventBytes += nl - start + 1) > maxEventBytes) return refused(chunk, start);
        heldBytes = 0;
        start = nl + 1;
      }
      const pass = whole(chunk, start);
      if (start < chunk.length) {
        if ((eventBytes += chunk.length - start) > maxEventBytes) return { pass, refusal: new ResponseTooLargeError('event', maxEventBytes) };
        // a copy when the rest is a small part of a large chunk: the held line must not pin it
        const rest = chunk.subarray(start);
        held.push(rest.length * 4 < chunk.length ? Buffer.from(rest) : rest);
        heldBytes += rest.length;
      }
      return { pass };
    },
    end() {
      return held.length > 0 ? Buffer.concat(held) : undefined;
    },
  };
}

/**
 * `res` (a response body) as a web stream read through `counter`. It is read only as its reader
 * asks (no read-ahead beyond Node's own buffer): a refusal closes `res` (so its connection) at
 * once, and errors the stream after what was let through before it has been read, so the reader
 * handles every whole event that preceded it. Network errors and aborts (`res` destroyed with a
 * reason) error the stream with that reason; canceling the stream destroys `res`.
 */
export function countedBody(res: Readable, counter: BodyCounter, onRefused?: (e: ResponseTooLargeError) => void): ReadableStream<Uint8Array> {
  const it = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let refusal: ResponseTooLargeError | undefined;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          for (;;) {
            if (refusal) return controller.error(refusal);
            const next = await it.next();
            if (next.done) {
              const tail = counter.end();
              if (tail) controller.enqueue(tail);
              return controller.close();
            }
            const fed = counter.feed(next.value);
            if (fed.refusal) {
              refusal = fed.refusal;
              onRefused?.(refusal);
              res.destroy();
            }
            if (fed.pass && fed.pass.length > 0) return controller.enqueue(fed.pass);
          }
        } catch (e) {
          controller.error(refusal ?? e);
        }
      },
      async cancel() {
        res.destroy();
      },
    },
    { highWaterMark: 0 },
  );
}
