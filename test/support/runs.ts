import type { INestApplicationContext } from '@nestjs/common';
import {
  CancelRunHandler,
  ContinueRunHandler,
  CreateRunHandler,
  RespondInteractionHandler,
  RunQueries,
  RuntimeOperations,
  type ContinueRunCommand,
  type CreateRunCommand,
} from '#libs/runs';

/**
 * Test convenience over the core's public surface: the command handlers, runtime operations and
 * queries of one Nest context, under short names. `continueRun` maps a message on a run the way
 * the A2A adapter does (an answer when the run is blocked on an interaction).
 */
export function runsOf(ctx: Pick<INestApplicationContext, 'get'>) {
  const create = ctx.get(CreateRunHandler);
  const cont = ctx.get(ContinueRunHandler);
  const respond = ctx.get(RespondInteractionHandler);
  const cancel = ctx.get(CancelRunHandler);
  const ops = ctx.get(RuntimeOperations);
  const queries = ctx.get(RunQueries);
  return {
    ops,
    queries,
    createRun: (cmd: CreateRunCommand) => create.execute(cmd),
    async continueRun(cmd: ContinueRunCommand) {
      const run = await queries.requireRun(cmd.orgId, cmd.runId, cmd.agentId);
      return run.openInteractionId ? respond.execute({ ...cmd, interactionId: run.openInteractionId }) : cont.execute(cmd);
    },
    cancelRun: (orgId: string, runId: string, agentId?: string) => cancel.execute({ orgId, runId, agentId }),
    setStatus: ops.setStatus.bind(ops),
    emitMessage: ops.emitMessage.bind(ops),
    emitArtifact: ops.emitArtifact.bind(ops),
    requestInteraction: ops.requestInteraction.bind(ops),
    failRun: ops.failRun.bind(ops),
    readEvents: queries.readEvents.bind(queries),
    view: queries.view.bind(queries),
    requireRun: queries.requireRun.bind(queries),
    getRun: queries.get.bind(queries),
    waitUntilSettled: queries.waitUntilSettled.bind(queries),
  };
}
export type TestRuns = ReturnType<typeof runsOf>;
