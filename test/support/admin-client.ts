import type { z } from 'zod';
import type { A2AProfileSchema, A2ATransport, BindingSecurity } from '#libs/contracts';

/** A revision's A2A profile as a request gives it (defaulted fields optional). */
type A2AProfileInput = z.input<typeof A2AProfileSchema>;

/**
 * Tiny typed helpers over `fetch` for tests that need agents published through the real admin
 * API (apps/api/src/admin) of a running app. They never throw on an HTTP error status:
 * `adminRequest` hands back `{ status, body }`, `publishAgent` throws with the failing step.
 */

export interface AdminResponse<T = any> {
  status: number;
  /** Parsed JSON body; `undefined` for an empty body (e.g. 204). */
  body: T;
  headers: Headers;
}

/**
 * One admin API call. `key` goes in `Authorization: Bearer` (omit it with `null`); `body` is sent
 * as JSON unless it is a string (sent verbatim, e.g. to test malformed JSON).
 */
export async function adminRequest<T = any>(
  baseUrl: string,
  key: string | null,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<AdminResponse<T>> {
  const h: Record<string, string> = { accept: 'application/json', ...headers };
  if (key !== null) h.authorization = `Bearer ${key}`;
  let payload: string | undefined;
  if (body !== undefined) {
    h['content-type'] ??= 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers: h, body: payload });
  const text = await res.text();
  let parsed: unknown = undefined;
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

export interface PublishAgentOptions {
  slug: string;
  name?: string;
  description?: string;
  /** Runtime config of the revision; default `{ kind: 'scripted', rules: [] }` (echo). */
  runtime?: unknown;
  /** Merged over the default A2A profile (one `echo` skill). */
  a2a?: Partial<A2AProfileInput>;
  /** Binding transports; default `['JSONRPC']`. */
  transports?: A2ATransport[];
  /** Binding security; default `{ scheme: 'none' }`. */
  security?: BindingSecurity;
  isDefault?: boolean;
}

export interface PublishedAgent {
  agentId: string;
  revisionId: string;
  slug: string;
  orgSlug: string;
  /** `${baseUrl}${basePath}/.well-known/agent-card.json` */
  cardUrl: string;
  /** `/a2a/<orgSlug>/<slug>` */
  basePath: string;
}

/** The A2A profile `publishAgent` uses unless told otherwise. */
export const DEFAULT_TEST_A2A_PROFILE = {
  skillsProjection: [{ id: 'echo', name: 'Echo', description: 'Echoes', tags: ['demo'] }],
} satisfies Partial<A2AProfileInput>;

/**
 * Create agent → create draft revision → publish → set active → PUT the A2A binding, with the
 * admin key's organization. Throws an Error naming the step (with status and body) on failure.
 */
export async function publishAgent(baseUrl: string, adminKey: string, opts: PublishAgentOptions): Promise<PublishedAgent> {
  const step = async <T>(what: string, expected: number[], method: string, path: string, body?: unknown): Promise<T> => {
    const res = await adminRequest<T>(baseUrl, adminKey, method, path, body);
    if (!expected.includes(res.status)) {
      throw new Error(`publishAgent: ${what} failed with ${res.status}: ${JSON.stringify(res.body)}`);
    }
    return res.body;
  };

  const org = await step<{ slug: string }>('get organization', [200], 'GET', '/v1/organization');
  const agent = await step<{ id: string; slug: string }>('create agent', [201], 'POST', '/v1/agents', {
    slug: opts.slug,
    name: opts.name ?? opts.slug,
    description: opts.description ?? `Test agent ${opts.slug}`,
    ...(opts.isDefault !== undefined ? { isDefault: opts.isDefault } : {}),
  });
  const revision = await step<{ id: string }>('create revision', [201], 'POST', `/v1/agents/${agent.id}/revisions`, {
    protocolProfiles: { a2a: { ...DEFAULT_TEST_A2A_PROFILE, ...opts.a2a } },
    runtime: opts.runtime ?? { kind: 'scripted', rules: [] },
  });
  await step('publish revision', [200], 'POST', `/v1/agents/${agent.id}/revisions/${revision.id}/publish`);
  await step('set active revision', [200], 'PUT', `/v1/agents/${agent.id}/active-revision`, { revisionId: revision.id });
  await step('put a2a binding', [200, 201], 'PUT', `/v1/agents/${agent.id}/bindings/a2a`, {
    transports: opts.transports ?? ['JSONRPC'],
    security: opts.security ?? { scheme: 'none' },
  });

  const basePath = `/a2a/${org.slug}/${agent.slug}`;
  return {
    agentId: agent.id,
    revisionId: revision.id,
    slug: agent.slug,
    orgSlug: org.slug,
    basePath,
    cardUrl: `${baseUrl}${basePath}/.well-known/agent-card.json`,
  };
}
