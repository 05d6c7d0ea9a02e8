import http from 'node:http';
import type net from 'node:net';

/**
 * The counting backend of the `http` runtime (wire contract: docs/runtimes.md, `HttpRuntimeRequest`
 * and `HttpRuntimeOperationSchema` in libs/contracts/src/runtime.schema.ts), in the scenario
 * script's own process. Every POST is recorded (its `webhook-id`, the run, the trigger kind) and
 * answered with NDJSON runtime operations, deterministic per input text (`httpPlan`): a `working`
 * status, N artifact chunks D ms apart, `completed`, every operation with an `id`. A resumed
 * request (`trigger.kind = "resumed"`) continues: the operations whose ids its `applied` lists are
 * not sent again (the contract's "continues from what `applied` says").
 *
 * The signature is not verified: the backend is loopback-only and counts, it does not guard.
 */

/** One POST the backend received. */
export interface BackendCall {
  /** Standard Webhooks `webhook-id`: stable per execution, reused by a resumption of it. */
  webhookId: string;
  runId: string;
  /** `trigger.kind` of the body (`created`, `resumed`, …). */
  trigger: string;
  /** `trigger.applied.length` of a resumed request. */
  applied: number;
  /** ms since the backend started. */
  at: number;
  /** The answer went out to its end (false: the worker went away first). */
  finished: boolean;
}

/** Chunks and their spacing, read from an input text `… n=<chunks> d=<ms> …`. */
export function parseHttpInput(text: string): { chunks: number; delayMs: number } {
  const chunks = Number(/\bn=(\d+)/.exec(text)?.[1] ?? 10);
  const delayMs = Number(/\bd=(\d+)/.exec(text)?.[1] ?? 20);
  return { chunks, delayMs };
}

/** The text of chunk `i` for an input (what the log must hold, once, in order). */
export const chunkText = (input: string, i: number) => `${input} #${i};`;

/** The operations the backend answers an input with, in order (ids: `w`, `c<i>`, `done`). */
export function httpPlan(input: string): Array<Record<string, unknown>> {
  const { chunks } = parseHttpInput(input);
  return [
    { op: 'status', id: 'w', status: 'working' },
    ...Array.from({ length: chunks }, (_, i) => ({
      op: 'artifact',
      id: `c${i}`,
      artifactId: 'out',
      name: 'out.txt',
      parts: [{ text: chunkText(input, i) }],
      append: i > 0,
      lastChunk: i === chunks - 1,
    })),
    { op: 'status', id: 'done', status: 'completed' },
  ];
}

export class CountingBackend {
  readonly calls: BackendCall[] = [];
  port = 0;
  /** Answers being written now. */
  inFlight = 0;
  /** When the last request arrived or answer ended (ms since start). */
  lastActivity = 0;
  private readonly t0 = Date.now();
  private readonly sockets = new Set<net.Socket>();
  private readonly server = http.createServer((req, res) => this.handle(req, res));

  async start(): Promise<void> {
    this.server.keepAliveTimeout = 30_000;
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/run`;
  }

  /** Forget the calls recorded so far (a new scenario). */
  reset(): void {
    this.calls.length = 0;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private now(): number {
    return Date.now() - this.t0;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.lastActivity = this.now();
      let body: { run?: { runId?: string }; trigger?: { kind?: string; applied?: string[] }; input?: { parts?: Array<{ text?: string }> } };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400).end('not JSON');
        return;
      }
      const input = (body.input?.parts ?? []).map((p) => p.text ?? '').join('');
      const applied = new Set(body.trigger?.kind === 'resumed' ? (body.trigger.applied ?? []) : []);
      const call: BackendCall = {
        webhookId: String(req.headers['webhook-id'] ?? ''),
        runId: body.run?.runId ?? '',
        trigger: body.trigger?.kind ?? '',
        applied: applied.size,
        at: this.now(),
        finished: false,
      };
      this.calls.push(call);
      const ops = httpPlan(input).filter((op) => !applied.has(op.id as string));
      const { delayMs } = parseHttpInput(input);
      this.inFlight++;
      let closed = false;
      res.on('close', () => {
        if (!closed) {
          closed = true;
          this.inFlight--;
          this.lastActivity = this.now();
        }
      });
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      let i = 0;
      const next = () => {
        if (closed || res.destroyed) return;
        if (i >= ops.length) {
          call.finished = true;
          res.end();
          return;
        }
        const op = ops[i++]!;
        res.write(`${JSON.stringify(op)}\n`);
        // the spacing is between chunks; the statuses go out with their neighbours
        if (op.op === 'artifact' && i < ops.length && ops[i]!.op === 'artifact') setTimeout(next, delayMs);
        else setImmediate(next);
      };
      next();
    });
  }
}
