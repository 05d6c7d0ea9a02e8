import type { AppConfig } from '#libs/config';

/**
 * What a worker reads of a tenant's backend (`http`) or upstream (`a2a`) answer: at most
 * `maxAnswerBytes` of an answer read whole (a JSON answer), at most `maxEventBytes` of one event of
 * a streamed answer (an NDJSON line, an SSE event). A run whose answer breaks one fails with the
 * reason ("… exceeds N bytes"), and the answer's connection is closed.
 */
export interface AnswerBudget {
  maxAnswerBytes: number;
  maxEventBytes: number;
}

/** The defaults of RUNTIME_MAX_ANSWER_BYTES and RUNTIME_MAX_EVENT_BYTES: 4 MiB each. */
export const DEFAULT_ANSWER_BUDGET: AnswerBudget = { maxAnswerBytes: 4 * 1024 * 1024, maxEventBytes: 4 * 1024 * 1024 };

/** The budget a deployment configured (RUNTIME_MAX_ANSWER_BYTES, RUNTIME_MAX_EVENT_BYTES). */
export function answerBudget(config: AppConfig): AnswerBudget {
  return { maxAnswerBytes: config.RUNTIME_MAX_ANSWER_BYTES, maxEventBytes: config.RUNTIME_MAX_EVENT_BYTES };
}
