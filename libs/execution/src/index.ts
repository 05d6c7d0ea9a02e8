/**
 * Execution — running runtimes against runs, independent of the transport that delivers the
 * triggers (apps/worker wires BullMQ to it): the executor (runtime registry, bounded config
 * cache, cancellation, the batching RuntimeContext, the lost-run policy) and the sweeper.
 */
export { ExecutionModule, SweeperModule } from './execution.module.js';
export { RunExecutor, ExecutionError } from './run-executor.js';
export { type ExecutionWrapper } from './prepared-dispatch.js';
export { type JobIntake } from './execution-admission.js';
export { RunSweeper } from './run-sweeper.js';
export { LostExecutionPolicy } from './lost-execution.policy.js';
export { ExecutionSlots, type SlotRequest } from './execution-slots.js';
export { BatchingRuntimeContext } from './batching-runtime-context.js';
/** BullMQ connection options, for the transport that feeds the executor (re-exported from libs/runs). */
export { bullConnection, type RunExecutionJob } from '#libs/runs';
