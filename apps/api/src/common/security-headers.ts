import Fastify, { type FastifyInstance } from 'fastify';
import helmet from '@fastify/helmet';

/** helmet's options for the API's routes: CSP off (JSON and the /docs UI, no pages of our own). */
export const API_HELMET_OPTIONS = { contentSecurityPolicy: false, crossOriginResourcePolicy: { policy: 'cross-origin' } } as const;

/**
 * The response headers `@fastify/helmet` sets with `options` (lower-case name → value) and the
 * ones it removes, found once by answering one request on a throwaway Fastify instance. With CSP off
 * (no nonces) helmet's headers do not depend on the request, so they can be computed once.
 */
export async function helmetHeaders(options: object = API_HELMET_OPTIONS): Promise<{ set: Array<[string, string]>; remove: string[] }> {
  const probe = Fastify({ logger: false });
  try {
    await probe.register(helmet as never, options);
    probe.get('/', (_req, reply) => reply.send(''));
    const bare = Fastify({ logger: false });
    bare.get('/', (_req, reply) => reply.send(''));
    const [withHelmet, without] = [await probe.inject('/'), await bare.inject('/')];
    await bare.close();
    const set: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(withHelmet.headers)) {
      if (without.headers[name] === undefined && typeof value === 'string') set.push([name, value]);
    }
    // helmet also removes X-Powered-By (which Fastify never sets): kept, for the same answer
    return { set, remove: ['x-powered-by'] };
  } finally {
    await probe.close();
  }
}

/**
 * helmet's security headers on every response (API_HELMET_OPTIONS), set by one synchronous
 * `onRequest` hook from a precomputed list: the same headers `@fastify/helmet` sets, without
 * building helmet's middleware for each request (two async hooks and an options merge per
 * request). A scope registering its own helmet (the console, with its CSP) overrides them, as
 * its hooks run after this one.
 */
export async function installSecurityHeaders(fastify: FastifyInstance): Promise<void> {
  const { set, remove } = await helmetHeaders();
  fastify.addHook('onRequest', (_req, reply, done) => {
    const res = reply.raw;
    for (let i = 0; i < set.length; i++) res.setHeader(set[i]![0], set[i]![1]);
    for (let i = 0; i < remove.length; i++) res.removeHeader(remove[i]!);
    done();
  });
}

/**
 * The Content-Security-Policy of the OpenAPI UI at /docs (Swagger UI, as @nestjs/swagger serves it):
 * its scripts are files of /docs (no inline script, no eval: the bundle's `new Function` probe for
 * the global object is caught and falls back), it fetches the document and tries requests on this
 * origin only, its images are its own or `data:` URLs. Styles allow 'unsafe-inline': the page
 * carries two `<style>` blocks and a `style` attribute, and Swagger UI sets styles as it renders —
 * a style cannot run code. No plugin, no `<base>`, no framing, forms post here only.
 */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** DOCS_CSP on every response under `prefix` (the UI, its assets, the document). */
export function installDocsCsp(fastify: FastifyInstance, prefix = '/docs'): void {
  fastify.addHook('onRequest', (req, reply, done) => {
    const url = req.url;
    if (url.startsWith(prefix) && (url.length === prefix.length || url[prefix.length] === '/' || url[prefix.length] === '?')) reply.raw.setHeader('content-security-policy', DOCS_CSP);
    done();
  });
}
