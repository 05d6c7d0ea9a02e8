import * as grpc from '@grpc/grpc-js';
import type { AppConfig } from '#libs/config';
import { API_KEY_PATTERN, type ApiKeyService } from '#libs/registry';
import type { PresentedCredentials } from '../a2a/a2a-admission.js';
import { authenticatesAtEdge } from '../common/rate-limit.js';
import type { GrpcCallLimits, Refusal } from './grpc-limits.js';

/** The path prefix of the A2A service's methods (a2a.proto `lf.a2a.v1.A2AService`). */
const A2A_SERVICE_PREFIX = '/lf.a2a.v1.A2AService/';

/** A status as grpc-js sends it. */
type CallStatus = Parameters<grpc.ServerInterceptingCallInterface['sendStatus']>[0];

/** Longest status message sent (`grpc-message`), in UTF-8 bytes; longer ones are cut with `…`. */
export const MAX_STATUS_MESSAGE_BYTES = 512;
/** Longest text trailer value sent (UTF-8 bytes); longer ones are cut with `…`. */
export const MAX_TRAILER_TEXT_BYTES = 1_024;
/** Largest binary (`-bin`) trailer sent; a larger one is dropped (never expected: ErrorInfo is bounded where it is made). */
export const MAX_TRAILER_BINARY_BYTES = 4_096;

/** What the gate established about a call before its message was read; the handler reads it back by the call's metadata. */
export interface GrpcCallTicket {
  /** The client address the per-address limits count (an IPv6 address's /64). */
  readonly address: string;
  /** The credential the metadata presents (`x-api-key`, else `authorization`), as presented. */
  readonly credential: string | undefined;
  /** The public prefix of the API key that authenticated from the metadata; undefined when none did. */
  readonly keyPrefix: string | undefined;
  /** Admission succeeded: the call no longer counts as one before authentication. */
  admitted(): void;
}

/** The receive state of grpc-js 1.14's BaseServerInterceptingCall that a per-call limit needs (no public API sets it). */
interface ReceiveInternals {
  decoder?: { maxReadMessageLength?: unknown };
  maxReceiveMessageSize?: unknown;
}

/**
 * What a gRPC call must pass before its request message is read (issue #43): the per-address cap
 * on open calls (GRPC_MAX_CALLS_PER_ADDRESS), authentication of an API key from the metadata, the
 * rate limits (GrpcCallLimits: per key once it authenticated, else per address), the caps on calls
 * without a valid key (GRPC_PREAUTH_MAX_CALLS, GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS) and their
 * smaller message limit (GRPC_PREAUTH_MAX_MESSAGE_BYTES; a key that authenticated raises the
 * call's to REQUEST_BODY_LIMIT_BYTES), and a receive deadline (GRPC_RECEIVE_TIMEOUT_MS: the request
 * complete and half-closed, or DEADLINE_EXCEEDED). A grpc-js server interceptor, the server's only
 * one: grpc-js reads a call's body only once the handler asks for it (after its metadata passed
 * here), so a refused call costs its headers and the HTTP/2 window, never its message.
 *
 * Every status the call ends with passes here too (grpc-js's own included): its message and text
 * trailers are cut to MAX_STATUS_MESSAGE_BYTES / MAX_TRAILER_TEXT_BYTES, an oversized binary
 * trailer is dropped, and grpc-js's answers to malformed input (INTERNAL for an unparsable
 * `grpc-timeout` or a message that does not decompress, UNIMPLEMENTED for a call without its
 * request message or with two) become INVALID_ARGUMENT. Refusals: RESOURCE_EXHAUSTED
 * (with `retry-after` for a rate limit), DEADLINE_EXCEEDED. Counts are per API process.
 */
export class GrpcCallGate {
  private readonly tickets = new WeakMap<grpc.Metadata, GrpcCallTicket>();
  private readonly openByAddress = new Map<string, number>();
  private readonly preauthByAddress = new Map<string, number>();
  private preauth = 0;
  private warnedInternals = false;
  /** The receive limit of a call before authentication (the server's `grpc.max_receive_message_length`). */
  readonly preauthMessageBytes: number;

