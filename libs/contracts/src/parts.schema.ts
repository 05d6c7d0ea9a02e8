import { z } from 'zod';

/**
 * Canonical content part. Deliberately the same shape as A2A v1.0 `Part` in ProtoJSON
 * (a2a.proto `message Part`): exactly one of `text`, `raw` (base64 bytes), `url`, `data`.
 * The v0.3 adapter converts to and from v0.3's `kind`-tagged parts.
 */
export const PartSchema = z
  .object({
    text: z.string().optional(),
    raw: z.string().base64().optional(),
    url: z.string().url().optional(),
    data: z.unknown().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    filename: z.string().optional(),
    mediaType: z.string().optional(),
  })
  .strict()
  .refine(
    (p) => [p.text, p.raw, p.url, p.data].filter((v) => v !== undefined).length === 1,
    { message: 'a part has exactly one of text, raw, url, data' },
  );
export type Part = z.infer<typeof PartSchema>;

/** Message author role, canonical spelling (A2A v1.0 maps ROLE_USER/ROLE_AGENT). */
export const RoleSchema = z.enum(['user', 'agent']);
export type Role = z.infer<typeof RoleSchema>;

/** A message as stored in the log (`message.added` payload) and its projection. */
export const CanonicalMessageSchema = z.object({
  messageId: z.string().min(1),
  role: RoleSchema,
  parts: z.array(PartSchema).min(1),
  metadata: z.record(z.string(), z.unknown()).optional(),
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});
export type CanonicalMessage = z.infer<typeof CanonicalMessageSchema>;

/** An artifact chunk as stored in the log (`artifact.updated` payload). */
export const ArtifactChunkSchema = z.object({
  artifactId: z.string().min(1),
  name: z.string().optional(),
  description: z.string().optional(),
  parts: z.array(PartSchema).min(1),
  metadata: z.record(z.string(), z.unknown()).optional(),
  extensions: z.array(z.string()).optional(),
  /** true: these parts are appended to the artifact's existing parts (A2A `append`). */
  append: z.boolean().default(false),
  /** true: the artifact is complete (A2A `lastChunk`). */
  lastChunk: z.boolean().default(false),
});
export type ArtifactChunk = z.infer<typeof ArtifactChunkSchema>;
export type ArtifactChunkInput = z.input<typeof ArtifactChunkSchema>;

/** Concatenated text of a message's text parts (used by runtimes for matching). */
export function messageText(parts: readonly Part[]): string {
  return parts
    .map((p) => p.text)
    .filter((t): t is string => typeof t === 'string')
    .join('\n');
}
