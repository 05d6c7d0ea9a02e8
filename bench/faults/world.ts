import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { chownSync, createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { PushReceipt } from './history.js';
import { frameDigest } from './output.js';

/**
 * The fault suite's own world: a PostgreSQL cluster (initdb + pg_ctl, on a free port, in a temp
 * dir), a redis-server, TCP proxies in front of both, API and worker processes from dist/, and a
 * push receiver. Never the shared PostgreSQL (5432) or Redis (6379). Everything started is
 * registered with `cleanup`, which also runs on SIGINT / SIGTERM / exit.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A free TCP port on 127.0.0.1 (asked of the OS): the bench's helper. */
export { freePort } from '../lib/own-services.js';

// ------------------------------------------------------------------------------------- cleanup

type SyncCleanup = () => void;
const syncCleanups: SyncCleanup[] = [];
let cleaned = false;

/** Register a last-resort synchronous cleanup (kill, stop, remove), run once, newest first. */
export function onCleanup(fn: SyncCleanup): void {
  syncCleanups.push(fn);
}

/** True once cleanup has started (nothing may be restarted any more). */
export function cleanedUp(): boolean {
  return cleaned;
}

/** Run every registered cleanup now (idempotent). */
export function cleanupNow(): void {
  if (cleaned) return;
  cleaned = true;
  for (const fn of syncCleanups.reverse()) {
    try {
      fn();
    } catch (e) {
      process.stderr.write(`[faults] cleanup step failed: ${(e as Error).message}\n`);
    }
  }
}

/** Cleanup on Ctrl-C, SIGTERM and any exit (the process then exits 130 / 143). */
export function installSignalCleanup(): void {
  process.once('exit', cleanupNow);
  for (const [sig, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    process.once(sig, () => {
      process.stderr.write(`\n[faults] ${sig}: stopping everything\n`);
      cleanupNow();
      process.exit(code);
    });
  }
}

// -------------------------------------------------------------------------------- temp dir

/** A temp dir removed at cleanup. */
export function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aaas-faults-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ------------------------------------------------------------------------------ PostgreSQL

function findPgBin(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  if (existsSync('/usr/lib/postgresql')) {
    const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const p = `/usr/lib/postgresql/${v}/bin/${name}`;
      if (existsSync(p)) return p;
    }
  }
  throw new Error(`${name} not found on PATH nor in /usr/lib/postgresql/*/bin`);
}

/**
 * A PostgreSQL cluster of our own. initdb refuses root, so as root every pg command runs as the
 * `postgres` OS user (`runuser -u postgres --`) on a dir that user owns.
 */
export class PgCluster {
  readonly dataDir: string;
  readonly socketDir: string;
  private readonly asRoot = process.getuid?.() === 0;
  private readonly uid: number;
  private readonly gid: number;

  constructor(
    private readonly root: string,
    readonly port: number,
  ) {
    this.dataDir = path.join(root, 'pgdata');
    this.socketDir = root;
    if (this.asRoot) {
      const ids = execFileSync('id', ['postgres'], { encoding: 'utf8' });
      this.uid = Number(/uid=(\d+)/.exec(ids)![1]);
      this.gid = Number(/gid=(\d+)/.exec(ids)![1]);
    } else {
      this.uid = process.getuid?.() ?? 0;
      this.gid = process.getgid?.() ?? 0;
    }
  }

  get url(): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/aaas_faults`;
  }

  private command(name: string, args: string[]): [string, string[]] {
    const bin = findPgBin(name);
    return this.asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  }

  /** Synchronous: for init and the last-resort cleanup only. */
  private pgSync(name: string, args: string[], timeoutMs = 60_000): string {
    const [cmd, argv] = this.command(name, args);
    return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, cwd: this.root });
  }

  /** Asynchronous (the proxies and clients in this process keep running meanwhile). */
  private pg(name: string, args: string[], timeoutMs = 90_000): Promise<string> {
    const [cmd, argv] = this.command(name, args);
    return new Promise((resolve, reject) => {
      execFile(cmd, argv, { encoding: 'utf8', timeout: timeoutMs, cwd: this.root }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${name} ${args[0]} failed: ${err.message} ${stderr}`.trim()));
        else resolve(stdout);
      });
    });
  }

  async init(): Promise<void> {
    if (this.asRoot) chownSync(this.root, this.uid, this.gid);
    this.pgSync('initdb', ['-D', this.dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    onCleanup(() => {
      try {
        this.pgSync('pg_ctl', ['stop', '-D', this.dataDir, '-m', 'immediate', '-w', '-t', '10'], 15_000);
      } catch {
        // not running
      }
    });
    await this.start();
  }

  private opts(): string {
    return `-p ${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.socketDir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  }

  async start(): Promise<void> {
    await this.pg('pg_ctl', ['start', '-D', this.dataDir, '-l', path.join(this.root, 'postgres.log'), '-w', '-t', '60', '-o', this.opts()]);
  }

  /** `pg_ctl stop -m fast`: every session is terminated, the server shuts down cleanly. */
  async stop(): Promise<void> {
    await this.pg('pg_ctl', ['stop', '-D', this.dataDir, '-m', 'fast', '-w', '-t', '60']);
  }

  /** `pg_ctl restart -m fast`. */
  async restart(): Promise<void> {
    await this.pg('pg_ctl', ['restart', '-D', this.dataDir, '-m', 'fast', '-w', '-t', '60', '-l', path.join(this.root, 'postgres.log'), '-o', this.opts()]);
  }

  async running(): Promise<boolean> {
    try {
      await this.pg('pg_ctl', ['status', '-D', this.dataDir]);
      return true;
    } catch {
      return false;
    }
  }
}

// ----------------------------------------------------------------------------------- Redis

/**
 * A redis-server of our own with an append-only file (fsync every second) in the temp dir:
 * `restart` is a clean shutdown (SIGTERM) and start; `kill` is SIGKILL (up to a second of
 * writes lost, as after a crash).
 */
export class RedisServer {
  private child?: ChildProcess;

  constructor(
    private readonly dir: string,
    readonly port: number,
  ) {
    onCleanup(() => {
      if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    });
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--protected-mode', 'no'], { stdio: 'ignore' });
    const deadline = Date.now() + 15_000;
    while (!(await this.ping())) {
      if (!this.running || Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not start`);
      await sleep(50);
    }
  }

  private ping(): Promise<boolean> {
    return new Promise((resolve) => {
      const s = net.connect(this.port, '127.0.0.1');
      const done = (ok: boolean) => {
        s.destroy();
        resolve(ok);
      };
      s.setTimeout(500, () => done(false));
      s.on('error', () => done(false));
      s.on('connect', () => s.write('PING\r\n'));
      s.on('data', (d) => done(d.toString().startsWith('+PONG')));
    });
  }

  async stopWith(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    });
  }
}