  constructor(
    private readonly config: Pick<
      AppConfig,
      | 'REQUEST_BODY_LIMIT_BYTES'
      | 'GRPC_MAX_CALLS_PER_ADDRESS'
      | 'GRPC_PREAUTH_MAX_MESSAGE_BYTES'
      | 'GRPC_PREAUTH_MAX_CALLS'
      | 'GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS'
      | 'GRPC_RECEIVE_TIMEOUT_MS'
    >,
    private readonly keys: Pick<ApiKeyService, 'authenticate'>,
    private readonly limits: GrpcCallLimits,
    private readonly warn: (message: string) => void,
  ) {
    this.preauthMessageBytes = Math.min(config.GRPC_PREAUTH_MAX_MESSAGE_BYTES, config.REQUEST_BODY_LIMIT_BYTES);
  }

  /** The server interceptor (pass it as the server's only one, so it wraps grpc-js's own call). */
  readonly interceptor: grpc.ServerInterceptor = (method, next) => this.gate(next, method.path.startsWith(A2A_SERVICE_PREFIX));

  /** The ticket of the call whose request metadata this is (the handler's `call.metadata`). */
  ticketOf(metadata: grpc.Metadata): GrpcCallTicket | undefined {
    return this.tickets.get(metadata);
  }

  /** Calls open and calls before authentication, now (for tests and metrics). */
  get counts(): { open: number; preauth: number } {
    let open = 0;
    for (const n of this.openByAddress.values()) open += n;
    return { open, preauth: this.preauth };
  }

