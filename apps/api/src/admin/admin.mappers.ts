import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '#libs/common';
import type {
  A2ABindingResponse,
  AgentDetailResponse,
  AgentResponse,
  ApiKeyResponse,
  CreatedApiKeyResponse,
  OrganizationResponse,
  RevisionResponse,
  RunDetailResponse,
  RunSummaryResponse,
} from '#libs/contracts';
import type { A2ABinding, Agent, ApiKeyInfo, CreatedApiKey, Organization, Revision } from '#libs/registry';
import type { InteractionRecord, RunLinkRecord, RunState, RunView } from '#libs/runs';
import { z } from 'zod';

/** Domain objects → admin API response bodies (contracts in libs/contracts/src/admin.schema.ts). */

const iso = (d: Date | string): string => new Date(d).toISOString();
const isoOrNull = (d: Date | string | null): string | null => (d === null ? null : iso(d));

export const toOrganizationResponse = (o: Organization): OrganizationResponse => ({ id: o.id, slug: o.slug, name: o.name, createdAt: iso(o.createdAt) });

export const toApiKeyResponse = (k: ApiKeyInfo): ApiKeyResponse => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  scopes: k.scopes,
  createdAt: iso(k.createdAt),
  revokedAt: isoOrNull(k.revokedAt),
  lastUsedAt: isoOrNull(k.lastUsedAt),
});

export const toCreatedApiKeyResponse = (k: CreatedApiKey): CreatedApiKeyResponse => ({
  id: k.id,
  name: k.name,
  key: k.key,
  prefix: k.prefix,
  scopes: k.scopes,
  createdAt: iso(k.createdAt),
  // a key just created has not authenticated anything yet
  lastUsedAt: null,
});

export const toAgentResponse = (a: Agent): AgentResponse => ({
  id: a.id,
  slug: a.slug,
  name: a.name,
  description: a.description,
  provider: a.provider,
  documentationUrl: a.documentationUrl,
  iconUrl: a.iconUrl,
  isDefault: a.isDefault,
  activeRevisionId: a.activeRevisionId,
  createdAt: iso(a.createdAt),
  updatedAt: iso(a.updatedAt),
});

export const toBindingResponse = (b: A2ABinding): A2ABindingResponse => ({
  id: b.id,
  agentId: b.agentId,
  protocol: 'a2a',
  path: b.path,
  transports: b.transports,
  security: b.security,
  extensions: b.extensions,
  enabled: b.enabled,
  createdAt: iso(b.createdAt),
  updatedAt: iso(b.updatedAt),
});

export const toAgentDetailResponse = (a: Agent, binding: A2ABinding | null): AgentDetailResponse => ({
  ...toAgentResponse(a),
  binding: binding ? toBindingResponse(binding) : null,
});

export const toRevisionResponse = (r: Revision): RevisionResponse => ({
  id: r.id,
  agentId: r.agentId,
  number: r.number,
  status: r.status,
  protocolProfiles: r.protocolProfiles,
  runtime: r.runtime as RevisionResponse['runtime'],
  createdAt: iso(r.createdAt),
  publishedAt: isoOrNull(r.publishedAt),
  retiredAt: isoOrNull(r.retiredAt),
});

export const toRunSummary = (r: RunState): RunSummaryResponse => ({
  id: r.id,
  agentId: r.agentId,
  revisionId: r.revisionId,
  contextId: r.threadId,
  kind: r.kind,
  status: r.status,
  blockedReason: r.blockedReason,
  lastSequence: r.lastSequence,
  metadata: r.metadata,
  createdAt: iso(r.createdAt),
  updatedAt: iso(r.updatedAt),
  statusAt: iso(r.statusAt),
});

export const toRunDetail = (
  v: RunView,
  interactions: InteractionRecord[],
  links: { children: RunLinkRecord[]; parents: RunLinkRecord[] },
): RunDetailResponse => ({
  run: { ...toRunSummary(v.run), openInteractionId: v.run.openInteractionId },
  statusMessage: v.statusMessage,
  history: v.history,
  artifacts: v.artifacts,
  interactions,
  links,
});

// ------------------------------------------------------------------ run list cursor

const CursorSchema = z.strictObject({ s: z.iso.datetime(), i: z.uuid(), m: z.string() });
const CURSOR_DOMAIN = 'aaas.admin.runs.cursor/v1\n';

function cursorMac(secret: string, s: string, i: string): string {
  return createHmac('sha256', secret).update(`${CURSOR_DOMAIN}${s}\n${i}`).digest('base64url').slice(0, 22);
}

/**
 * Opaque keyset cursor of GET /v1/runs: base64url of `{ s: statusAt, i: id, m: hmac }` of the last
 * run, the HMAC keyed with PAGE_TOKEN_SECRET so an edited or forged cursor is refused.
 */
export function encodeRunCursor(run: { statusAt: Date | string; id: string }, secret: string): string {
  const s = iso(run.statusAt);
  return Buffer.from(JSON.stringify({ s, i: run.id, m: cursorMac(secret, s, run.id) }), 'utf8').toString('base64url');
}

/** Throws 422 `request.invalid` (path `cursor`) for anything `encodeRunCursor` did not make. */
export function decodeRunCursor(cursor: string, secret: string): { statusAt: Date; id: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    raw = undefined;
  }
  const parsed = CursorSchema.safeParse(raw);
  const expected = parsed.success ? Buffer.from(cursorMac(secret, parsed.data.s, parsed.data.i)) : null;
  const given = parsed.success ? Buffer.from(parsed.data.m) : null;
  if (!parsed.success || !expected || !given || expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new AppError('request.invalid', 'invalid cursor', { details: { issues: [{ path: 'cursor', message: 'not a cursor returned by this API' }] } });
  }
  return { statusAt: new Date(parsed.data.s), id: parsed.data.i };
}
