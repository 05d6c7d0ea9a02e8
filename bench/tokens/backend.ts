/**
 * Bench child (run as `node dist/bench/tokens/backend.js`): the NDJSON backend of ours' `http`
 * runtime (wire contract: docs/runtimes.md, `HttpRuntimeOperationSchema` in
 * libs/contracts/src/runtime.schema.ts). For an input text `… n=<chunks> d=<ms> …` (parsed as
 * the exactly-once backend does) it answers `POST /run` with one NDJSON line per operation: a
 * `working` status, <chunks> artifact chunks <ms> apart (artifact `out`, append from the second
 * on, lastChunk on the last; each one text part `{"i":<index>,"t":<emit time>}`, the time in ms
 * since the epoch with sub-ms resolution, taken when the line is written), then `completed`.
 *
 * `GET /stats` answers `{ requests, inFlight, maxInFlight }`: POSTs received, answers being
 * written now (= executions of ours waiting on this backend), and the most at once since the
 * previous `/stats?reset=1`.
 *
 * Prints `{"url":"http://127.0.0.1:<port>/run"}` when ready; exits when its parent closes stdin.
 * The webhook signature is not verified (loopback only; this measures, it does not guard).
 */
import http from 'node:http';
import type net from 'node:net';
import { parseHttpInput } from '../exactly-once/backend.js';
import { nowMs } from '../lib/stats.js';

let requests = 0;
let inFlight = 0;
let maxInFlight = 0;

function stream(input: string, res: http.ServerResponse): void {
  const { chunks, delayMs } = parseHttpInput(input);
  requests++;
  inFlight++;
  maxInFlight = Math.max(maxInFlight, inFlight);
  let open = true;
  res.on('close', () => {
    if (open) inFlight--;
    open = false;
  });
  res.writeHead(200, { 'content-type': 'application/x-ndjson' });
  res.write(`${JSON.stringify({ op: 'status', status: 'working' })}\n`);
  let i = 0;
  const next = (): void => {
    if (!open || res.destroyed) return;
    const text = JSON.stringify({ i, t: nowMs() });
    res.write(`${JSON.stringify({ op: 'artifact', artifactId: 'out', name: 'out.txt', parts: [{ text }], append: i > 0, lastChunk: i === chunks - 1 })}\n`);
    i++;
    if (i < chunks) setTimeout(next, delayMs);
    else res.end(`${JSON.stringify({ op: 'status', status: 'completed' })}\n`);
  };
  next();
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url?.startsWith('/stats')) {
    const body = JSON.stringify({ requests, inFlight, maxInFlight });
    if (req.url.includes('reset=1')) maxInFlight = inFlight;
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return;
  }
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    let input = '';
    try {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { input?: { parts?: Array<{ text?: string }> } };
      input = (body.input?.parts ?? []).map((p) => p.text ?? '').join('');
    } catch {
      res.writeHead(400).end('not JSON');
      return;
    }
    stream(input, res);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/run` })}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
