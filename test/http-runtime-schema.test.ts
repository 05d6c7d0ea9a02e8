import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRuntimeJsonSchema } from '#libs/contracts';
import { startStack, type Stack } from './support/stack.js';

/**
 * The http runtime's JSON Schema is shipped as docs/http-runtime.schema.json and served at
 * `GET /schemas/http-runtime` (public, in the OpenAPI document); both are exactly
 * `httpRuntimeJsonSchema()`, so neither can drift from the contract. After changing the contract,
 * regenerate the file: `UPDATE_HTTP_RUNTIME_SCHEMA=1 npx vitest run test/http-runtime-schema.test.ts`.
 */
const FILE = 'docs/http-runtime.schema.json';
/** The file's exact text: 2-space JSON and a final newline. */
const render = () => `${JSON.stringify(httpRuntimeJsonSchema(), null, 2)}\n`;
let stack: Stack;

beforeAll(async () => {
  if (process.env.UPDATE_HTTP_RUNTIME_SCHEMA === '1') await writeFile(FILE, render());
  stack = await startStack({ worker: false, env: { DOCS_ENABLED: 'true' } });
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

describe('the http runtime JSON Schema', () => {
  it(`${FILE} is httpRuntimeJsonSchema(), byte for byte`, async () => {
    const text = await readFile(FILE, 'utf8');
    expect(text, `${FILE} is stale: UPDATE_HTTP_RUNTIME_SCHEMA=1 npx vitest run test/http-runtime-schema.test.ts`).toBe(render());
    const schema = JSON.parse(text) as Record<string, { $schema?: string }>;
    expect(Object.keys(schema).sort()).toEqual(['config', 'operation', 'request', 'result']);
    expect(schema.config!.$schema).toMatch(/json-schema\.org/);
  });

  it('is served without an API key at GET /schemas/http-runtime, and listed in the OpenAPI document', async () => {
    const res = await fetch(`${stack.baseUrl}/schemas/http-runtime`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(await res.json()).toEqual(JSON.parse(await readFile(FILE, 'utf8')));
    // a wrong key changes nothing: the route takes none
    expect((await fetch(`${stack.baseUrl}/schemas/http-runtime`, { headers: { authorization: 'Bearer nope' } })).status).toBe(200);
    // only GET
    expect((await fetch(`${stack.baseUrl}/schemas/http-runtime`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${stack.baseUrl}/schemas/other`)).status).toBe(404);
    const doc = (await (await fetch(`${stack.baseUrl}/docs/openapi.json`)).json()) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    const op = doc.paths['/schemas/http-runtime']?.get;
    expect(op).toBeDefined();
    expect(op!.security ?? []).toEqual([]);
  });
});
