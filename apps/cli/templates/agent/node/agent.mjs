// {{name}}: a backend for the control plane's `http` runtime (docs/runtimes.md), in Node with
// nothing but node: built-ins. Run it with
//
//   AAAS_WEBHOOK_SECRET=whsec_… PORT={{port}} node agent.mjs
//
// For each execution of a run the control plane POSTs a signed JSON request here; this backend
// verifies the Standard Webhooks signature, then answers with NDJSON runtime operations, one per
// line, applied by the control plane as they arrive:
// - a message containing "{{keyword}}" asks the caller for a confirmation; the answer comes back as
//   a new request (trigger `interaction_responded`) and the run completes (or is rejected);
// - anything else: a `working` status, an artifact streamed in two chunks, then `completed`.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const SECRET = process.env.AAAS_WEBHOOK_SECRET ?? '';
const PORT = Number(process.env.PORT ?? {{port}});
const HOST = process.env.HOST ?? '127.0.0.1';
const KEYWORD = '{{keyword}}';
/** Requests signed longer ago (or further ahead) than this are refused: a replay guard. */
const TOLERANCE_SECONDS = 5 * 60;
const MAX_BODY_BYTES = 1024 * 1024;

if (!SECRET.startsWith('whsec_')) {
  console.error('AAAS_WEBHOOK_SECRET must be the whsec_… value printed by `aaas secrets create NAME --generate`');
  process.exit(1);
}
const KEY = Buffer.from(SECRET.slice('whsec_'.length), 'base64');

/**
 * Standard Webhooks: `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256>` values over
 * `<webhook-id>.<webhook-timestamp>.<body>`; one must match, and the timestamp must be recent.
 */
function verified(headers, body) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  if (!/^\d+$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const expected = createHmac('sha256', KEY).update(`${id}.${timestamp}.`).update(body).digest();
  return signatures.split(' ').some((s) => {
    const [version, value] = s.split(',');
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const textOf = (message) => (message?.parts ?? []).map((p) => p.text ?? '').join('');
const say = (text) => ({ parts: [{ text }] });

/** The operations answering one request (see the table in docs/runtimes.md). */
function operations(request) {
  const { trigger } = request;
  if (trigger.kind === 'interaction_responded') {
    const what = trigger.interaction.state?.request ?? '';
    return trigger.interaction.decision === 'approved'
      ? [{ op: 'status', status: 'completed', message: say(`Confirmed, done: ${what}`) }]
      : [{ op: 'status', status: 'rejected', message: say(`Called off: ${what}`) }];
  }
  if (trigger.kind === 'interaction_expired') return [{ op: 'status', status: 'failed', message: say('Nobody confirmed in time.') }];
  const text = textOf(request.input);
  if (text.toLowerCase().includes(KEYWORD)) {
    return [
      {
        op: 'interaction',
        kind: 'confirmation',
        message: say(`Shall I go ahead with "${text}"?`),
        options: [
          { id: 'approve', label: 'Go ahead', kind: 'approve' },
          { id: 'reject', label: 'Cancel', kind: 'reject' },
        ],
        state: { request: text },
      },
    ];
  }
  return [
    { op: 'status', status: 'working', message: say(`Working on "${text}"…`) },
    { op: 'artifact', artifactId: 'answer', name: 'answer.txt', parts: [{ text: 'You said: ' }] },
    { op: 'artifact', artifactId: 'answer', parts: [{ text }], append: true, lastChunk: true },
    { op: 'status', status: 'completed', message: say('Done.') },
  ];
}

const server = createServer((req, res) => {
  if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  req.on('end', async () => {
    if (size > MAX_BODY_BYTES) return void res.writeHead(413).end();
    const body = Buffer.concat(chunks);
    if (!verified(req.headers, body)) return void res.writeHead(401).end('invalid signature\n');
    let request;
    try {
      request = JSON.parse(body.toString('utf8'));
    } catch {
      return void res.writeHead(400).end('invalid JSON\n');
    }
    // a canceled task: the control plane POSTs {"runId","canceled":true} to the revision's cancelUrl
    if (request.canceled === true) return void res.writeHead(204).end();
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    for (const op of operations(request)) {
      res.write(`${JSON.stringify(op)}\n`);
      await new Promise((r) => setTimeout(r, 50)); // stand-in for real work: each line is applied as it arrives
    }
    res.end();
  });
});

server.listen(PORT, HOST, () => console.log(`{{slug}} listening on http://${HOST}:${server.address().port}`));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.close(() => process.exit(0)));
