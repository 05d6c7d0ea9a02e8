import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import helmet from '@fastify/helmet';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** URL prefix of the operator console (apps/console, built to dist/console). */
export const CONSOLE_PREFIX = '/console';

/**
 * The console's Content-Security-Policy: its own scripts, styles and API only — no inline script
 * or style, no other origin, no framing. (`data:` images: the CSS kit draws its icons as data URLs.)
 */
export const CONSOLE_CSP_DIRECTIVES = {
  defaultSrc: ["'self'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'"],
  imgSrc: ["'self'", 'data:'],
  fontSrc: ["'self'"],
  connectSrc: ["'self'"],
  objectSrc: ["'none'"],
  baseUri: ["'none'"],
  formAction: ["'self'"],
  frameAncestors: ["'none'"],
  upgradeInsecureRequests: null,
};

/**
 * Where the built console is: `dist/console` beside the compiled app (dist/apps/api/src/console →
 * dist/console), or under the repository root when the app runs from source (tests, dev).
 */
export function consoleRoot(): string | null {
  const up = new URL('../../../../', import.meta.url);
  for (const candidate of [new URL('console/', up), new URL('dist/console/', up)]) {
    const dir = fileURLToPath(candidate);
    if (existsSync(`${dir}index.html`)) return dir;
  }
  return null;
}

/**
 * Serve the console under /console (static files with @fastify/static; any other /console/* path
 * answers index.html, so the client router's deep links load), with a strict CSP on those routes
 * only (the API's own routes keep helmet's other headers, CSP off). Without a build, /console
 * answers 503 saying how to build it. Call after the global helmet registration.
 */
export async function installConsole(fastify: FastifyInstance, root: string | null = consoleRoot()): Promise<void> {
  await fastify.register(
    async (scope) => {
      await scope.register(helmet, { contentSecurityPolicy: { useDefaults: false, directives: CONSOLE_CSP_DIRECTIVES }, crossOriginResourcePolicy: { policy: 'same-origin' } });
      if (!root) {
        const unbuilt = (_req: unknown, reply: FastifyReply) => reply.code(503).type('text/plain; charset=utf-8').send('The console is not built: run `npm run build`.\n');
        scope.get('/', unbuilt);
        scope.get('/*', unbuilt);
        return;
      }
      await scope.register(fastifyStatic, { root, prefix: '/', index: ['index.html'], wildcard: false, cacheControl: false, decorateReply: true });
      // hashed assets are immutable; index.html must be revalidated so a new build is picked up
      scope.addHook('onSend', (req, reply, payload, done) => {
        reply.header('cache-control', req.url.startsWith(`${CONSOLE_PREFIX}/assets/`) ? 'public, max-age=31536000, immutable' : 'no-cache');
        done(null, payload);
      });
      // the SPA fallback: a client route (not a file) gets the app, which routes itself
      scope.get('/*', (req, reply) => {
        if (/^\/console\/assets\//.test(req.url)) return reply.code(404).type('text/plain; charset=utf-8').send('No such asset.\n');
        return reply.sendFile('index.html');
      });
    },
    { prefix: CONSOLE_PREFIX },
  );
}
