/**
 * The CLI's HTTP client of the admin API, and the errors the CLI exits with.
 *
 * Every failure is one of two kinds, because callers treat them differently: `ApiError` (the
 * service answered with a non-2xx status and, usually, its `{ error: { code, message } }` body)
 * and `NetworkError` (no usable answer: refused, reset, timed out, a truncated or non-JSON body).
 * A retrying caller (`runs tail`) retries a `NetworkError` and a 5xx `ApiError`, never a 4xx.
 */

/** A non-2xx answer of the admin API. The message keeps the API's code: `GET /v1/runs/x: HTTP 404 run.not_found …`. */
export class ApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly apiMessage: string,
  ) {
    super(`${method} ${path}: HTTP ${status} ${code ?? ''} ${apiMessage}`.replace(/\s+/g, ' ').trim());
  }

  /** 5xx: the service (or a proxy in front of it) failed; the same request may succeed later. */
  get retryable(): boolean {
    return this.status >= 500;
  }
}

/** No usable answer from the service; `reason` is short (`ECONNREFUSED`, `timeout`, `other side closed`). */
export class NetworkError extends Error {
  constructor(
    readonly method: string,
    /** The whole URL called. */
    readonly url: string,
    readonly reason: string,
  ) {
    super(`${method} ${url}: no answer (${reason})`);
  }

  readonly retryable = true;
}

/** A bad command line or input file (exit 2, like commander's own usage errors). */
export class UsageError extends Error {}

/** Short reason of a fetch failure: undici hides the useful part in `cause`. */
export function networkReason(e: unknown): string {
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError')) return 'timeout';
  const cause = (e as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  if (cause?.code) return cause.code;
  if (cause?.message) return cause.message;
  return e instanceof Error ? e.message : String(e);
}

export interface AdminClientOptions {
  /** The service's base URL, e.g. http://localhost:3000. */
  baseUrl: string;
  /** An API key of the organization (sent as a bearer token); checked when the first call is made. */
  key: string | undefined;
  /** Per-request timeout (ms); default 30 s. */
  timeoutMs?: number;
}

/** Admin API calls: JSON in, JSON out, typed failures (see the file's docstring). */
export class AdminClient {
  private readonly base: string;

  constructor(private readonly opts: AdminClientOptions) {
    this.base = opts.baseUrl.replace(/\/+$/, '');
  }

  /** One call; resolves to the parsed JSON body (null for an empty one, e.g. 204). */
  async call<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    if (!this.opts.key) throw new UsageError('an API key is needed: --key or AAAS_API_KEY');
    let status: number;
    let text: string;
    try {
      const res = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.opts.key}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 30_000),
      });
      status = res.status;
      text = await res.text();
    } catch (e) {
      throw new NetworkError(method, `${this.base}${path}`, networkReason(e));
    }
    let json: any = null;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        // a proxy's error page, or a body cut short: not the API speaking
        if (status >= 200 && status < 300) throw new NetworkError(method, `${this.base}${path}`, 'the answer is not JSON');
      }
    }
    if (status < 200 || status >= 300) {
      const message = typeof json?.error?.message === 'string' ? json.error.message : text.slice(0, 200);
      throw new ApiError(method, path, status, typeof json?.error?.code === 'string' ? json.error.code : undefined, message);
    }
    return json as T;
  }

  /**
   * A call whose body (in or out) is a stream, e.g. a run archive: resolves to the response once
   * its status is 2xx (the body unread); a non-2xx answer is an `ApiError`, no answer a
   * `NetworkError`. No overall timeout (a stream lasts as long as it lasts); `signal` aborts.
   */
  async stream(method: string, path: string, init: { body?: ReadableStream<Uint8Array>; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    if (!this.opts.key) throw new UsageError('an API key is needed: --key or AAAS_API_KEY');
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.opts.key}`, ...init.headers },
        ...(init.body !== undefined && { body: init.body, duplex: 'half' }),
        ...(init.signal !== undefined && { signal: init.signal }),
      } as RequestInit);
    } catch (e) {
      throw new NetworkError(method, `${this.base}${path}`, networkReason(e));
    }
    if (res.status >= 200 && res.status < 300) return res;
    const text = await res.text().catch(() => '');
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      // not the API speaking
    }
    const message = typeof json?.error?.message === 'string' ? json.error.message : text.slice(0, 200);
    throw new ApiError(method, path, res.status, typeof json?.error?.code === 'string' ? json.error.code : undefined, message);
  }
}
