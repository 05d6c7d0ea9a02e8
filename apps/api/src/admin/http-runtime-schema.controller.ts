import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { httpRuntimeJsonSchema } from '#libs/contracts';

/**
 * The `http` runtime's wire contract as JSON Schema (draft 2020-12), for people writing a backend:
 * `{ config, request, operation, result }` — the revision's runtime config, what the worker POSTs,
 * one operation the backend answers with, the JSON answer (`httpRuntimeJsonSchema()`,
 * libs/contracts; docs/runtimes.md). Public (no API key): it is documentation. The same document
 * is shipped as docs/http-runtime.schema.json (test/http-runtime-schema.test.ts keeps them equal).
 */
@ApiTags('schemas')
@Controller('schemas')
export class HttpRuntimeSchemaController {
  private readonly schema = httpRuntimeJsonSchema();

  @Get('http-runtime')
  @Header('cache-control', 'public, max-age=3600')
  @ApiOperation({ summary: "The http runtime's JSON Schema (config, request, operation, result); public, no API key" })
  @ApiOkResponse({
    description: 'JSON Schema documents keyed by what they describe',
    schema: { type: 'object', required: ['config', 'request', 'operation', 'result'], properties: { config: { type: 'object' }, request: { type: 'object' }, operation: { type: 'object' }, result: { type: 'object' } } },
  })
  get(): Record<string, unknown> {
    return this.schema;
  }
}
