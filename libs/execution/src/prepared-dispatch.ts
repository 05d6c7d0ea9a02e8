import type { CanonicalMessage, RunExecuteJob } from '#libs/contracts';
import type { RunExecutionJob } from '#libs/runs';
import type { SlotTicket } from './execution-slots.js';

// The two shapes that RunExecutor (which prepares, claims and runs a dispatch) and
// ExecutionAdmission (which decides when it starts) share; here because the executor constructs
// the admission, so the admission cannot import the executor's file (no import cycles).

/**
 * How a transport wraps one execution (e.g. in its span): call `run` and return its outcome.
 * `triggerSequence` is the sequence of the dispatch's trigger.
 */
export type ExecutionWrapper = (job: RunExecuteJob, triggerSequence: number, run: () => Promise<void>) => Promise<void>;

/** A dispatch of a batch, ready to ask for a slot: parsed, its run's identity and input known. */
export interface Prepared {
  item: RunExecutionJob;
  job: RunExecuteJob;
  run: { threadId: string; agentId: string; revisionId: string };
  input: CanonicalMessage;
  ticket: SlotTicket;
  /**
   * The slot it holds or asks for: its member in the slot sets (new for each dispatch; a slot
   * handed on keeps its member and changes holders) and when its expiry was last set (ms).
   */
  slot: { id: string; at: number };
  /**
   * Its fencing token, set by its claim (the run's `execution_epoch` then): every write of its
   * execution carries it. Undefined for a dispatch with no outbox row (nothing to claim).
   */
  epoch?: number;
  /** While parked: when its outbox row was last marked held (ms; ExecutionAdmission.holdRows). */
  heldAt?: number;
}
