import { z } from 'zod';
import { ErrorResponseSchema } from './admin.schema.js';
import { ArtifactChunkSchema, CanonicalMessageSchema, PartSchema } from './parts.schema.js';
import { RunEventSchema } from './run-events.schema.js';
import { RuntimeConfigSchema, ScriptedStepSchema } from './runtime.schema.js';

/**
 * JSON Schemas of the contracts, generated from the zod schemas above for the OpenAPI document
 * (OpenAPI 3.0 dialect: `nullable`, no `$id` / `$schema`). Nothing here is hand-written: a new
 * runtime kind or event type appears in the document as soon as its zod schema exists.
 */

/** One entry of a run's event log as `GET /v1/runs/{runId}/events` returns it (SequencedOutputEnvelope). */
export const SequencedOutputEnvelopeSchema = z.object({
  runId: z.string(),
  /** The A2A contextId. */
  threadId: z.string(),
  /** Gapless per run, from 1. */
  sequence: z.int().min(1),
  occurredAt: z.string().describe('ISO-8601 time the event was committed'),
  event: RunEventSchema,
});

/** An OpenAPI 3.0 Schema Object. */
export type OpenApiSchema = Record<string, unknown>;

/** Where the components live in the document: every `$ref` the schemas carry points there. */
export const OPENAPI_SCHEMA_PREFIX = '#/components/schemas/';

/** `scripted` → `ScriptedRuntimeConfig`, `a2a` → `A2aRuntimeConfig`. */
export function runtimeConfigComponentName(kind: string): string {
  return `${kind.charAt(0).toUpperCase()}${kind.slice(1)}RuntimeConfig`;
}

/** The `kind` of each member of RuntimeConfigSchema, in declaration order. */
export function runtimeKinds(): string[] {
  return RuntimeConfigSchema.options.map((o) => o.shape.kind.value);
}

function convertRegistry(entries: ReadonlyArray<readonly [z.ZodType, string]>, io: 'input' | 'output'): Record<string, OpenApiSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [schema, id] of entries) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'openapi-3.0',
    io,
    // refinements are dropped (JSON Schema cannot say "exactly one of text, parts"); transforms read as any
    unrepresentable: 'any',
    uri: (id) => `${OPENAPI_SCHEMA_PREFIX}${id}`,
  });
  return Object.fromEntries(Object.entries(schemas).map(([id, s]) => [id, stripIds(s as OpenApiSchema)]));
}

function stripIds(schema: OpenApiSchema): OpenApiSchema {
  const { $id: _id, $schema: _schema, ...rest } = schema;
  return rest;
}

/**
 * The components: `RuntimeConfig` (a `oneOf` over every runtime kind, with a `kind`
 * discriminator; request shape: defaults are optional), one `<Kind>RuntimeConfig` per kind,
 * `ScriptedStep` (recursive through interaction branches), and the event log's `RunEvent` (a
 * `oneOf` discriminated by `type`), `SequencedOutputEnvelope`, `Message`, `ArtifactChunk`, `Part`
 * (response shape: defaults are filled in).
 */
export function contractJsonSchemas(): Record<string, OpenApiSchema> {
  const runtimes = convertRegistry(
    [
      [RuntimeConfigSchema, 'RuntimeConfig'],
      ...RuntimeConfigSchema.options.map((o) => [o, runtimeConfigComponentName(o.shape.kind.value)] as const),
      [ScriptedStepSchema, 'ScriptedStep'],
      [PartSchema, 'Part'],
    ],
    'input',
  );
  runtimes.RuntimeConfig = {
    ...runtimes.RuntimeConfig,
    description: 'A revision\'s runtime config, by `kind` (validated by that runtime when a revision is drafted and published).',
    discriminator: {
      propertyName: 'kind',
      mapping: Object.fromEntries(runtimeKinds().map((k) => [k, `${OPENAPI_SCHEMA_PREFIX}${runtimeConfigComponentName(k)}`])),
    },
  };
  const events = convertRegistry(
    [
      [SequencedOutputEnvelopeSchema, 'SequencedOutputEnvelope'],
      [RunEventSchema, 'RunEvent'],
      [CanonicalMessageSchema, 'Message'],
      [ArtifactChunkSchema, 'ArtifactChunk'],
      [PartSchema, 'Part'],
      [ErrorResponseSchema, 'ErrorResponse'],
    ],
    'output',
  );
  events.RunEvent = { ...events.RunEvent, description: 'A canonical run event (the payload of one row of the event log), by `type`.' };
  return { ...runtimes, ...events };
}
