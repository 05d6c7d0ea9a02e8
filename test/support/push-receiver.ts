import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One push delivery as a receiver got it. */
export interface ReceivedPush {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: Record<string, any>;
  at: number;
}

/**
 * A local push receiver (real HTTP on 127.0.0.1): records every request; `respond` decides the
 * answer (default 200). Deliveries are deduplicated by `webhook-id` in `unique()`.
 */
export async function startPushReceiver(respond: (r: ReceivedPush, n: number) => { status: number; headers?: Record<string, string>; delayMs?: number } = () => ({ status: 200 })) {
  const received: ReceivedPush[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Record<string, any> = {};
      try {
        json = JSON.parse(body);
      } catch {
        /* recorded as is */
      }
      const r: ReceivedPush = { path: req.url ?? '', headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])), body, json, at: Date.now() };
      received.push(r);
      const out = respond(r, received.length);
      const answer = () => {
        res.writeHead(out.status, { 'content-type': 'text/plain', ...out.headers });
        res.end('ok');
      };
      if (out.delayMs) setTimeout(answer, out.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    port,
    received,
    /** Deliveries of `path`, one per webhook-id (the first received), in arrival order. */
    unique(path?: string): ReceivedPush[] {
      const seen = new Set<string>();
      return received.filter((r) => (path === undefined || r.path === path) && !seen.has(r.headers['webhook-id']!) && seen.add(r.headers['webhook-id']!));
    },
    async waitFor(pred: () => boolean, ms = 10_000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!pred()) {
        if (Date.now() > deadline) throw new Error(`push receiver: condition not met within ${ms} ms (${received.length} received)`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
