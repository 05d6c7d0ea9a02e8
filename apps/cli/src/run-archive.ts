/**
 * `aaas runs export` and `aaas runs import`: run archives (JSON Lines, one run per line with its
 * whole log; docs/architecture.md "Archives") over the admin API's `/v1/run-archive`.
 *
 * Export writes complete lines only, to stdout or a file, and knows the cursor of the last line
 * it wrote: a dropped connection (or a 5xx) is resumed from it within `--retry-for`, and
 * `--output <file> --resume` continues an interrupted export of that file (a torn last line is cut
 * off first). Import sends a file (or stdin) as it is read.
 */
import { createReadStream } from 'node:fs';
import { open, stat, truncate } from 'node:fs/promises';
import { once } from 'node:events';
import { Readable, type Writable } from 'node:stream';
import { createWriteStream } from 'node:fs';
import { ApiError, NetworkError, UsageError, type AdminClient } from './admin-client.js';

export interface ExportOptions {
  client: AdminClient;
  /** Query filters as the API takes them (agentId, status, createdFrom, createdTo, limit). */
  query: Record<string, string>;
  cursor?: string;
  output?: string;
  resume: boolean;
  retryForMs: number;
  err: (line: string) => void;
}

/** The cursor of the last complete line of `file` (cutting a torn last line off), or undefined. */
async function resumeFile(file: string): Promise<string | undefined> {
  const size = await stat(file).then((s) => s.size, () => 0);
  if (size === 0) return undefined;
  const fh = await open(file, 'r');
  try {
    // read backwards until the window holds the last newline and the one before it
    let window = Buffer.alloc(0);
    let pos = size;
    while (pos > 0) {
      const n = Math.min(1 << 20, pos);
      pos -= n;
      const chunk = Buffer.alloc(n);
      await fh.read(chunk, 0, n, pos);
      window = Buffer.concat([chunk, window]);
      const last = window.lastIndexOf(0x0a);
      if (last < 0) continue;
      const prev = window.lastIndexOf(0x0a, last - 1);
      if (prev < 0 && pos > 0) continue;
      const end = pos + last + 1;
      if (end < size) await truncate(file, end);
      const line = JSON.parse(window.subarray(prev + 1, last).toString('utf8')) as { cursor?: unknown };
      if (typeof line.cursor !== 'string') throw new UsageError(`${file}: the last line is not a run archive line`);
      return line.cursor;
    }
    await truncate(file, 0); // one torn line and nothing else
    return undefined;
  } catch (e) {
    if (e instanceof SyntaxError) throw new UsageError(`${file}: the last line is not JSON`);
    throw e;
  } finally {
    await fh.close();
  }
}

async function writeLine(out: Writable, line: string): Promise<void> {
  if (!out.write(line)) await once(out, 'drain');
}

/** Stream the archive to stdout or `output`; resolves to the number of runs written. */
export async function exportRuns(o: ExportOptions): Promise<number> {
  let cursor = o.cursor;
  if (o.resume) {
    if (!o.output) throw new UsageError('--resume needs --output <file>');
    cursor = (await resumeFile(o.output)) ?? cursor;
    if (cursor) o.err(`aaas: resuming after the last run in ${o.output}`);
  }
  const out: Writable = o.output ? createWriteStream(o.output, { flags: o.resume || o.cursor ? 'a' : 'w' }) : process.stdout;
  let written = 0;
  let limit = o.query.limit !== undefined ? Number(o.query.limit) : Infinity;
  const deadline = Date.now() + o.retryForMs;
  try {
    for (;;) {
      try {
        const q = new URLSearchParams({ ...o.query, ...(Number.isFinite(limit) && { limit: String(limit) }), ...(cursor && { cursor }) });
        const res = await o.client.stream('GET', `/v1/run-archive?${q}`);
        let rest = '';
        const decoder = new TextDecoder();
        for await (const chunk of Readable.fromWeb(res.body as never) as AsyncIterable<Uint8Array>) {
          rest += decoder.decode(chunk, { stream: true });
          let nl: number;
          while ((nl = rest.indexOf('\n')) >= 0) {
            const line = rest.slice(0, nl + 1);
            rest = rest.slice(nl + 1);
            cursor = (JSON.parse(line) as { cursor: string }).cursor;
            await writeLine(out, line);
            written += 1;
            limit -= 1;
          }
        }
        if (rest.length === 0) return written;
        throw new NetworkError('GET', '/v1/run-archive', 'the stream ended inside a line');
      } catch (e) {
        const retryable = (e instanceof ApiError && e.retryable) || (!(e instanceof ApiError) && !(e instanceof UsageError));
        if (!retryable || Date.now() >= deadline) {
          if (cursor) o.err(`aaas: stopped after ${written} runs; resume with --cursor ${cursor}${o.output ? ` (or --output ${o.output} --resume)` : ''}`);
          throw e;
        }
        o.err(`aaas: ${e instanceof Error ? e.message : String(e)}; resuming`);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  } finally {
    if (o.output) {
      (out as ReturnType<typeof createWriteStream>).end();
      await once(out, 'close');
    }
  }
}

/** Send an archive file (`-`: stdin) to POST /v1/run-archive; resolves to the API's answer. */
export async function importRuns(client: AdminClient, file: string): Promise<{ runs: number; events: number; linksSkipped: number }> {
  const input = file === '-' ? process.stdin : createReadStream(file);
  if (file !== '-') await once(input, 'open').catch((e: NodeJS.ErrnoException) => {
    throw new UsageError(`cannot read ${file}: ${e.code ?? e.message}`);
  });
  const res = await client.stream('POST', '/v1/run-archive', {
    body: Readable.toWeb(input) as ReadableStream<Uint8Array>,
    headers: { 'content-type': 'application/x-ndjson', accept: 'application/json' },
  });
  return (await res.json()) as { runs: number; events: number; linksSkipped: number };
}
