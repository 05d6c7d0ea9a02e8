import { z } from 'zod';
import type { AgentMessageInput, AgentRuntime, RuntimeContext } from '#libs/runtimes';
import type { CanonicalMessage } from '#libs/contracts';

/**
 * A complete custom runtime: kind `word-count`. It counts the words of the user's message, streams
 * one artifact chunk per `chunkSize` words (so a streaming client sees progress), and completes
 * with a summary. `hello` gets a direct reply (A2A: a Message, no task). A message of more than
 * `maxWords` words is rejected. Everything it does goes through the RuntimeContext: each call is
 * one event of the run's log, committed by the platform.
 *
 * Config (validated when a revision is drafted, and again at publish):
 *   { "kind": "word-count", "chunkSize": 5, "maxWords": 1000 }
 */
const WordCountConfigSchema = z.strictObject({
  kind: z.literal('word-count'),
  chunkSize: z.int().min(1).max(100).default(5),
  maxWords: z.int().min(1).max(100_000).default(1000),
});
export type WordCountConfig = z.infer<typeof WordCountConfigSchema>;

export class WordCountRuntime implements AgentRuntime<WordCountConfig> {
  readonly kind = 'word-count';

  /** Throws a ZodError (the admin API answers 422 with the issues under `runtime.`). */
  parseConfig(raw: unknown): WordCountConfig {
    return WordCountConfigSchema.parse(raw);
  }

  /** Runs on the request path: pure and fast. Non-null answers without creating a task. */
  directReply(_config: WordCountConfig, input: CanonicalMessage): AgentMessageInput | null {
    return textOf(input).trim().toLowerCase() === 'hello' ? { parts: [{ text: 'Hello! Send me some text and I will count its words.' }] } : null;
  }

  async execute(config: WordCountConfig, ctx: RuntimeContext): Promise<void> {
    const words = textOf(ctx.input).split(/\s+/).filter(Boolean);
    if (words.length > config.maxWords) {
      await ctx.setStatus('rejected', { parts: [{ text: `Too long: ${words.length} words (at most ${config.maxWords}).` }] });
      return;
    }
    await ctx.setStatus('working', { parts: [{ text: `Counting ${words.length} words…` }] });
    for (let i = 0; i < words.length; i += config.chunkSize) {
      if (ctx.signal.aborted) return; // canceled: stop quietly, the platform recorded the cancel
      const slice = words.slice(i, i + config.chunkSize);
      await ctx.emitArtifact({
        artifactId: 'counts',
        name: 'counts.txt',
        parts: [{ text: slice.map((w, j) => `${i + j + 1}. ${w}\n`).join('') }],
        append: i > 0,
        lastChunk: i + config.chunkSize >= words.length,
      });
    }
    const longest = words.reduce((a, w) => (w.length > a.length ? w : a), '');
    await ctx.setStatus('completed', { parts: [{ text: `${words.length} words; the longest is "${longest}".` }] });
  }
}

function textOf(m: CanonicalMessage): string {
  return m.parts.map((p) => p.text ?? '').join(' ');
}
