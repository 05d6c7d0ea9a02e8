import type { A2AExtensionPlugin } from '#libs/extensions';
import type { AgentRuntime } from '#libs/runtimes';
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { createLogger, loadConfig, NestPinoLogger, type AppConfig } from '#libs/config';
import { AppModule } from './app.module.js';
import { API_KEY_SCHEME, API_KEY_SCHEME_DOC, BEARER_SCHEME, BEARER_SCHEME_DOC, contractSchemaConverter } from './admin/admin-openapi.js';
import { A2A_SPEC_URL, addA2AOpenApi } from './a2a/a2a-openapi.js';
import { AppExceptionFilter } from './common/app-exception.filter.js';
import { MalformedJson, checkJsonValue, prototypePoisoning } from './common/malformed-json.js';
import { installHttpMetrics } from './common/http-metrics.js';
import { installEdgeGuards } from './common/edge-errors.js';
import { installPreauthBodyLimits } from './common/preauth-bodies.js';
import { installRateLimits } from './common/rate-limit.js';
import { ReadYourWrites } from './common/read-your-writes.js';
import { installDocsCsp, installSecurityHeaders } from './common/security-headers.js';
import { installConsole } from './console/console.static.js';
import { Metrics } from '#libs/metrics';
import { ApiKeyService } from '#libs/registry';
import { RUN_ARCHIVE_CONTENT_TYPE } from '#libs/contracts';
import { nameServerSpan, tracedRequestListener } from '#libs/telemetry';

export type ConfigOverrides = Partial<Record<keyof AppConfig, string>>;

/** Content types whose bodies are parsed as JSON (A2A v1.0 §11.2 accepts application/a2a+json). */
export const JSON_CONTENT_TYPES = ['application/json', 'application/a2a+json'];

/**
 * Build the API app (not listening). Logging is pino through Fastify, with credentials redacted.
 * Used by main.ts, the demo and the tests.
 */
/**
 * `opts.extensions`: A2A extension plugins to register beside the built-ins (see
 * docs/extensions.md). `opts.runtimes`: runtime kinds beside the built-in ones (the worker needs
 * the same list; see docs/runtimes.md and examples/custom-runtime).
 */
