import http2 from 'node:http2';
import net from 'node:net';
import * as sdk from '@a2a-js/sdk';
import { A2AService } from '@a2a-js/sdk/server/grpc';

/**
 * A raw HTTP/2 gRPC client for tests that play the attacker: frames written by hand (a length
 * prefix that need not match what follows, a message that never ends, bytes that are no
 * protobuf), many streams per connection, connections from chosen loopback addresses. What it
 * reads back is the call's status as the wire carries it (`grpc-status`, `grpc-message`, the
 * size of every trailer), and how long the server took to give it.
 */

export const A2A_SERVICE_PATH = '/lf.a2a.v1.A2AService';

/** A length-prefixed gRPC message: `declared` (default: the payload's length) after the compressed flag. */
export function grpcFrame(payload: Buffer, declared = payload.length, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(compressed ? 1 : 0, 0);
  head.writeUInt32BE(declared, 1);
  return Buffer.concat([head, payload]);
}

/** How a raw call ended. `status` is null when the stream closed without one (reset, timeout). */
export interface RawOutcome {
  status: number | null;
  message: string;
  /** Bytes of every header and trailer value the server sent (names included). */
  headerBytes: number;
  /** The trailers and headers as received (lower-case names). */
  headers: Record<string, string>;
  ms: number;
  /** The HTTP/2 error code of a reset stream, if it was reset. */
  rstCode?: number;
  /** When it ended (performance.now()). */
  endedAt: number;
  /** The client gave up waiting (`timeoutMs`): the server neither answered nor closed the stream. */
  timedOut: boolean;
}

export interface RawCall {
  stream: http2.ClientHttp2Stream;
  done: Promise<RawOutcome>;
}

/**
 * A connection to `target` (`http://host:port`), from `localAddress` when given (e.g. 127.0.0.7);
 * resolves once the server's SETTINGS arrived (so `remoteSettings` are the server's).
 */
export function connect(target: string, localAddress?: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const url = new URL(target);
    const session = http2.connect(target, localAddress ? { createConnection: () => net.connect({ host: url.hostname, port: Number(url.port), localAddress }) } : {});
    session.once('remoteSettings', () => resolve(session));
    session.once('error', reject);
    // an attacker does not care about errors after connecting
    session.on('error', () => undefined);
  });
}

/**
 * Start a call of `method` (an A2AService method, or a full path `/<service>/<method>`) on
 * `session` with request metadata `metadata`; write nothing yet.
 * `done` settles when the server ends the call (status in headers or trailers), the stream closes,
 * or `timeoutMs` passes (status null).
 */
export function startCall(session: http2.ClientHttp2Session, method: string, metadata: Record<string, string> = {}, timeoutMs = 30_000): RawCall {
  const t0 = performance.now();
  const stream = session.request({
    ':method': 'POST',
    ':path': method.startsWith('/') ? method : `${A2A_SERVICE_PATH}/${method}`,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...metadata,
  });
  stream.on('error', () => undefined);
  const headers: Record<string, string> = {};
  let headerBytes = 0;
  const take = (h: http2.IncomingHttpHeaders) => {
    for (const [k, v] of Object.entries(h)) {
      if (v === undefined) continue;
      const value = Array.isArray(v) ? v.join(',') : String(v);
      headers[k] = value;
      headerBytes += k.length + Buffer.byteLength(value);
    }
  };
  const done = new Promise<RawOutcome>((resolve) => {
    let settled = false;
    let timedOut = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const status = headers['grpc-status'] !== undefined ? Number(headers['grpc-status']) : null;
      let message = headers['grpc-message'] ?? '';
      try {
        message = decodeURIComponent(message);
      } catch {
        // kept as sent
      }
      resolve({ status, message, headerBytes, headers, ms: performance.now() - t0, endedAt: performance.now(), timedOut, ...(stream.rstCode ? { rstCode: stream.rstCode } : {}) });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      finish();
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, timeoutMs);
    stream.on('response', (h) => {
      take(h);
      if (h['grpc-status'] !== undefined) finish();
    });
    stream.on('trailers', (h) => {
      take(h);
      finish();
    });
    stream.on('data', () => undefined);
    stream.on('close', finish);
  });
  return { stream, done };
}

/** One complete call: `body` (already framed) written and the request ended. */
export function rawCall(session: http2.ClientHttp2Session, method: string, body: Buffer, metadata: Record<string, string> = {}, timeoutMs = 30_000): Promise<RawOutcome> {
  const call = startCall(session, method, metadata, timeoutMs);
  call.stream.end(body);
  return call.done;
}

type A2AMethodName = keyof typeof A2AService;

/**
 * The binary request of `method` from its ProtoJSON (`@a2a-js/sdk`'s codecs), framed: what a
 * well-behaved client would send.
 */
export function encodeRequest(method: A2AMethodName, json: Record<string, unknown>): Buffer {
  const def = A2AService[method] as unknown as { requestSerialize(v: unknown): Buffer };
  const codec = REQUEST_CODECS[method] as { fromJSON(o: unknown): unknown };
  return grpcFrame(Buffer.from(def.requestSerialize(codec.fromJSON(json))));
}

const REQUEST_CODECS: Record<A2AMethodName, unknown> = {
  sendMessage: sdk.SendMessageRequest,
  sendStreamingMessage: sdk.SendMessageRequest,
  getTask: sdk.GetTaskRequest,
  listTasks: sdk.ListTasksRequest,
  cancelTask: sdk.CancelTaskRequest,
  subscribeToTask: sdk.SubscribeToTaskRequest,
  createTaskPushNotificationConfig: sdk.TaskPushNotificationConfig,
  getTaskPushNotificationConfig: sdk.GetTaskPushNotificationConfigRequest,
  listTaskPushNotificationConfigs: sdk.ListTaskPushNotificationConfigsRequest,
  getExtendedAgentCard: sdk.GetExtendedAgentCardRequest,
  deleteTaskPushNotificationConfig: sdk.DeleteTaskPushNotificationConfigRequest,
};
