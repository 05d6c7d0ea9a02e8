/**
 * The console's only data path: the admin API (/v1/...) of the origin that served it, with the
 * signed-in key in the X-API-Key header. Errors come back as ApiError with the API's
 * `{ error: { code, message, details } }`.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export interface Api {
  key: string;
  get<T>(path: string, query?: Record<string, string | number | undefined | null>): Promise<T>;
  send<T>(method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T>;
}

export function queryString(query: Record<string, string | number | undefined | null> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

async function call<T>(key: string, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', 'x-api-key': key };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'network', `the API did not answer (${e instanceof Error ? e.message : String(e)})`);
  }
  const text = await res.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const err = parsed?.error;
    throw new ApiError(res.status, err?.code ?? `http_${res.status}`, err?.message ?? `HTTP ${res.status}`, err?.details);
  }
  return parsed as T;
}

export function createApi(key: string): Api {
  return {
    key,
    get: (path, query) => call(key, 'GET', `${path}${queryString(query)}`),
    send: (method, path, body) => call(key, method, path, body),
  };
}

export const enc = encodeURIComponent;

// ---------------------------------------------------------------- shapes (the admin API's JSON)

export type RunStatus = 'submitted' | 'working' | 'input_required' | 'auth_required' | 'completed' | 'failed' | 'canceled' | 'rejected';
export const RUN_STATUSES: RunStatus[] = ['submitted', 'working', 'input_required', 'auth_required', 'completed', 'failed', 'canceled', 'rejected'];
export const TERMINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'canceled', 'rejected']);
export const BLOCKED_REASONS = ['input_required', 'auth_required', 'confirmation_required'] as const;

export interface Organization {
  id: string;
  slug: string;
  name: string;
}
export interface Agent {
  id: string;
  slug: string;
  name: string;
  description: string;
  isDefault: boolean;
  activeRevisionId: string | null;
  createdAt: string;
  updatedAt: string;
}
export interface Revision {
  id: string;
  agentId: string;
  number: number;
  status: 'draft' | 'published' | 'retired';
  protocolProfiles: Record<string, unknown>;
  runtime: Record<string, unknown>;
  createdAt: string;
  publishedAt: string | null;
  retiredAt: string | null;
}
export interface Binding {
  id: string;
  path: string;
  transports: string[];
  security: Record<string, unknown>;
  extensions: Array<{ uri: string; required?: boolean; description?: string; params?: unknown }>;
  enabled: boolean;
  updatedAt: string;
}
export interface RunSummary {
  id: string;
  agentId: string;
  revisionId: string;
  contextId: string;
  status: RunStatus;
  blockedReason: string | null;
  lastSequence: number;
  createdAt: string;
  updatedAt: string;
  statusAt: string;
  /** `execution`: an A2A Task; `reply`: a direct reply (an A2A Message, recorded complete). */
  kind: 'execution' | 'reply';
}
export interface Part {
  text?: string;
  data?: unknown;
  url?: string;
  raw?: string;
  filename?: string;
  mediaType?: string;
  metadata?: unknown;
}
export interface Message {
  messageId: string;
  role: string;
  parts: Part[];
}
export interface Interaction {
  id: string;
  kind: 'input' | 'auth' | 'confirmation';
  blocking: boolean;
  blockedReason: string | null;
  status: string;
  request: { title?: string; description?: string; message?: Message; options?: Array<{ id: string; label?: string; kind?: string }>; [k: string]: unknown };
  response: Record<string, unknown> | null;
  expiresAt: string | null;
  sequence: number;
  createdAt: string;
  closedAt: string | null;
}
export interface RunLink {
  id: string;
  kind: string;
  parentRunId: string;
  childRunId: string;
  awaiting: boolean;
  other: { runId: string; agentId: string; status: RunStatus; blockedReason: string | null };
}
export interface RunDetail {
  run: RunSummary & { openInteractionId: string | null };
  statusMessage: Message | null;
  history: Message[];
  artifacts: Array<{ artifactId: string; name?: string | null; description?: string | null; parts: Part[]; complete?: boolean }>;
  interactions: Interaction[];
  links: { children: RunLink[]; parents: RunLink[] };
}
export interface Envelope {
  runId: string;
  sequence: number;
  occurredAt: string;
  event: { type: string; payload: any };
}
export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}
export interface SigningKey {
  id: string;
  kid: string;
  alg: string;
  status: string;
  createdAt: string;
  retiredAt: string | null;
  [k: string]: unknown;
}
