import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError, NetworkError, type AdminClient } from './admin-client.js';
import { tailRun } from './run-tail.js';

/** A fake admin API: a run whose log grows by one event per events call, with failures scripted per call. */
function fakeRun(total: number, failures: Record<number, Error> = {}) {
  const log = Array.from({ length: total }, (_, i) => ({ sequence: i + 1, event: { type: 'message.added', payload: { message: { role: 'agent', parts: [{ text: `m${i + 1}` }] } } } }));
  let visible = 0;
  let calls = 0;
  const client = {
    async call(_method: string, p: string) {
      const failure = failures[++calls];
      if (failure) throw failure;
      const m = /events\?after=(\d+)&limit=(\d+)/.exec(p);
      if (m) {
        visible = Math.min(total, visible + 1);
        const after = Number(m[1]);
        // a server may hand back an event at the cursor again (e.g. a retried page): the tail drops it
        return { events: log.slice(Math.max(0, after - 1), visible), nextAfter: visible };
      }
      return { run: { status: visible === total ? 'completed' : 'working', blockedReason: null, lastSequence: visible } };
    },
  } as unknown as AdminClient;
  return { client, calls: () => calls };
}

async function tail(client: AdminClient, extra: Partial<Parameters<typeof tailRun>[0]> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  await tailRun({ client, runId: 'r', after: 0, intervalMs: 1, retryForMs: 10_000, json: true, out: (l) => out.push(l), err: (l) => err.push(l), ...extra });
  return { seqs: out.map((l) => (l.startsWith('{') ? (JSON.parse(l) as { sequence: number }).sequence : Number(/^#(\d+)/.exec(l)![1]))), out, err };
}

describe('tailRun', () => {
  it('prints every event once, in order, across network errors and 5xx answers', async () => {
    const { client } = fakeRun(6, {
      3: new NetworkError('GET', 'http://x/v1/runs/r/events', 'ECONNRESET'),
      4: new ApiError('GET', '/v1/runs/r/events', 502, undefined, 'Bad Gateway'),
      7: new NetworkError('GET', 'http://x/v1/runs/r', 'ECONNREFUSED'),
    });
    const r = await tail(client);
    expect(r.seqs).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.err).toEqual([
      'aaas: connection lost (ECONNRESET); retrying from sequence 2',
      'aaas: connection lost (HTTP 502); retrying from sequence 2',
      expect.stringMatching(/^aaas: connection lost \(ECONNREFUSED\); retrying from sequence \d$/),
    ]);
  });

  it('stops at a 4xx', async () => {
    const { client } = fakeRun(3, { 2: new ApiError('GET', '/v1/runs/r/events', 404, 'run.not_found', 'no such run') });
    await expect(tail(client)).rejects.toThrow(/HTTP 404 run\.not_found/);
  });

  it('gives up after retryForMs without an answer', async () => {
    const down = new NetworkError('GET', 'http://x', 'ECONNREFUSED');
    const { client } = fakeRun(3, Object.fromEntries(Array.from({ length: 50 }, (_, i) => [i + 1, down])));
    await expect(tail(client, { retryForMs: 300 })).rejects.toThrow(/^gave up after \d+ s without an answer/);
  });

  it('resumes from the cursor file and keeps it at the last printed sequence', async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), 'aaas-tail-')), 'cursor');
    await writeFile(file, '3\n');
    const { client } = fakeRun(5);
    const r = await tail(client, { cursorFile: file });
    expect(r.seqs).toEqual([4, 5]);
    expect(await readFile(file, 'utf8')).toBe('5\n');
    await writeFile(file, 'nonsense');
    await expect(tail(fakeRun(5).client, { cursorFile: file })).rejects.toThrow(/does not hold a sequence number/);
  });

  it('says what the run is doing when nothing new arrives', async () => {
    let n = 0;
    const client = {
      async call(_m: string, p: string) {
        if (p.includes('/events')) return { events: [], nextAfter: 0 };
        return { run: { status: ++n > 8 ? 'canceled' : 'working', blockedReason: n > 4 ? 'input_required' : null, lastSequence: 0 } };
      },
    } as unknown as AdminClient;
    const r = await tail(client, { intervalMs: 10, idleNoticeMs: 25 });
    expect(r.err.length).toBeGreaterThanOrEqual(2);
    expect(r.err[0]).toMatch(/^… still working \(\d+ s\)$/);
    expect(r.err.at(-1)).toMatch(/^… still working \(input required\) \(\d+ s\)$/);
  });

  it('prints readable lines without --json', async () => {
    const { out } = await tail(fakeRun(2).client, { json: false });
    expect(out).toEqual(['#1 message.added agent: "m1"', '#2 message.added agent: "m2"']);
  });
});
