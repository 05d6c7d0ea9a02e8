import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { loadConfig, nestLogLevels, type AppConfig } from '#libs/config';
import { AppModule } from './app.module.js';
import { AppExceptionFilter } from './common/app-exception.filter.js';
import { MalformedJson } from './common/malformed-json.js';
import { installHttpMetrics } from './common/http-metrics.js';
import { Metrics } from '#libs/metrics';

export type ConfigOverrides = Partial<Record<keyof AppConfig, string>>;

/** Content types whose bodies are parsed as JSON (A2A v1.0 §11.2 accepts application/a2a+json). */
export const JSON_CONTENT_TYPES = ['application/json', 'application/a2a+json'];

/**
 * Build the API app (not listening). Logging is pino through Fastify, with credentials redacted.
 * Used by main.ts, the demo and the tests.
 */
export async function createApiApp(overrides: ConfigOverrides = {}): Promise<NestFastifyApplication> {
  const config = loadConfig({ ...process.env, ...overrides });
  const adapter = new FastifyAdapter({
    logger:
      config.LOG_LEVEL === 'silent'
        ? false
        : {
            level: config.LOG_LEVEL,
            redact: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie'],
          },
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => (typeof req.headers['x-request-id'] === 'string' ? req.headers['x-request-id'] : randomUUID()),
    bodyLimit: 10 * 1024 * 1024,
  });
  // Never reject a body at parse time: each edge answers malformed JSON in its own protocol.
  const fastify = adapter.getInstance();
  fastify.removeContentTypeParser(['application/json']);
  fastify.addContentTypeParser(JSON_CONTENT_TYPES, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.length === 0) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(null, new MalformedJson(e instanceof Error ? e.message : 'invalid JSON'));
    }
  });

  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(overrides), adapter, {
    bodyParser: false,
    logger: nestLogLevels(config.LOG_LEVEL),
  });
  app.useGlobalFilters(new AppExceptionFilter());
  installHttpMetrics(fastify, app.get(Metrics));
  app.enableShutdownHooks();

  const doc = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('A2A control plane — admin API')
      .setDescription('Publish agents, revisions and A2A bindings; read runs and their event logs.')
      .setVersion('1')
      .addBearerAuth()
      .build(),
  );
  SwaggerModule.setup('docs', app, doc, { jsonDocumentUrl: 'docs/openapi.json' });
  return app;
}

