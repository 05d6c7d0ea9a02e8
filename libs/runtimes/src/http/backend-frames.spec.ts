import { describe, expect, it } from 'vitest';
import { backendFrames, CHUNK_END, FrameLimitError, type BackendFrame } from './backend-frames.js';

/** Mixed scripts: 2-byte (accents), 3-byte (CJK, °), 4-byte (emoji, with a ZWJ sequence) characters. */
const TEXT = '21°C in Zürich — 東京は晴れ 🌤️ Ωmega 👩‍💻 ñ';

async function frames(chunks: Buffer[], format: 'ndjson' | 'sse', max = 1 << 20): Promise<BackendFrame[]> {
  async function* body() {
    for (const c of chunks) yield c;
  }
  const out: BackendFrame[] = [];
  for await (const f of backendFrames(body(), format, max)) if (f !== CHUNK_END) out.push(f);
  return out;
}

/** Every cut of `bytes` that falls inside a multi-byte character, as two chunks. */
function splitsInsideCharacters(bytes: Buffer): Buffer[][] {
  const cuts: Buffer[][] = [];
  for (let i = 1; i < bytes.length; i++) if ((bytes[i]! & 0xc0) === 0x80) cuts.push([bytes.subarray(0, i), bytes.subarray(i)]);
  return cuts;
}

describe('backendFrames', () => {
  it('keeps every multi-byte character whole when a chunk boundary splits it (NDJSON)', async () => {
    const line = JSON.stringify({ op: 'message', message: { parts: [{ text: TEXT }] } });
    const bytes = Buffer.from(`${line}\n${line}\r\n`);
    const splits = splitsInsideCharacters(bytes);
    expect(splits.length).toBeGreaterThan(40);
    for (const chunks of splits) {
      const got = await frames(chunks, 'ndjson');
      expect(got.map((f) => f.text)).toEqual([line, line]);
    }
    // one byte per chunk: the worst case
    const bytewise = await frames([...bytes].map((b) => Buffer.from([b])), 'ndjson');
    expect(bytewise.map((f) => JSON.parse(f.text).message.parts[0].text)).toEqual([TEXT, TEXT]);
  });

  it('keeps every multi-byte character whole when a chunk boundary splits it (SSE)', async () => {
    const data = JSON.stringify({ op: 'message', message: { parts: [{ text: TEXT }] } });
    const bytes = Buffer.from(`: comment\nevent: op\ndata: ${data}\n\ndata: ${data}\r\n\r\n`);
    for (const chunks of splitsInsideCharacters(bytes)) {
      const got = await frames(chunks, 'sse');
      expect(got.map((f) => f.text)).toEqual([data, data]);
    }
    const bytewise = await frames([...bytes].map((b) => Buffer.from([b])), 'sse');
    expect(bytewise.map((f) => JSON.parse(f.text).message.parts[0].text)).toEqual([TEXT, TEXT]);
  });

  it('names lines and events, joins multi-line data, and keeps an unterminated last frame', async () => {
    expect(await frames([Buffer.from('a\nb\nc')], 'ndjson')).toEqual([
      { text: 'a', where: 'line 1' },
      { text: 'b', where: 'line 2' },
      { text: 'c', where: 'line 3' },
    ]);
    expect((await frames([Buffer.from('data: x\ndata: y\n\ndata: z')], 'sse')).map((f) => f.text)).toEqual(['x\ny', 'z']);
  });

  it('limits a frame in UTF-8 bytes, not UTF-16 units', async () => {
    // 10 characters, 40 bytes: within a 16-unit limit as UTF-16 would count it, over it in bytes
    const emoji = '😀'.repeat(10);
    await expect(frames([Buffer.from(`${emoji}\n`)], 'ndjson', 16)).rejects.toBeInstanceOf(FrameLimitError);
    await expect(frames([Buffer.from(`data: ${emoji}\n\n`)], 'sse', 16)).rejects.toBeInstanceOf(FrameLimitError);
    // a line that never ends is refused as soon as it passes the limit, without waiting for the end
    await expect(frames([Buffer.alloc(64, 0x61)], 'ndjson', 16)).rejects.toThrow('line 1 of the answer exceeds 16 bytes');
    expect((await frames([Buffer.from('ab\ncd\n')], 'ndjson', 2)).map((f) => f.text)).toEqual(['ab', 'cd']);
  });
});