  /**
   * `a2a`: a call of the A2A service, whose handler admits it (`admitted`) after its request
   * arrived (complete and half-closed within the receive deadline). Any other call (health,
   * reflection) authenticates nobody: its first message ends the receive deadline and its count
   * before authentication, so a Watch or a reflection session may stay open (as an open call).
   */
  private gate(next: grpc.ServerInterceptingCallInterface, a2a: boolean): grpc.ServerInterceptingCall {
    const address = clientAddress(next.getConnectionInfo().remoteAddress);
    const releases: Array<() => void> = [];
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    let authenticated = false;
    let ticket: GrpcCallTicket | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      for (const release of releases.splice(0)) release();
    };
    // every status of the call, grpc-js's own included (it calls its own sendStatus), leaves through here
    const send = next.sendStatus.bind(next);
    next.sendStatus = (status: CallStatus) => {
      end();
      send(boundedStatus(clientFault(status, authenticated ? null : this.preauthMessageBytes)));
    };
    const call = new grpc.ServerInterceptingCall(next, {
      start: (startNext) =>
        startNext({
          onReceiveMetadata: (metadata, pass) => {
            const refuse = (status: CallStatus) => {
              if (!ended) call.sendStatus(status);
            };
            const open = take(this.openByAddress, address, this.config.GRPC_MAX_CALLS_PER_ADDRESS);
            if (!open) return refuse(exhausted(`too many open calls from this address (GRPC_MAX_CALLS_PER_ADDRESS ${this.config.GRPC_MAX_CALLS_PER_ADDRESS})`));
            releases.push(open);
            timer = setTimeout(
              () => refuse({ code: grpc.status.DEADLINE_EXCEEDED, details: `the request did not arrive within ${this.config.GRPC_RECEIVE_TIMEOUT_MS} ms (GRPC_RECEIVE_TIMEOUT_MS)` }),
              this.config.GRPC_RECEIVE_TIMEOUT_MS,
            );
            this.beforeRead(metadata, address, next).then(
              (outcome) => {
                if (ended) return outcome.release?.();
                if (outcome.refused) return refuse(outcome.refused);
                if (outcome.release) releases.push(outcome.release);
                authenticated = outcome.ticket.keyPrefix !== undefined;
                ticket = outcome.ticket;
                this.tickets.set(metadata, outcome.ticket);
                pass(metadata);
              },
              () => refuse({ code: grpc.status.UNAVAILABLE, details: 'the call could not be admitted now; retry' }),
            );
          },
          onReceiveMessage: (message, pass) => {
            if (!a2a) {
              clearTimeout(timer);
              ticket?.admitted();
            }
            pass(message);
          },
          onReceiveHalfClose: (pass) => {
            // the request is complete: the receive deadline is met
            clearTimeout(timer);
            pass();
          },
          onCancel: end,
        }),
    });
    return call;
  }

  /**
   * The checks on a call's metadata, before its message is read: a refusal, or its ticket and
   * what to release when it ends.
   */
  private async beforeRead(
    metadata: grpc.Metadata,
    address: string,
    call: grpc.ServerInterceptingCallInterface,
  ): Promise<{ refused?: CallStatus; ticket: GrpcCallTicket; release?: () => void }> {
    const credential = first(metadata, 'x-api-key') ?? first(metadata, 'authorization');
    const spent = this.limits.spentCredential(address, credential);
    const noTicket: GrpcCallTicket = { address, credential, keyPrefix: undefined, admitted: () => undefined };
    if (spent) return { refused: rateLimited(spent), ticket: noTicket };
    const key = credentialsOf(metadata).apiKey;
    const prefix = key ? API_KEY_PATTERN.exec(key)?.[1] : undefined;
    // authenticated: an API key the registry accepts (the agent's binding decides later what it may
    // do), known within EDGE_AUTH_WAIT_MS (a database that is slow or down is not waited on twice)
    const keyPrefix = prefix && (await authenticatesAtEdge(this.keys, key!)) ? prefix : undefined;
    if (keyPrefix) {
      const over = this.limits.count(address, keyPrefix);
      if (over) return { refused: rateLimited(over), ticket: noTicket };
      this.setReceiveLimit(call, this.config.REQUEST_BODY_LIMIT_BYTES);
      return { ticket: { address, credential, keyPrefix, admitted: () => undefined } };
    }
    const byAddress = take(this.preauthByAddress, address, this.config.GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS);
    if (!byAddress) return { refused: exhausted(`too many calls without a valid API key from this address (GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS ${this.config.GRPC_PREAUTH_MAX_CALLS_PER_ADDRESS})`), ticket: noTicket };
    if (this.config.GRPC_PREAUTH_MAX_CALLS > 0 && this.preauth >= this.config.GRPC_PREAUTH_MAX_CALLS) {
      byAddress();
      return { refused: exhausted(`too many calls without a valid API key (GRPC_PREAUTH_MAX_CALLS ${this.config.GRPC_PREAUTH_MAX_CALLS})`), ticket: noTicket };
    }
    this.preauth++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.preauth--;
      byAddress();
    };
    const over = this.limits.count(address, undefined);
    if (over) {
      release();
      return { refused: rateLimited(over), ticket: noTicket };
    }
    return { ticket: { address, credential, keyPrefix: undefined, admitted: release }, release };
  }

  /**
   * Give one call a receive limit other than the server's (grpc-js has no per-call setting: its
   * call's decoder holds the limit, and the decompressed size is checked against a field). A
   * grpc-js without them keeps the server's limit — GRPC_PREAUTH_MAX_MESSAGE_BYTES for every
   * call, the safe side —, said once in the log.
   */
  private setReceiveLimit(call: grpc.ServerInterceptingCallInterface, bytes: number): void {
    const internals = call as unknown as ReceiveInternals;
    if (internals.decoder && typeof internals.decoder.maxReadMessageLength === 'number' && typeof internals.maxReceiveMessageSize === 'number') {
      internals.decoder.maxReadMessageLength = bytes;
      internals.maxReceiveMessageSize = bytes;
      return;
    }
    if (this.warnedInternals) return;
    this.warnedInternals = true;
    this.warn('this grpc-js has no per-call receive limit where it is looked for: calls with an API key are held to GRPC_PREAUTH_MAX_MESSAGE_BYTES too');
  }
}

/** One count of `key` in `counts` unless it reached `max` (0: no limit); its release, or null. */
function take(counts: Map<string, number>, key: string, max: number): (() => void) | null {
  const n = counts.get(key) ?? 0;
  if (max > 0 && n >= max) return null;
  counts.set(key, n + 1);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    const left = (counts.get(key) ?? 1) - 1;
    if (left <= 0) counts.delete(key);
    else counts.set(key, left);
  };
}

function exhausted(details: string): CallStatus {
  return { code: grpc.status.RESOURCE_EXHAUSTED, details };
}