export async function createApiApp(
  overrides: ConfigOverrides = {},
  opts: { extensions?: ReadonlyArray<A2AExtensionPlugin<any>>; runtimes?: AgentRuntime[] } = {},
): Promise<NestFastifyApplication> {
  const config = loadConfig({ ...process.env, ...overrides });
  // one JSON log for everything: Fastify's request lines and Nest's own, through one pino logger
  const logger = createLogger(config, 'aaas-api');
  const adapter = new FastifyAdapter({
    loggerInstance: logger,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => (typeof req.headers['x-request-id'] === 'string' ? req.headers['x-request-id'] : randomUUID()),
    bodyLimit: config.REQUEST_BODY_LIMIT_BYTES,
    // behind an ingress the client address is the forwarded one, from trusted proxies only
    trustProxy: typeof config.TRUST_PROXY === 'number' ? trustHops(config.TRUST_PROXY) : config.TRUST_PROXY,
    // `/a2a/<org>/<agent>/` answers like `/a2a/<org>/<agent>` (the TCK posts JSON-RPC to `<url>/`)
    routerOptions: { maxParamLength: 512, ignoreTrailingSlash: true },
    // A client that sends its headers and then trickles or stops its body is cut off after
    // REQUEST_TIMEOUT_MS (checked every second, not Node's default 30 s); slow headers after
    // HEADERS_TIMEOUT_MS; an idle keep-alive connection after 72 s; header size is capped.
    serverFactory: (handler: (req: IncomingMessage, res: ServerResponse) => void) =>
      createServer(
        {
          requestTimeout: config.REQUEST_TIMEOUT_MS,
          headersTimeout: Math.min(config.HEADERS_TIMEOUT_MS, config.REQUEST_TIMEOUT_MS),
          connectionsCheckingInterval: 1_000,
          keepAliveTimeout: 72_000,
          maxHeaderSize: 16 * 1024,
        },
        // each request in a server span when tracing (one boolean check when not)
        tracedRequestListener(handler),
      ),
  });
  // Never reject a body at parse time: each edge answers malformed JSON in its own protocol.
  const fastify = adapter.getInstance();
  installEdgeGuards(fastify);
  fastify.addHook('onRequest', (req, _reply, done) => {
    nameServerSpan(req.method, req.routeOptions.url);
    done();
  });
  fastify.removeContentTypeParser(['application/json']);
  fastify.addContentTypeParser(JSON_CONTENT_TYPES, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.length === 0) return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return done(null, new MalformedJson(e instanceof Error ? e.message : 'invalid JSON'));
    }
    // Fastify's prototype-poisoning protection, which replacing its parser dropped: a `__proto__`
    // key, or `constructor.prototype`, is refused (secure-json-parse scans only when the text has one)
    const poisoned = prototypePoisoning(text, value);
    if (poisoned) return done(null, new MalformedJson(poisoned, 'invalid'));
    const bad = checkJsonValue(value);
    done(null, bad ? new MalformedJson(bad.reason, 'invalid', bad.path) : value);
  });

  // run archives (POST /v1/run-archive) are read line by line from the request stream, never buffered
  fastify.addContentTypeParser(RUN_ARCHIVE_CONTENT_TYPE, (_req, payload, done) => done(null, payload));

  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(overrides, opts), adapter, {
    bodyParser: false,
    logger: config.LOG_LEVEL === 'silent' ? false : new NestPinoLogger(logger),
  });
  app.useGlobalFilters(new AppExceptionFilter());
  // the request id (X-Request-Id when the caller sent one) goes back on every response
  fastify.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  installHttpMetrics(fastify, app.get(Metrics));
  app.get(ReadYourWrites, { strict: false }).install(fastify);
  app.enableShutdownHooks();

  const stopLimiter = await installRateLimits(fastify, config, app.get(ApiKeyService, { strict: false }));
  // after the limiter, which authenticates a presented API key: bodies of requests without one are bounded
  installPreauthBodyLimits(fastify, config);
  fastify.addHook('onClose', (_i, done) => {
    stopLimiter();
    done();
  });
  // a stop always completes: responses still in flight API_SHUTDOWN_TIMEOUT_MS after close began
  // (a client that stopped reading, a stream not yet ended) have their connections destroyed
  fastify.addHook('preClose', (done) => {
    const server = fastify.server;
    setTimeout(() => server.closeAllConnections(), config.API_SHUTDOWN_TIMEOUT_MS).unref();
    done();
  });
  // security headers (helmet's, CSP off: the API serves JSON and the /docs UI, not pages of its own)
  await installSecurityHeaders(fastify);
  // the operator console at /console (static, its own strict CSP): apps/api/src/console
  await installConsole(fastify);

  if (!config.DOCS_ENABLED) return app;
  // the UI's own strict CSP (helmet's global headers keep CSP off: the API answers JSON)
  installDocsCsp(fastify);
  // The document is built on the first request for it (/docs, /docs/openapi.json …), once, not at
  // boot: scanning every route and converting the contracts' schemas is a few hundred ms of CPU that
  // each start (each `npm run dev` reload) would otherwise spend before answering.
  const doc = (): OpenAPIObject =>
    addA2AOpenApi(
      SwaggerModule.createDocument(
        app,
        new DocumentBuilder()
          .setTitle('A2A control plane')
          .setDescription(
            'Admin API (`/v1`): publish agents, revisions and A2A bindings; read runs and their event logs. ' +
              'Every `/v1` route takes an API key, in `X-API-Key` or as `Authorization: Bearer <key>`. ' +
              'A2A endpoints (tags `a2a-jsonrpc`, `a2a-http-json`, `agent-cards`): A2A v1.0 over JSON-RPC and HTTP+JSON, and v0.3 JSON-RPC.',
          )
          .setVersion('1')
          .setExternalDoc('A2A specification', A2A_SPEC_URL)
          .addApiKey(API_KEY_SCHEME_DOC, API_KEY_SCHEME)
          .addBearerAuth(BEARER_SCHEME_DOC, BEARER_SCHEME)
          .build(),
        { standardSchemaConverter: contractSchemaConverter },
      ),
    );
  SwaggerModule.setup('docs', app, doc, { jsonDocumentUrl: 'docs/openapi.json' });
  return app;
}


/** `TRUST_PROXY=<n>`: the nearest n proxies are believed (Fastify's trust function form). */
function trustHops(n: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < n;
}