// ----------------------------------------------------------------------------------- proxy

/**
 * `pass` forwards; `delay` forwards every chunk `delayMs` late (order kept); `partition` accepts
 * connections and forwards nothing (open ones stall, as on a network partition).
 */
export type ProxyMode = 'pass' | 'delay' | 'partition';

/** A TCP proxy on 127.0.0.1 in front of `targetPort` that can delay, drop and cut connections. */
export class TcpProxy {
  mode: ProxyMode = 'pass';
  delayMs = 500;
  port = 0;
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.accept(client));

  constructor(readonly name: string, private readonly targetPort: number) {}

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
    onCleanup(() => {
      this.cut();
      this.server.close();
    });
  }

  private accept(client: net.Socket): void {
    client.on('error', () => undefined);
    client.setNoDelay(true);
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    upstream.setNoDelay(true);
    this.sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    this.pipe(client, upstream);
    this.pipe(upstream, client);
  }

  /** Forward `from` → `to` per the mode at the time each chunk arrives. */
  private pipe(from: net.Socket, to: net.Socket): void {
    let lastDue = 0;
    from.on('data', (chunk) => {
      if (this.mode === 'partition') {
        // swallowed: the connection is now out of step and is cut when the partition heals
        (from as net.Socket & { poisoned?: boolean }).poisoned = true;
        return;
      }
      if (this.mode === 'delay' || lastDue > Date.now()) {
        const due = Math.max(Date.now() + (this.mode === 'delay' ? this.delayMs : 0), lastDue);
        lastDue = due;
        setTimeout(() => to.writable && to.write(chunk), due - Date.now());
        return;
      }
      if (to.writable) to.write(chunk);
    });
  }

  /** Destroy every open connection (both sides). */
  cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /** Back to `pass`; connections that lost bytes in a partition are cut (their protocol state is broken). */
  heal(): void {
    const wasPartitioned = this.mode === 'partition';
    this.mode = 'pass';
    if (wasPartitioned) {
      for (const s of this.sockets) if ((s as net.Socket & { poisoned?: boolean }).poisoned) s.destroy();
      // the other half of each poisoned pair closes with it
    }
  }
}

// ------------------------------------------------------------------------- app processes