/** A rate-limit refusal: RESOURCE_EXHAUSTED with `retry-after` (seconds) in the trailers. */
export function rateLimited(refusal: Refusal): CallStatus {
  const metadata = new grpc.Metadata();
  metadata.set('retry-after', String(refusal.retryAfterSeconds));
  return { code: grpc.status.RESOURCE_EXHAUSTED, details: refusal.message, metadata };
}

/**
 * grpc-js's own answers to what a client sent wrong, as INVALID_ARGUMENT (a client error:
 * retrying the same bytes cannot help); its "message larger than max" says which limit applied.
 * Any other status is kept.
 */
function clientFault(status: CallStatus, preauthLimit: number | null): CallStatus {
  const details = status.details ?? '';
  if (status.code === grpc.status.INTERNAL) {
    if (details.startsWith('Invalid grpc-timeout value')) return { ...status, code: grpc.status.INVALID_ARGUMENT, details: 'invalid grpc-timeout header' };
    if (details === 'Failed to decompress message') return { ...status, code: grpc.status.INVALID_ARGUMENT, details: 'the request message could not be decompressed (grpc-encoding)' };
    if (details.startsWith('Error deserializing request')) return { ...status, code: grpc.status.INVALID_ARGUMENT, details: 'the request message is not valid protobuf' };
  }
  // a unary or server-streaming call ended without its one request message, or sent two: grpc-js says UNIMPLEMENTED
  if (status.code === grpc.status.UNIMPLEMENTED && /^Received (no request message|a second request message)/.test(details)) {
    return { ...status, code: grpc.status.INVALID_ARGUMENT, details: details.startsWith('Received no') ? 'the call ended without its request message' : 'the call sent more than one request message' };
  }
  if (status.code === grpc.status.RESOURCE_EXHAUSTED && preauthLimit !== null && /^Received message (that decompresses to a size )?larger than max/.test(details)) {
    return { ...status, details: `${details}: a call without a valid API key may send at most ${preauthLimit} bytes (GRPC_PREAUTH_MAX_MESSAGE_BYTES)` };
  }
  return status;
}

/** The status with its message and trailers bounded (see the MAX_* constants; at most 8 values per trailer). */
export function boundedStatus(status: CallStatus): CallStatus {
  const details = cutUtf8(status.details ?? '', MAX_STATUS_MESSAGE_BYTES);
  if (!status.metadata) return { ...status, details };
  const metadata = new grpc.Metadata();
  for (const [key, values] of Object.entries(status.metadata.toJSON())) {
    for (const v of values.slice(0, 8)) {
      if (typeof v === 'string') metadata.add(key, cutUtf8(v, MAX_TRAILER_TEXT_BYTES));
      else if (v.length <= MAX_TRAILER_BINARY_BYTES) metadata.add(key, v);
    }
  }
  return { ...status, details, metadata };
}

/** `s` cut to at most `max` UTF-8 bytes (the cut marked with `…`), never inside a character. */
export function cutUtf8(s: string, max: number): string {
  if (s.length * 3 <= max || Buffer.byteLength(s) <= max) return s;
  let out = Buffer.from(s).subarray(0, max - 3).toString('utf8');
  // a character cut in two decodes as U+FFFD at the end
  out = out.replace(/\uFFFD+$/, '');
  return `${out}…`;
}

/**
 * The address a client's calls are counted under: an IPv4 address (IPv4-mapped IPv6 too), or the
 * /64 of an IPv6 address (one subscriber's network, which can hold any number of addresses).
 */
export function clientAddress(remote: string | undefined): string {
  if (!remote) return 'unknown';
  const a = remote.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) return mapped[1]!;
  if (!a.includes(':')) return a;
  const [head = '', tail] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`;
}

/** Credentials in metadata, read as the HTTP bindings read their headers (`x-api-key`, else a bearer). */
export function credentialsOf(md: grpc.Metadata): PresentedCredentials {
  const auth = first(md, 'authorization');
  const bearer = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1] : undefined;
  const x = first(md, 'x-api-key')?.trim();
  return { apiKey: x ? x : bearer, bearer };
}

/** The first value of a metadata key, as a string. */
export function first(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return v === undefined ? undefined : String(v);
}
