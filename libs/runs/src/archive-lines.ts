import { AppError } from '#libs/common';

/** Limits of an archive import's body (ARCHIVE_IMPORT_* in libs/config). */
export interface ArchiveLineLimits {
  /** Bytes of the whole body (newlines included). Past it: 413 `archive.too_large`. */
  maxBodyBytes: number;
  /** Bytes of one line (without its newline). Past it: 413 `archive.line_too_long`. */
  maxLineBytes: number;
}

/**
 * The lines of a JSON Lines body as bytes (without `\n`, a trailing `\r` dropped), pulled from
 * `source` only as the consumer asks. Linear in the body: each chunk is searched for newlines once
 * and a line's pieces are joined once, so a long line costs what it weighs (not its square, as
 * re-scanning an accumulated string would), and no line grows past `maxLineBytes` in memory: the
 * line is refused as soon as it is longer. Empty lines are yielded (numbering stays the client's).
 * Errors: 413 `archive.too_large` (details: maxBodyBytes), 413 `archive.line_too_long` (details:
 * line, maxLineBytes) — thrown as the byte past the limit arrives, before the rest is read.
 */
export async function* archiveLines(source: AsyncIterable<Buffer | string>, limits: ArchiveLineLimits): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let held = 0; // bytes in `parts`
  let body = 0;
  let line = 1;
  const tooLong = () =>
    new AppError('archive.line_too_long', `archive line ${line} is longer than ${limits.maxLineBytes} bytes (ARCHIVE_IMPORT_MAX_LINE_BYTES)`, {
      details: { line, maxLineBytes: limits.maxLineBytes },
    });
  const take = (last: Buffer): Buffer => {
    const all = parts.length === 0 ? last : Buffer.concat([...parts, last], held + last.length);
    parts = [];
    held = 0;
    line += 1;
    return all.length > 0 && all[all.length - 1] === 0x0d ? all.subarray(0, all.length - 1) : all;
  };
  for await (const raw of source) {
    const chunk = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw;
    body += chunk.length;
    if (body > limits.maxBodyBytes) {
      throw new AppError('archive.too_large', `the archive is larger than ${limits.maxBodyBytes} bytes (ARCHIVE_IMPORT_MAX_BODY_BYTES); split it and import the parts into separate organizations, or ask the operator to raise the limit`, {
        details: { maxBodyBytes: limits.maxBodyBytes },
      });
    }
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      // a line may end in `\r`, one byte more than its limit
      if (held + nl - start > limits.maxLineBytes + 1) throw tooLong();
      yield take(chunk.subarray(start, nl));
      start = nl + 1;
    }
    if (start < chunk.length) {
      parts.push(chunk.subarray(start));
      held += chunk.length - start;
      if (held > limits.maxLineBytes + 1) throw tooLong();
    }
  }
  if (held > 0) {
    const last = take(Buffer.alloc(0));
    if (last.length > limits.maxLineBytes) {
      line -= 1;
      throw tooLong();
    }
    yield last;
  }
}

/**
 * Whether the JSON text `bytes` nests objects and arrays deeper than `maxDepth`, found by one linear
 * scan before anything parses it (strings skipped, escapes honoured): a deep document is refused
 * without a parser, a serializer or PostgreSQL's jsonb recursing through it. Does not validate the
 * JSON otherwise.
 */
export function jsonDeeperThan(bytes: Uint8Array, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c) i += 1; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x7d || c === 0x5d) depth -= 1;
  }
  return false;
}