/** One API or worker process from dist/, restartable; its stderr/stdout go to a log file. */
export class AppProcess {
  private child?: ChildProcess;
  private log: WriteStream;
  starts = 0;
  /** Exits nobody asked for (e.g. a boot while its database was away), each followed by a restart. */
  crashes = 0;
  /** Per unplanned exit: when (ms since start), the exit code, and the last line the process wrote. */
  readonly crashNotes: string[] = [];
  private lastLine = '';
  /** Set by `stop` (a fault or the end): the exit is expected, no restart. */
  private stopping = false;
  private restartTimer?: NodeJS.Timeout;

  constructor(
    readonly name: string,
    private readonly script: string,
    private readonly env: Record<string, string>,
    readonly logFile: string,
    /** Base URL to wait for (APIs), or null (workers). */
    readonly baseUrl: string | null,
  ) {
    this.log = createWriteStream(logFile, { flags: 'a' });
    onCleanup(() => {
      if (this.running) this.child!.kill('SIGKILL');
    });
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    this.stopping = false;
    clearTimeout(this.restartTimer);
    if (this.running) return;
    this.starts++;
    this.log.write(`\n===== ${new Date().toISOString()} start #${this.starts}\n`);
    const child = spawn(process.execPath, [this.script], { env: { ...process.env, ...this.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [child.stdout!, child.stderr!]) {
      stream.pipe(this.log, { end: false });
      stream.on('data', (d: Buffer) => {
        const line = d.toString('utf8').trimEnd().split('\n').at(-1);
        if (line) this.lastLine = line.slice(0, 300);
      });
    }
    child.once('exit', (code, sig) => {
      this.log.write(`===== ${new Date().toISOString()} exit code=${code} signal=${sig}\n`);
      // supervised like a pod with restartPolicy Always: an exit nobody asked for is restarted
      if (this.stopping || this.child !== child || cleanedUp()) return;
      this.crashes++;
      this.crashNotes.push(`exit code=${code} signal=${sig} after: ${this.lastLine}`);
      this.restartTimer = setTimeout(() => void this.start().catch(() => undefined), 1_000);
    });
    this.child = child;
    if (this.baseUrl) await this.waitReady();
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const res = await fetch(`${this.baseUrl}/docs/openapi.json`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (!this.running) throw new Error(`${this.name} exited while starting (see ${this.logFile})`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not start within 60 s`);
      await sleep(200);
    }
  }

  /** Send `signal`; resolves when the process has exited (SIGKILL after `graceMs`). */
  async stop(signal: NodeJS.Signals, graceMs = 25_000): Promise<{ exitedInMs: number; code: number | null; signal: string | null }> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const child = this.child;
    const t0 = Date.now();
    if (!child || !this.running) return { exitedInMs: 0, code: child?.exitCode ?? null, signal: child?.signalCode ?? null };
    return new Promise((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.once('exit', (code, sig) => {
        clearTimeout(timer);
        resolve({ exitedInMs: Date.now() - t0, code, signal: sig });
      });
      child.kill(signal);
    });
  }

  /** The last `n` lines of its log. */
  tail(n = 15): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  }
}

// --------------------------------------------------------------------------- push receiver

/**
 * The push receiver: records every request (path, task, sequence, webhook-id, its answer, what
 * its body showed: output.ts frameDigest).
 * `flaky` makes it answer 500 (one in two) and 503 with Retry-After (the others).
 */
export class PushReceiver {
  readonly receipts: PushReceipt[] = [];
  flaky = false;
  port = 0;
  private n = 0;
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let status = 200;
      if (this.flaky) status = this.n++ % 2 === 0 ? 500 : 503;
      let digest: string | undefined;
      try {
        digest = frameDigest(JSON.parse(Buffer.concat(chunks).toString('utf8'))) ?? undefined;
      } catch {
        digest = undefined;
      }
      this.receipts.push({
        path: req.url ?? '',
        taskId: String(req.headers['x-a2a-task-id'] ?? ''),
        sequence: Number(req.headers['x-a2a-sequence']),
        webhookId: String(req.headers['webhook-id'] ?? ''),
        status,
        at: Date.now() - this.t0,
        ...(digest !== undefined && { digest }),
      });
      res.writeHead(status, { 'content-type': 'text/plain', ...(status === 503 ? { 'retry-after': '1' } : {}) });
      res.end(status === 200 ? 'ok' : 'no');
    });
  });

  constructor(private readonly t0: number) {}

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
    onCleanup(() => {
      this.server.closeAllConnections();
      this.server.close();
    });
  }

  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }
}
