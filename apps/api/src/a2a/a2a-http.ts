import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppConfig } from '#libs/config';

/** Content types the JSON-RPC binding accepts (A2A v1.0 §9, §14.1 registers application/a2a+json). */
export const JSON_RPC_CONTENT_TYPES: readonly string[] = ['application/json', 'application/a2a+json'];

/** The media type of a Content-Type header, lower-cased, without parameters; undefined when absent. */
export function mediaTypeOf(req: FastifyRequest): string | undefined {
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.trim() !== '' ? ct.split(';')[0]!.trim().toLowerCase() : undefined;
}

/** Raw `A2A-Version` of a request: the header, else the `A2A-Version` query parameter (§3.6.1). */
export function requestedVersion(req: FastifyRequest): string | undefined {
  const header = req.headers['a2a-version'];
  if (typeof header === 'string') return header;
  if (Array.isArray(header)) return header[0];
  const query = req.query as Record<string, unknown> | undefined;
  const q = query?.['A2A-Version'] ?? query?.['a2a-version'];
  return typeof q === 'string' ? q : undefined;
}

/** The API key a caller presented: header `X-API-Key`, else `Authorization: Bearer <key>`. */
export function presentedApiKey(req: FastifyRequest): string | undefined {
  const x = req.headers['x-api-key'];
  if (typeof x === 'string' && x.trim() !== '') return x.trim();
  const auth = req.headers.authorization;
  const m = typeof auth === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m ? m[1] : undefined;
}

/** The token of `Authorization: Bearer <token>`, if any. */
export function presentedBearer(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization;
  const m = typeof auth === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m ? m[1] : undefined;
}

/** The WWW-Authenticate challenge of a refused call: the error's own (a bearer binding), else the generic one. */
export function challengeOf(err: { metadata?: Record<string, string> }): string {
  return err.metadata?.challenge ?? WWW_AUTHENTICATE;
}

/**
 * Origin written into Agent Cards: PUBLIC_BASE_URL; else the request's Host when its host name is
 * in TRUSTED_HOSTS (default: loopback names, for development); else `http://localhost:<PORT>`.
 * An arbitrary Host header never reaches a (cacheable, possibly signed) card.
 */
export function publicBaseUrl(config: AppConfig, req: FastifyRequest): string {
  if (config.PUBLIC_BASE_URL) return configuredBaseUrl(config);
  const host = req.host;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  if (/^[A-Za-z0-9.\-\[\]:]+$/.test(host) && config.TRUSTED_HOSTS.includes(name.toLowerCase())) return `${req.protocol}://${host}`;
  return configuredBaseUrl(config);
}

/** Origin written into Agent Cards when there is no HTTP request to read (gRPC): PUBLIC_BASE_URL, else `http://localhost:<PORT>`. */
export function configuredBaseUrl(config: AppConfig): string {
  return config.PUBLIC_BASE_URL ? config.PUBLIC_BASE_URL.replace(/\/+$/, '') : `http://localhost:${config.PORT}`;
}

export function sendJson(reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): void {
  void reply.status(status).headers({ 'content-type': 'application/json; charset=utf-8', ...headers }).send(JSON.stringify(body));
}

/** Challenge sent with 401 by both bindings: a bearer token or the `X-API-Key` header carry the key. */
export const WWW_AUTHENTICATE = 'Bearer realm="a2a", ApiKey realm="a2a", header="X-API-Key"';
